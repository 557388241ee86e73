"""Performance-critical ops, each a `torch.ops.symfast.<name>` custom op.

One folder per op: `__init__.py` (public function, validation and device dispatch),
`_op.py` (the torch.library registrations: custom ops, fakes, autograd; fourier_mlp, gram,
matching; the older folders still register in `__init__.py`), `reference.py` (the plain
PyTorch/SciPy ground truth), `cpu.py` (launcher of the C++ kernel in `csrc/<op>.cpp`) and,
where one exists, `triton.py`. Backend names and resolution ("auto", "cpu", "triton",
"reference") live once in `symfast.ops._dispatch`. Ops never import the studies above them
(`symfast.readout.matching.matching_scores` is built on `matching`).

    op folder          torch.ops.symfast.*                                C++ kernel              Triton
    fourier_features   fourier_features                                   fourier_features.cpp    -
    fourier_mlp        fourier_mlp, fourier_mlp_backward, _train_step     fourier_mlp.cpp (+impl) triton.py
    gram               gram                                               gram.cpp                -
    gram_scores        gram_scores, gram_scores_blockperm                 gram_scores.cpp         triton.py
    rnn_rollout        rnn_rollout                                        rnn_rollout.cpp         triton.py
    rnn_train          rnn_train_step, rnn_train_loss                     rnn_train.cpp (+impl)   triton.py
    ordered_schur      ordered_schur, ordschur                            ordered_schur.cpp       -
    matching           assign, match_gram, match_signed_lifts             matching.cpp            -
                       (+ lifts.py: lifts applied to first layers, residuals of a chunk of models)

Tests: tests/ops/test_<op>.py (and test_transforms.py for torch.compile / torch.func);
benchmarks: benchmarks/benchmarks/bench_<op>.py.
"""

OP_MODULES = ("fourier_features", "fourier_mlp", "gram", "gram_scores", "rnn_rollout", "rnn_train", "ordered_schur",
              "matching")


def register_all() -> None:
    """Register every `torch.ops.symfast.*` op (importing their modules; `import symfast` alone is lazy
    and registers none). Call it before `torch.export.load` of a program holding symfast ops, in a
    process that has not used them yet: the loader resolves ops by name only."""
    import importlib

    for name in OP_MODULES:
        importlib.import_module(f"symfast.ops.{name}")
