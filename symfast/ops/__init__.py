"""Performance-critical ops, each a `torch.ops.symfast.<name>` custom op (`OPS` lists them; after
`import symfast`, `torch.ops.symfast` registers each on its first lookup).

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
                       fourier_mlp_jet, _jet_backward, _eikonal_step      (+ jet impl)            -
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

import importlib

import torch
from torch._ops import _OpNamespace

# torch.ops.symfast.<op> -> the op folder that registers it
OPS = {"fourier_features": "fourier_features",
       **dict.fromkeys(["fourier_mlp", "fourier_mlp_backward", "fourier_mlp_train_step", "fourier_mlp_jet",
                        "fourier_mlp_jet_backward", "fourier_mlp_eikonal_step"], "fourier_mlp"),
       "gram": "gram", **dict.fromkeys(["gram_scores", "gram_scores_blockperm"], "gram_scores"),
       "rnn_rollout": "rnn_rollout", **dict.fromkeys(["rnn_train_step", "rnn_train_loss"], "rnn_train"),
       **dict.fromkeys(["ordered_schur", "ordschur"], "ordered_schur"),
       **dict.fromkeys(["assign", "match_gram", "match_signed_lifts"], "matching")}
OP_MODULES = tuple(dict.fromkeys(OPS.values()))


def register_all() -> None:
    """Register every `torch.ops.symfast.*` op now (importing their modules). After `import symfast`,
    `torch.ops.symfast` registers an op on its first lookup (`install_namespace`), so this is needed
    only to pay that cost up front."""
    for name in OP_MODULES:
        importlib.import_module(f"symfast.ops.{name}")


def install_namespace() -> None:
    """Make `torch.ops.symfast` register a symfast op the first time it is asked for it, so
    `torch.ops.symfast.<op>` and `torch.export.load` of a program holding symfast ops work after a
    plain `import symfast` (which calls this). Costs nothing at import: the op's folder (its Python
    wrapper, SciPy where it uses it) loads on that first lookup. Idempotent."""
    if not isinstance(torch.ops.__dict__.get("symfast"), _LazyNamespace):
        # replaces a plain namespace made before symfast was imported (it caches nothing we need)
        setattr(torch.ops, "symfast", _LazyNamespace("symfast"))


class _LazyNamespace(_OpNamespace):
    """torch's op namespace (what `torch.ops.symfast` is, and what the export loader walks attribute by
    attribute) with a hook on a miss: import the op's folder (`OPS`), then look again. torch keeps this
    class private (torch._ops); no public hook exists for a namespace whose ops load on demand.
    torch.library asks the namespace for each op it defines before defining it: the folder is then
    already importing, the import returns at once and the op is (correctly) not there yet."""

    # The export serializer names an op by its packet's module, which the namespace derives from its own
    # class's: keep torch's, so programs exported with this namespace load anywhere ("torch.ops.symfast.*").
    __module__ = _OpNamespace.__module__

    def __getattr__(self, op_name: str):
        try:
            return super().__getattr__(op_name)
        except AttributeError:
            if op_name not in OPS:
                raise
        importlib.import_module(f"symfast.ops.{OPS[op_name]}")
        return super().__getattr__(op_name)
