"""Second-order fused Fourier-PE + MLP (f and grad_x f; losses on both) vs the PyTorch reference:
every output and gradient by name. The reference's jet is itself checked against autograd's
double backward through the plain first-order reference, so the two are independent."""
from __future__ import annotations

import textwrap

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import symfast as sf
from symfast import _ext
from symfast.ops.fourier_mlp import cpu, fourier_mlp, fourier_mlp_eikonal_step, fourier_mlp_jet, reference
from symfast.testing import assert_close, opcheck


needs_cpp = pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
ACTS = ["relu", "tanh", "silu", "sine"]
F64 = torch.float64


def make_problem(B, N, hidden, dtype, shared=False, K=3, seed=0, pe="rff", dim=2):
    """(x, frequencies, phases, weights, biases): random Fourier features (2K frequencies of scale 2,
    random phases) and a random MLP of the given hidden widths with one output."""
    assert pe == "rff"
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(2 * K, dim, generator=g, dtype=F64) * 2.0
    p = torch.rand(2 * K, generator=g, dtype=F64) * 6.28
    x = torch.rand((N, dim) if shared else (B, N, dim), generator=g, dtype=dtype) * 2 - 1
    dims = [4 * K, *hidden, 1]
    ws = [torch.randn(B, a, b, generator=g, dtype=dtype) / a ** 0.5 for a, b in zip(dims[:-1], dims[1:])]
    bs = [torch.randn(B, b, generator=g, dtype=dtype) * 0.3 for b in dims[1:]]
    return x, f.to(dtype), p.to(dtype), ws, bs


def autograd_jet(x, f, p, ws, bs, act):
    """(f, g) by autograd through the plain first-order reference (per-model points)."""
    B = ws[0].shape[0]
    xs = x.expand(B, *x.shape[-2:]).clone().requires_grad_(True)
    y = reference.fourier_mlp(xs, f, p, ws, bs, act)
    g, = torch.autograd.grad(y.sum(), xs, create_graph=True)
    return y, g, xs


def named(prefix, dx, dw, db):
    out = {} if dx is None else {f"{prefix} dx": dx}
    out.update({f"{prefix} dW{l}": g for l, g in enumerate(dw)})
    out.update({f"{prefix} db{l}": g for l, g in enumerate(db)})
    return out


def compare(ref: dict, fast: dict, dtype):
    assert ref.keys() == fast.keys()
    for name in ref:
        assert_close(name, ref[name], fast[name], rms=dtype == torch.float32 and ("dW" in name or "db" in name))


@pytest.mark.parametrize("shared", [False, True], ids=["per-model", "shared"])
@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("act", ACTS)
def test_reference_jet_and_its_vjp_equal_autograd(act, dim, shared):
    x, f, p, ws, bs = make_problem(3, 17, [9, 7], F64, shared, K=3, seed=dim, pe="rff", dim=dim)
    ws = [w.requires_grad_(True) for w in ws]
    bs = [b.requires_grad_(True) for b in bs]
    y, g, xs = autograd_jet(x, f, p, ws, bs, act)
    fj, gj = reference.fourier_mlp_jet(x, f, p, ws, bs, act)
    assert_close("f", y, fj)
    assert_close("g", g, gj)
    gen = torch.Generator().manual_seed(5)
    cf, cg = torch.randn(y.shape, generator=gen, dtype=F64), torch.randn(g.shape, generator=gen, dtype=F64)
    grads = torch.autograd.grad((cf * y).sum() + (cg * g).sum(), [xs, *ws, *bs])
    dx, dw, db = reference.fourier_mlp_jet_vjp(cf, cg, x, f, p, [w.detach() for w in ws],
                                               [b.detach() for b in bs], act, need_dx=True)
    L = len(ws)
    compare(named("vjp", grads[0], grads[1:1 + L], grads[1 + L:]), named("vjp", dx, dw, db), F64)


JET_CASES = [  # B, N, hidden, act, dtype, shared, dim
    (1, 1, [32], "relu", torch.float64, False, 2),
    (3, 63, [64, 64], "tanh", torch.float64, True, 2),
    (2, 130, [20, 13], "silu", torch.float32, False, 3),
    (3, 97, [48, 48], "sine", torch.float32, True, 2),
    (2, 50, [16, 16, 16], "relu", torch.float32, False, 3),
    (1, 1100, [32, 32], "tanh", torch.float32, False, 2),  # several point chunks per model
]
IDS = [f"B{c[0]}-N{c[1]}-H{'x'.join(map(str, c[2]))}-{c[3]}-{str(c[4])[6:]}{'-shared' if c[5] else ''}-{c[6]}d"
       for c in JET_CASES]


@needs_cpp
@pytest.mark.parametrize("B,N,hidden,act,dtype,shared,dim", JET_CASES, ids=IDS)
def test_cpu_jet_backward_and_step_match_reference(B, N, hidden, act, dtype, shared, dim):
    x, f, p, ws, bs = make_problem(B, N, hidden, dtype, shared, K=3, seed=N, pe="rff", dim=dim)
    compare(dict(zip(("f", "g"), reference.fourier_mlp_jet(x, f, p, ws, bs, act))),
            dict(zip(("f", "g"), cpu.fourier_mlp_jet(x, f, p, ws, bs, act))), dtype)
    gen = torch.Generator().manual_seed(3)
    cf, cg = torch.randn(B, N, generator=gen, dtype=dtype), torch.randn(B, N, dim, generator=gen, dtype=dtype)
    compare(named("jet bwd", *reference.fourier_mlp_jet_vjp(cf, cg, x, f, p, ws, bs, act, True)),
            named("jet bwd", *cpu.fourier_mlp_jet_bwd(cf, cg, x, f, p, ws, bs, act, True)[:3]), dtype)
    targets, normals = torch.randn(B, N, generator=gen, dtype=dtype), torch.randn(B, N, dim, generator=gen,
                                                                                 dtype=dtype)
    for nrm, w in ((None, 0.0), (normals, 0.5)):
        terms, dw, db = reference.eikonal_train_step(x, targets, f, p, ws, bs, act, 0.1, nrm, w)
        loss, terms_c, dw_c, db_c = fourier_mlp_eikonal_step(x, targets, f, p, ws, bs, act, eikonal=0.1,
                                                             normals=nrm, normal=w, backend="cpu")
        assert_close("terms", terms, terms_c)
        assert_close("loss", terms[:, 0] + 0.1 * terms[:, 1] + w * terms[:, 2], loss)
        compare(named("step", None, dw, db), named("step", None, dw_c, db_c), dtype)


@needs_cpp
@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_every_instruction_set_variant(isa, dtype):
    widest = _ext.require_cpp().cpu_isa()
    if (isa, widest) in (("avx512", "avx2"), ("avx512", "generic"), ("avx2", "generic")):
        pytest.skip(f"CPU lacks {isa}")
    x, f, p, ws, bs = make_problem(2, 75, [24, 24], dtype, K=3, seed=7, pe="rff")
    t = torch.randn(2, 75, generator=torch.Generator().manual_seed(1), dtype=dtype)
    terms, dw, db = reference.eikonal_train_step(x, t, f, p, ws, bs, "tanh", 0.3)
    terms_c, dw_c, db_c = cpu.eikonal_train_step(x, t, f, p, ws, bs, "tanh", 0.3, isa=isa)
    assert_close(f"{isa} terms", terms, terms_c)
    compare(named(isa, None, dw, db), named(isa, None, dw_c, db_c), dtype)


class OpLog(TorchDispatchMode):
    """Records the symfast ops a computation dispatches."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "symfast":
            self.ops.append(func._opname)
        return func(*args, **(kwargs or {}))


def user_eikonal_grads(model, x, targets, lam=0.1):
    """The eikonal training loop as users write it: autograd.grad in x with create_graph=True."""
    x = x.clone().requires_grad_(True)
    f = model(x)
    g, = torch.autograd.grad(f.sum(), x, create_graph=True)
    loss = (f - targets).pow(2).mean() + lam * (g.norm(dim=-1) - 1).pow(2).mean()
    return torch.autograd.grad(loss, list(model.parameters()))


@needs_cpp
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_users_eikonal_loop_on_fourier_mlp_runs_fused_and_matches_reference(dtype):
    pe = sf.RandomFourierPE(8, scale=2.0, seed=0)
    model = sf.nn.FourierMLP(pe, hidden=(32, 32), activation="tanh", dtype=dtype,
                             generator=torch.Generator().manual_seed(0))
    x = torch.rand(200, 2, generator=torch.Generator().manual_seed(0), dtype=dtype) * 2 - 1
    targets = x.norm(dim=-1) - 0.5
    with OpLog() as log:
        fast = user_eikonal_grads(model, x, targets)
    assert "fourier_mlp_jet" in log.ops and "fourier_mlp_jet_backward" in log.ops, log.ops
    model.backend = "reference"
    ref = user_eikonal_grads(model, x, targets)
    names = [n for n, _ in model.named_parameters()]
    for name, a, b in zip(names, ref, fast):
        assert_close(f"user loop {name}", a, b, rms=dtype == torch.float32)


@needs_cpp
def test_gradcheck_and_gradgradcheck_through_the_fused_jet():
    x, f, p, ws, bs = make_problem(2, 6, [5, 4], F64, K=2, seed=1, pe="rff")
    params = [t.clone().requires_grad_(True) for t in ws + bs] + [x.clone().requires_grad_(True)]
    L = len(ws)

    def g_of(*ps):
        return fourier_mlp_jet(ps[-1], f, p, list(ps[:L]), list(ps[L:2 * L]), "silu", backend="cpu")[1]

    assert torch.autograd.gradcheck(g_of, params)
    assert torch.autograd.gradgradcheck(g_of, params)  # the third derivative goes through the reference


@needs_cpp
def test_differentiating_first_order_weight_gradients_again_matches_reference():
    x, f, p, ws, bs = make_problem(2, 30, [8, 8], F64, K=2, seed=2, pe="rff")
    out = {}
    for backend in ("reference", "cpu"):
        w = [t.clone().requires_grad_(True) for t in ws]
        y = fourier_mlp(x, f, p, w, bs, "tanh", backend=backend)
        gw = torch.autograd.grad(y.pow(2).sum(), w, create_graph=True)
        out[backend] = torch.autograd.grad(gw[0].pow(2).sum(), w)
    for l, (a, b) in enumerate(zip(out["reference"], out["cpu"])):
        assert_close(f"d|dW0|^2/dW{l}", a, b)


@needs_cpp
@pytest.mark.parametrize("backend", ["cpu", "auto"])
def test_opcheck_second_order_ops(backend):
    x, f, p, ws, bs = make_problem(2, 9, [6, 5], F64, K=2, seed=3, pe="rff")
    B, N = 2, 9
    opcheck(torch.ops.symfast.fourier_mlp_jet.default, (x, f, p, ws, bs, "tanh", backend))
    cf, cg = torch.randn(B, N, dtype=F64), torch.randn(B, N, 2, dtype=F64)
    opcheck(torch.ops.symfast.fourier_mlp_jet_backward.default, (cf, cg, x, f, p, ws, bs, "tanh", backend, True))
    t, n = torch.randn(B, N, dtype=F64), torch.randn(B, N, 2, dtype=F64)
    opcheck(torch.ops.symfast.fourier_mlp_eikonal_step.default, (x, t, n, f, p, ws, bs, "relu", 0.1, 0.2, backend))


@needs_cpp
def test_torch_compile_of_the_eikonal_step_and_the_jet():
    x, f, p, ws, bs = make_problem(2, 40, [16, 16], torch.float32, K=3, seed=4, pe="rff")
    t = torch.randn(2, 40, generator=torch.Generator().manual_seed(1))

    def step(x, t, ws, bs):
        return fourier_mlp_eikonal_step(x, t, f, p, ws, bs, "tanh", eikonal=0.1, backend="cpu")

    loss, terms, dw, db = torch.compile(step, backend="aot_eager", fullgraph=True)(x, t, ws, bs)
    loss_e, terms_e, dw_e, db_e = step(x, t, ws, bs)
    assert_close("compiled loss", loss_e, loss)
    compare(named("compiled step", None, dw_e, db_e), named("compiled step", None, dw, db), torch.float32)
    w = [t_.clone().requires_grad_(True) for t_ in ws]

    def eik(w):
        g = fourier_mlp_jet(x, f, p, w, bs, "tanh", backend="cpu")[1]
        return (g.norm(dim=-1) - 1).pow(2).mean()

    compiled = torch.autograd.grad(torch.compile(eik, backend="aot_eager", fullgraph=True)(w), w)
    eager = torch.autograd.grad(eik(w), w)
    for l, (a, b) in enumerate(zip(eager, compiled)):
        assert_close(f"compiled eikonal dW{l}", a, b, rms=True)


@needs_cpp
def test_second_order_inputs_are_validated_with_named_errors():
    x, f, p, ws, bs = make_problem(2, 10, [8], torch.float32, K=2, seed=5)
    t = torch.zeros(2, 10)
    with pytest.raises(ValueError, match="normal weight > 0 needs normals"):
        fourier_mlp_eikonal_step(x, t, f, p, ws, bs, normal=1.0)
    with pytest.raises(ValueError, match="eikonal weight must be a finite number >= 0"):
        fourier_mlp_eikonal_step(x, t, f, p, ws, bs, eikonal=-1.0)
    with pytest.raises(ValueError, match=r"normals must be \[B=2, N=10, D=2\]"):
        fourier_mlp_eikonal_step(x, t, f, p, ws, bs, normals=torch.zeros(2, 10, 3), normal=1.0)
    wide = ws[:-1] + [torch.randn(2, 8, 2)]
    with pytest.raises(ValueError, match="one output"):
        fourier_mlp_jet(x, f, p, wide, bs[:-1] + [torch.zeros(2, 2)], backend="reference")
    bad = x.clone()
    bad[1, 3, 0] = float("nan")
    with pytest.raises(ValueError, match="x contains NaN or Inf"):
        fourier_mlp_eikonal_step(bad, t, f, p, ws, bs, backend="cpu")


# The Triton jet kernels under TRITON_INTERPRET=1: tiny models (the kernels take hidden widths >= 16),
# N = 40 spans three tiles in three point chunks (partials summed), N = 5 leaves most of a tile masked.
TRITON_JET_SCRIPT = textwrap.dedent("""
    import torch
    from symfast.ops.fourier_mlp import fourier_mlp_eikonal_step, fourier_mlp_jet, reference
    from symfast.testing import assert_close
    from test_fourier_mlp_jet import compare, make_problem, named
    for B, N, hidden, act, shared, dim in [(2, 40, [16], "tanh", False, 2), (1, 5, [16, 16], "silu", True, 3),
                                           (2, 8, [16, 16, 16], "sine", False, 2),
                                           (1, 7, [16] * 4, "relu", True, 2), (2, 6, [32, 32], "tanh", False, 3)]:
        tag = f"B{B} N{N} L{len(hidden)} {act} D={dim}{' shared' if shared else ''}"
        x, f, p, ws, bs = make_problem(B, N, hidden, torch.float32, shared, K=3, seed=N, dim=dim)
        gen = torch.Generator().manual_seed(3)
        cf, cg = torch.randn(B, N, generator=gen), torch.randn(B, N, dim, generator=gen)
        ref, fast = {}, {}
        for backend, out in (("reference", ref), ("triton", fast)):
            xx = x.clone().requires_grad_(True)
            w = [t.clone().requires_grad_(True) for t in ws]
            b = [t.clone().requires_grad_(True) for t in bs]
            y, g = fourier_mlp_jet(xx, f, p, w, b, act, backend=backend)
            gr = torch.autograd.grad((y, g), [xx, *w, *b], (cf, cg))
            out.update({f"{tag} f": y.detach(), f"{tag} g": g.detach()})
            out.update(named(tag, gr[0], gr[1:1 + len(w)], gr[1 + len(w):]))
        compare(ref, fast, torch.float32)
        t, nrm = torch.randn(B, N, generator=gen), torch.randn(B, N, dim, generator=gen)
        for normals, weight in ((None, 0.0), (nrm, 0.5)):
            terms, dw, db = reference.eikonal_train_step(x, t, f, p, ws, bs, act, 0.1, normals, weight)
            loss, terms_t, dw_t, db_t = fourier_mlp_eikonal_step(x, t, f, p, ws, bs, act, eikonal=0.1,
                                                                 normals=normals, normal=weight, backend="triton")
            step = f"{tag} step{' normals' if normals is not None else ''}"
            assert_close(f"{step} terms", terms, terms_t)
            assert_close(f"{step} loss", terms[:, 0] + 0.1 * terms[:, 1] + weight * terms[:, 2], loss)
            compare(named(step, None, dw, db), named(step, None, dw_t, db_t), torch.float32)
    x, f, p, ws, bs = make_problem(1, 4, [16], torch.float64, K=2)
    try:
        fourier_mlp_jet(x, f, p, ws, bs, "relu", backend="triton")
        raise SystemExit("float64 on the triton jet should raise")
    except ValueError as e:
        assert "float32 only" in str(e)
    print("TRITON-JET-OK")
""")


def test_triton_jet_kernels_under_interpreter(run_interpreted):
    """f, g, the jet's gradients (dx, every dW, db) and the eikonal step on backend "triton" vs the reference."""
    run_interpreted(TRITON_JET_SCRIPT, expect="TRITON-JET-OK")


TRITON_JET_ROUTE_SCRIPT = textwrap.dedent("""
    import torch
    from symfast.ops.fourier_mlp import fourier_mlp, triton_jet as tj
    from test_fourier_mlp_jet import OpLog, make_problem, named, compare
    for shared in (False, True):
        x, f, p, ws, bs = make_problem(2, 9, [16], torch.float32, shared, K=2, dim=3)
        cf, cg, t, n = torch.randn(2, 9), torch.randn(2, 9, 3), torch.randn(2, 9), torch.randn(2, 9, 3)
        out = torch.ops.symfast.fourier_mlp_jet(x, f, p, ws, bs, "tanh", "triton")
        assert all(torch.equal(a, b) for a, b in zip(out, tj.fourier_mlp_jet(x, f, p, ws, bs, "tanh")))
        dx, dw, db, _, _ = tj.fourier_mlp_jet_bwd(cf, cg, x, f, p, ws, bs, "tanh", True)
        out = torch.ops.symfast.fourier_mlp_jet_backward(cf, cg, x, f, p, ws, bs, "tanh", "triton", True)
        assert all(torch.equal(a, b) for a, b in zip([dx.sum(0) if shared else dx, *dw, *db], out))
        terms, dw, db = tj.eikonal_train_step(x, t, f, p, ws, bs, "tanh", 0.1, n, 0.2)
        out = torch.ops.symfast.fourier_mlp_eikonal_step(x, t, n, f, p, ws, bs, "tanh", 0.1, 0.2, "triton")
        assert all(torch.equal(a, b) for a, b in zip([terms, *dw, *db], out))
    # the users' eikonal loop through the first-order op reaches the Triton jet ops
    x, f, p, ws, bs = make_problem(2, 6, [16, 16], torch.float32, K=2)
    grads = {}
    for backend in ("reference", "triton"):
        xx = x.clone().requires_grad_(True)
        w = [q.clone().requires_grad_(True) for q in ws]
        with OpLog() as log:
            y = fourier_mlp(xx, f, p, w, bs, "tanh", backend=backend)
            g, = torch.autograd.grad(y.sum(), xx, create_graph=True)
            loss = (g.norm(dim=-1) - 1).pow(2).mean() + y.pow(2).mean()
            grads[backend] = named("user loop", None, torch.autograd.grad(loss, w), [])
        if backend == "triton":
            assert "fourier_mlp_jet" in log.ops and "fourier_mlp_jet_backward" in log.ops, log.ops
    compare(grads["reference"], grads["triton"], torch.float32)
    # no points: the reference's empty outputs; an overflowing model: NaN for it alone, as on every backend
    f0, g0 = torch.ops.symfast.fourier_mlp_jet(x[:, :0].contiguous(), f, p, ws, bs, "tanh", "triton")
    assert f0.shape == (2, 0) and g0.shape == (2, 0, 2)
    big = [w.clone() for w in ws]
    big[-1][1] = 3e38  # relu activations are >= 0: model 1's f overflows float32
    for be in ("reference", "triton"):
        fb, gb = torch.ops.symfast.fourier_mlp_jet(x, f, p, big, bs, "relu", be)
        assert fb[1].isnan().all() and gb[1].isnan().all() and torch.isfinite(gb[0]).all(), be
    print("ROUTE-OK")
""")


def test_triton_jet_ops_run_the_triton_launchers(run_interpreted):
    """backend "triton" (CPU tensors under TRITON_INTERPRET=1) runs the Triton jet launchers themselves,
    and the users' create_graph loop on backend "triton" reaches the fused jet ops."""
    run_interpreted(TRITON_JET_ROUTE_SCRIPT, expect="ROUTE-OK")


@pytest.mark.skipif(not _ext.HAS_TRITON, reason="triton not installed")
def test_triton_jet_kernel_the_gpu_refuses_runs_the_reference_with_a_warning(monkeypatch):
    """A GPU's out-of-resources refusal at launch (the shared memory of a wide, deep model, known only once
    compiled for that GPU) becomes `DoesNotFit` naming the model, and each jet op then returns the
    reference's result with a one-time RuntimeWarning."""
    from triton.runtime import OutOfResources

    from symfast.ops import _dispatch
    from symfast.ops.fourier_mlp import triton as tri
    from symfast.ops.fourier_mlp import triton_jet

    class TooBig:
        def __getitem__(self, grid):
            def launch(*args, **meta):
                raise OutOfResources(280000, 232448, "shared memory")
            return launch

    with pytest.raises(tri.DoesNotFit, match=r"Triton jet backward kernel for hidden width 64, 4 hidden layers, "
                                              r"32 padded frequencies and D = 3 does not fit this GPU .*shared memory"):
        tri.launch(TooBig(), (1, 1), name="jet backward", H=64, NH=4, MP=32, D=3)

    def refuse(*args, **kwargs):
        raise tri.DoesNotFit("the Triton jet kernel for this model does not fit this GPU (test)")

    for name in ("fourier_mlp_jet", "fourier_mlp_jet_bwd", "eikonal_train_step"):
        monkeypatch.setattr(triton_jet, name, refuse)
    monkeypatch.setattr(_dispatch, "_warned", set())
    x, f, p, ws, bs = make_problem(2, 5, [16], torch.float32, K=2)
    cf, cg, t, n = torch.randn(2, 5), torch.randn(2, 5, 2), torch.randn(2, 5), torch.randn(2, 5, 2)
    ops = torch.ops.symfast
    calls = {"jet": lambda be: ops.fourier_mlp_jet(x, f, p, ws, bs, "tanh", be),
             "jet backward": lambda be: ops.fourier_mlp_jet_backward(cf, cg, x, f, p, ws, bs, "tanh", be, True),
             "eikonal step": lambda be: ops.fourier_mlp_eikonal_step(x, t, n, f, p, ws, bs, "tanh", 0.1, 0.2, be)}
    for name, call in calls.items():
        with pytest.warns(RuntimeWarning, match="does not fit this GPU.*using the PyTorch reference"):
            fast = call("triton")
        for i, (a, b) in enumerate(zip(call("reference"), fast)):
            assert_close(f"{name} output {i}", a, b)


@pytest.mark.skipif(not torch.cuda.is_available() or not _ext.HAS_TRITON, reason="needs CUDA + triton")
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
def test_triton_jet_on_gpu(dim):
    x, f, p, ws, bs = (t.cuda() if isinstance(t, torch.Tensor) else [q.cuda() for q in t]
                       for t in make_problem(3, 3000, [64, 64], torch.float32, K=8, seed=dim, dim=dim))
    gen = torch.Generator().manual_seed(1)
    cf, cg = torch.randn(3, 3000, generator=gen).cuda(), torch.randn(3, 3000, dim, generator=gen).cuda()
    ref, fast = {}, {}
    for backend, out in (("reference", ref), ("triton", fast)):
        xx = x.clone().requires_grad_(True)
        w = [t.clone().requires_grad_(True) for t in ws]
        b = [t.clone().requires_grad_(True) for t in bs]
        y, g = fourier_mlp_jet(xx, f, p, w, b, "silu", backend=backend)
        gr = torch.autograd.grad((y, g), [xx, *w, *b], (cf, cg))
        out.update({"f": y.detach(), "g": g.detach(), **named("gpu", gr[0], gr[1:1 + len(w)], gr[1 + len(w):])})
    compare(ref, fast, torch.float32)
    t = torch.randn(3, 3000, generator=gen).cuda()
    terms, dw, db = reference.eikonal_train_step(x, t, f, p, ws, bs, "silu", 0.1)
    _, terms_t, dw_t, db_t = fourier_mlp_eikonal_step(x, t, f, p, ws, bs, "silu", eikonal=0.1, backend="triton")
    assert_close("gpu step terms", terms, terms_t)
    compare(named("gpu step", None, dw, db), named("gpu step", None, dw_t, db_t), torch.float32)
