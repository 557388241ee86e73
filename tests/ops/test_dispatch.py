"""Backend resolution (symfast.ops._dispatch): one set of names, clear errors, one-time fallback warning."""
import warnings

import pytest
import torch

from symfast import _ext
from symfast.ops import _dispatch
from symfast.ops.fourier_features import fourier_features, reference
from symfast.testing import assert_close


def test_names_and_errors():
    cpu = torch.device("cpu")
    assert _dispatch.resolve("op", "reference", cpu) == "reference"
    with pytest.raises(ValueError, match=r"backend must be one of \['auto', 'cpu', 'triton', 'reference'\]"):
        _dispatch.resolve("op", "cuda", cpu)
    with pytest.raises(ValueError, match="op has no C\\+\\+ kernel"):
        _dispatch.resolve("op", "cpu", cpu, cpu=False)
    with pytest.raises(ValueError, match="op has no Triton kernel"):
        _dispatch.resolve("op", "triton", cpu)
    with pytest.warns(DeprecationWarning, match="'cpp' is deprecated; use 'cpu'"):
        _dispatch.check_name("cpp")
    if _ext.cpp_available():
        assert _dispatch.resolve("op", "auto", cpu) == "cpu"
    assert _dispatch.resolve("op", "auto", cpu, cpu=False) == "reference"


def test_cpu_without_extension_warns_once_and_uses_reference(monkeypatch):
    monkeypatch.setattr(_ext, "cpp_available", lambda: False)
    monkeypatch.setattr(_dispatch, "_warned", set())
    x, w, b = torch.rand(5, 2), torch.randn(3, 2), torch.zeros(3)
    with pytest.warns(RuntimeWarning, match="symfast._C is not built; using the \\(slower\\) PyTorch reference"):
        out = fourier_features(x, w, b)
    assert_close("features", reference.fourier_features(x, w, b), out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fourier_features(x, w, b)  # warned once per op


def test_cuda_without_triton_warns_once(monkeypatch):
    monkeypatch.setattr(_ext, "HAS_TRITON", False)
    monkeypatch.setattr(_dispatch, "_warned", set())
    with pytest.warns(RuntimeWarning, match="triton is not installed"):
        assert _dispatch.resolve("gram_scores", "auto", torch.device("cuda"), triton=True) == "reference"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _dispatch.resolve("gram_scores", "auto", torch.device("cuda"), triton=True)


@pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
@pytest.mark.parametrize("call", [
    lambda C, a: C.gram_fwd_f64(a),
    lambda C, a: C.sym_stats_f64(a),
    lambda C, a: C.ordered_schur_f64(a, 0.9, 1e-9),
    lambda C, a: C.lsa_batched(a),
], ids=["gram", "sym_stats", "ordered_schur", "lsa"])
def test_cpp_kernels_refuse_arrays_they_would_copy(call):
    """The C++ entry points take arrays as they are (pybind11 `noconvert`): a wrong dtype or a
    non-contiguous view is a TypeError, never a silent converted copy."""
    import numpy as np

    C = _ext.require_cpp()
    good = np.zeros((2, 3, 3))
    call(C, good)  # the exact dtype and layout is accepted
    for bad in (good.astype(np.float32), np.zeros((2, 3, 6))[:, :, ::2]):
        with pytest.raises(TypeError):
            call(C, bad)


# ---- backend="auto" taken by the ops themselves --------------------------------------------
# Every torch.ops.symfast op takes "auto" and resolves it inside its kernel by its public function's
# rule, so a traced or exported graph holds "auto". BE marks where the backend goes in each call.
F64 = torch.float64
BE = object()


def _auto_cases():
    """op name -> (args with BE for the backend, the public rule's resolution of "auto" for them)."""
    import symfast as sf
    from symfast.ops import fourier_features as ff, gram, gram_scores, matching, ordered_schur, rnn_rollout, rnn_train
    from symfast.ops.fourier_mlp import resolve_backend as mlp_rule

    g = torch.Generator().manual_seed(0)

    def r(*shape, scale=1.0):
        return torch.randn(*shape, generator=g, dtype=F64) * scale

    x, f, p = torch.rand(2, 9, 2, generator=g, dtype=F64) * 2 - 1, r(3, 2), r(3)
    ws, bs = [r(2, 6, 5, scale=0.4), r(2, 5, 1, scale=0.4)], [r(2, 5, scale=0.3), r(2, 1, scale=0.3)]
    t, cot, n = r(2, 9), r(2, 9), r(2, 9, 2)
    mlp = mlp_rule("auto", x.device, x.dtype, ws)
    W1 = r(3, 5, 7)
    phi, rho = gram.reference.gram(W1), torch.linalg.qr(r(2, 5, 5))[0]
    A, B = r(3, 5, 4), r(3, 5, 4)
    code = int(matching.mode_code("sign"))
    src = torch.tensor([[1, 0, 2, 3], [0, 1, 3, 2]])
    sign = torch.tensor([[1.0, -1.0, 1.0, 1.0], [1.0, 1.0, -1.0, 1.0]], dtype=F64)
    Ws = r(3, 5, 5)
    s = sf.ordered_schur(Ws)
    labels = torch.from_numpy((s.block_start.numpy() % 3).astype("float64"))
    rx, rh = r(2, 4, 3), r(2, 6)
    tw, tx, ty = r(2, 6, 6, scale=0.3), r(2, 3, 4, 3), r(2, 3, 4, 2)
    match = matching.resolve_backend("auto")
    return {
        "fourier_features": ((x, f, p, BE), ff.resolve_backend("auto", x)),
        "fourier_mlp": ((x, f, p, ws, bs, "tanh", BE), mlp),
        "fourier_mlp_backward": ((cot, x, f, p, ws, bs, "tanh", BE, True), mlp),
        "fourier_mlp_train_step": ((x, t, f, p, ws, bs, "tanh", BE), mlp),
        "fourier_mlp_jet": ((x, f, p, ws, bs, "tanh", BE), mlp),
        "fourier_mlp_jet_backward": ((cot, n, x, f, p, ws, bs, "tanh", BE, True), mlp),
        "fourier_mlp_eikonal_step": ((x, t, n, f, p, ws, bs, "relu", 0.1, 0.2, BE), mlp),
        "gram": ((W1, BE), gram.resolve_backend("auto", W1)),
        "gram_scores": ((phi, rho, True, BE), gram_scores.resolve_backend("auto", phi)),
        "gram_scores_blockperm": ((phi[:, :4, :4], torch.tensor([[1, 0]]), torch.eye(2, dtype=F64).expand(1, 2, 2, 2),
                                   4, True, BE), gram_scores.resolve_backend("auto", phi)),
        "assign": ((r(3, 5, 5).abs(), BE), match),
        "match_gram": ((A @ B.transpose(1, 2), A.pow(2).sum(-1), B.pow(2).sum(-1), code, BE), match),
        "match_signed_lifts": ((r(2, 6, 4), src, sign, code, BE), match),
        "ordered_schur": ((Ws, 0.9, 1e-9, BE), ordered_schur.resolve_backend("auto", "ordered_schur")),
        "ordschur": ((s.Q, s.T, labels, BE), ordered_schur.resolve_backend("auto", "ordschur")),
        "rnn_rollout": ((r(2, 6, 6, scale=0.3), r(6, 3), r(2, 6), rx, rh, True, BE),
                        rnn_rollout.resolve_backend("auto", rx, True)),
        "rnn_train_step": ((tw, r(2, 6, 3), r(2, 2, 6), tx, ty, None, None, None, True, True, BE),
                           rnn_train.resolve_backend("auto", tx, tw)),
        "rnn_train_loss": ((tw, r(2, 6, 3), r(2, 2, 6), tx, ty, None, None, None, BE),
                           rnn_train.resolve_backend("auto", tx, tw)),
    }


def _call(op: str, args, backend: str) -> list:
    out = getattr(torch.ops.symfast, op)(*[backend if a is BE else a for a in args])
    return list(out) if isinstance(out, (list, tuple)) else [out]


def test_every_registered_op_has_an_auto_case():
    from symfast.ops import OPS

    assert sorted(_auto_cases()) == sorted(OPS)


@pytest.mark.parametrize("op", sorted(_auto_cases()))
def test_auto_runs_the_kernel_the_public_rule_picks(op):
    """backend="auto" on the op gives, output by output, exactly what the backend its public function
    resolves for these tensors gives (on a CPU build: the C++ kernel)."""
    args, resolved = _auto_cases()[op]
    assert resolved == ("cpu" if _ext.cpp_available() else "reference")
    auto, pinned = _call(op, args, "auto"), _call(op, args, resolved)
    assert len(auto) == len(pinned)
    for i, (a, b) in enumerate(zip(auto, pinned)):
        assert torch.equal(a, b), f"{op} output {i}: auto != {resolved}"


@pytest.mark.parametrize("op", sorted(_auto_cases()))
def test_auto_is_resolved_when_the_op_runs(op, monkeypatch):
    """With symfast._C reported unbuilt at run time (as on a machine without it), the same op call with
    "auto" runs the reference, with the one-time warning: the name is resolved per call, not fixed."""
    args, _ = _auto_cases()[op]
    ref = _call(op, args, "reference")
    monkeypatch.setattr(_ext, "cpp_available", lambda: False)
    monkeypatch.setattr(_dispatch, "_warned", set())
    with pytest.warns(RuntimeWarning, match="symfast._C is not built; using the"):
        auto = _call(op, args, "auto")
    for i, (a, b) in enumerate(zip(auto, ref)):
        assert torch.equal(a, b), f"{op} output {i}: auto != reference without _C"


@pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
def test_auto_on_a_model_the_kernel_cannot_take_runs_the_reference():
    """The op applies the whole public rule, the kernel's limits included: K = 2 outputs run the
    reference under "auto" (the C++ kernel takes one output, and "cpu" says so)."""
    import symfast.ops.fourier_mlp  # noqa: F401  (registers the ops)

    g = torch.Generator().manual_seed(1)
    x, f, p = (torch.rand(2, 7, 2, generator=g, dtype=F64), torch.randn(3, 2, generator=g, dtype=F64),
               torch.zeros(3, dtype=F64))
    ws = [torch.randn(2, 6, 4, generator=g, dtype=F64), torch.randn(2, 4, 2, generator=g, dtype=F64)]
    bs = [torch.zeros(2, 4, dtype=F64), torch.zeros(2, 2, dtype=F64)]
    ref = torch.ops.symfast.fourier_mlp(x, f, p, ws, bs, "relu", "reference")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the one-time fallback warning, if not already given
        assert torch.equal(torch.ops.symfast.fourier_mlp(x, f, p, ws, bs, "relu", "auto"), ref)
    with pytest.raises(ValueError, match="backend='cpu' does not support this model .*use backend='reference'"):
        torch.ops.symfast.fourier_mlp(x, f, p, ws, bs, "relu", "cpu")


@pytest.mark.parametrize("op", sorted(_auto_cases()))
def test_unknown_backend_names_are_refused_by_name(op):
    args, _ = _auto_cases()[op]
    for name in ("Auto", "gpu", "cpp"):
        with pytest.raises(ValueError, match=rf"{op}: backend must be one of \['auto', .*'reference'\], got '{name}'"):
            _call(op, args, name)


def _public_calls(backend: str) -> None:
    """One call of every public entry point that reaches a symfast op (and the backward ops through
    autograd), each with `backend` when given, else with its default."""
    import numpy as np

    import symfast as sf
    from symfast.ops.fourier_features import fourier_features
    from symfast.ops.gram import gram
    from symfast.ops.gram_scores import BlockPermLift, gram_scores
    from symfast.ops.matching import assign, match_rows
    from symfast.ops.rnn_rollout import rnn_rollout
    from symfast.ops.rnn_train import rnn_train_loss, rnn_train_step
    from symfast.readout.matching import matching_scores

    kw = {} if backend is None else {"backend": backend}
    g = torch.Generator().manual_seed(0)

    def r(*shape, scale=1.0, grad=False):
        return (torch.randn(*shape, generator=g, dtype=F64) * scale).requires_grad_(grad)

    pe = sf.DyadicAxisPE(2)
    fourier_features(torch.rand(4, 2, dtype=F64), r(3, 2), r(3), **kw)
    m = sf.nn.FourierMLPEnsemble(pe, hidden=(8,), num_models=2, dtype=F64, **kw)
    x = torch.rand(2, 6, 2, generator=g, dtype=F64).requires_grad_()
    y = m(x)
    (gx,) = torch.autograd.grad(y.sum(), x, create_graph=True)  # fourier_mlp_backward, fourier_mlp_jet
    gx.pow(2).sum().backward()  # the jet's backward op
    f, p, ws, bs = pe.frequencies.to(F64), pe.phases.to(F64), list(m.weights), list(m.biases)
    t = torch.zeros(2, 6, dtype=F64)
    sf.fourier_mlp_train_step(x.detach(), t, f, p, ws, bs, **kw)
    sf.fourier_mlp_jet(x.detach(), f, p, ws, bs, **kw)
    sf.fourier_mlp_eikonal_step(x.detach(), t, f, p, ws, bs, eikonal=0.1, **kw)
    gram(r(3, 4, 5, grad=True), **kw).sum().backward()
    phi = torch.eye(4, dtype=F64).expand(2, 4, 4) + 0.1
    gram_scores(phi, torch.linalg.qr(r(2, 4, 4))[0], **kw)
    gram_scores(phi, BlockPermLift(torch.tensor([[1, 0]]), torch.eye(2, dtype=F64).expand(1, 2, 2, 2), 4), **kw)
    assign(np.random.default_rng(0).random((2, 4, 4)), **kw)
    match_rows(r(2, 5, 3), r(2, 5, 3), "sign", **kw)
    matching_scores(r(2, 6, 4), [np.eye(4)[[1, 0, 2, 3]]], layout="HD", **kw)
    s = sf.ordered_schur(r(2, 5, 5), **kw)
    sf.ordschur(s.Q, s.T, torch.zeros(2, 5, dtype=torch.int64), **kw)
    W = r(2, 6, 6, scale=0.3, grad=True)
    rnn_rollout(W, r(6, 3), r(2, 6), r(2, 4, 3), **kw).sum().backward()
    args = (r(2, 6, 3), r(2, 2, 6), r(2, 3, 4, 3), r(2, 3, 4, 2))
    rnn_train_step(W.detach(), *args, **kw)
    rnn_train_loss(W, *args, **kw).sum().backward()  # its backward calls rnn_train_step


@pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
@pytest.mark.parametrize("pinned", [None, "cpu"], ids=["unpinned", "pinned_cpu"])
def test_public_functions_hand_the_op_auto_unless_pinned(pinned):
    """Every public entry point (functions, nn modules, autograd's backward ops) passes "auto" into the
    op when the caller left the backend at its default, so traced graphs hold "auto"; a pinned
    backend reaches the op as given. Every registered op is reached."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from symfast.ops import OPS

    class Backends(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = {}

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.namespace == "symfast":
                names = [a.name for a in func._schema.arguments]
                self.seen.setdefault(func._schema.name.split("::")[1], set()).add(args[names.index("backend")])
            return func(*args, **(kwargs or {}))

    with warnings.catch_warnings(), Backends() as mode:
        warnings.simplefilter("ignore")  # (fallback and accuracy warnings are not the point here)
        _public_calls(pinned)
    assert sorted(mode.seen) == sorted(OPS)
    want = {pinned or "auto"}
    assert {op: b for op, b in mode.seen.items() if b != want} == {}
