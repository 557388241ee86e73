"""Fused Fourier-PE + MLP op vs its PyTorch reference: outputs and every gradient by name."""
from __future__ import annotations

import math
import os
import textwrap

import numpy as np
import pytest
import torch

import symfast as sf
from symfast import _ext
from symfast.ops.fourier_mlp import cpu, fourier_mlp, fourier_mlp_train_step, reference
from symfast.testing import assert_close, opcheck

needs_cpp = pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def encoding(K, pe="dyadic", dim=2, seed=0):
    """(frequencies [m, dim], phases [m]) float64: dyadic axis frequencies 2^k pi e_i (k < K, zero
    phases) or 2K random Fourier frequencies (scale 3) with random phases."""
    if dim == 2:
        enc = sf.DyadicAxisPE(K) if pe == "dyadic" else sf.RandomFourierPE(2 * K, scale=3.0, seed=seed)
        return enc.frequencies, enc.phases
    if pe == "dyadic":
        f = torch.cat([2.0 ** k * math.pi * torch.eye(dim, dtype=torch.float64) for k in range(K)])
        return f, torch.zeros(len(f), dtype=torch.float64)
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(2 * K, dim, generator=g, dtype=torch.float64) * 3.0,
            torch.rand(2 * K, generator=g, dtype=torch.float64) * 2 * math.pi)


def make_problem(B, N, hidden, dtype, shared=False, K=4, seed=0, pe="dyadic", dim=2):
    g = torch.Generator().manual_seed(seed)
    f, p = encoding(K, pe, dim, seed)
    shape = (N, dim) if shared else (B, N, dim)
    x = torch.rand(shape, generator=g, dtype=dtype) * 2 - 1
    dims = [2 * len(f), *hidden, 1]
    ws = [torch.randn(B, a, b, generator=g, dtype=dtype) / a ** 0.5 for a, b in zip(dims[:-1], dims[1:])]
    bs = [torch.randn(B, b, generator=g, dtype=dtype) * 0.3 for b in dims[1:]]
    return x, f.to(dtype), p.to(dtype), ws, bs


def run_with_grads(backend, x, f, p, ws, bs, act, cot):
    x = x.clone().requires_grad_(True)
    ws = [w.clone().requires_grad_(True) for w in ws]
    bs = [b.clone().requires_grad_(True) for b in bs]
    y = fourier_mlp(x, f, p, ws, bs, act, backend=backend)
    grads = torch.autograd.grad(y, [x, *ws, *bs], cot)
    L = len(ws)
    out = {"y": y.detach(), "dx": grads[0]}
    out.update({f"dW{l}": g for l, g in enumerate(grads[1:1 + L])})
    out.update({f"db{l}": g for l, g in enumerate(grads[1 + L:])})
    return out


def compare(ref, fast, dtype):
    for name in ref:
        # fp32 gradients are sums over N points: compare by RMS (see symfast/testing.py)
        assert_close(name, ref[name], fast[name], rms=(dtype == torch.float32 and name != "y"))


# Pairwise cover of B x N x H x depth x activation x dtype (+ shared x, RFF encoding).
CASES = [
    (1, 1, 32, 1, "relu", torch.float64, False),
    (3, 63, 64, 2, "tanh", torch.float64, False),
    (3, 1000, 128, 3, "silu", torch.float64, True),
    (1, 1000, 32, 2, "sine", torch.float64, False),
    (3, 1, 64, 3, "sine", torch.float32, False),
    (1, 63, 128, 1, "tanh", torch.float32, True),
    (3, 1000, 32, 3, "relu", torch.float32, False),
    (1, 63, 64, 2, "silu", torch.float32, False),
    (3, 1000, 64, 1, "relu", torch.float32, True),
    (1, 1000, 128, 2, "tanh", torch.float32, False),
    (3, 63, 32, 1, "silu", torch.float64, False),
    (3, 63, 128, 3, "relu", torch.float64, False),
]


@needs_cpp
@pytest.mark.parametrize("B,N,H,depth,act,dtype,shared", CASES,
                         ids=[f"B{c[0]}-N{c[1]}-H{c[2]}-L{c[3]}-{c[4]}-{str(c[5])[6:]}{'-shared' if c[6] else ''}"
                              for c in CASES])
def test_cpu_forward_and_grads_match_reference(B, N, H, depth, act, dtype, shared):
    x, f, p, ws, bs = make_problem(B, N, [H] * depth, dtype, shared, seed=B * N + H)
    cot = torch.randn(B, N, generator=torch.Generator().manual_seed(1), dtype=dtype)
    compare(run_with_grads("reference", x, f, p, ws, bs, act, cot),
            run_with_grads("cpu", x, f, p, ws, bs, act, cot), dtype)
    t = torch.randn(B, N, generator=torch.Generator().manual_seed(2), dtype=dtype)
    ref = reference.fourier_mlp_train_step(x, t, f, p, ws, bs, act)
    fast = fourier_mlp_train_step(x, t, f, p, ws, bs, act, backend="cpu")
    rms = dtype == torch.float32
    assert_close("loss", ref[0], fast[0])
    for l in range(depth + 1):
        assert_close(f"step dW{l}", ref[1][l], fast[1][l], rms=rms)
        assert_close(f"step db{l}", ref[2][l], fast[2][l], rms=rms)


# 3D points (x [B, N, 3] / [N, 3], frequencies [m, 3]): every activation, both dtypes, shared x.
CASES_3D = [
    (2, 63, 32, 2, "relu", torch.float32, False, "dyadic"),
    (3, 130, 16, 1, "tanh", torch.float64, True, "rff"),
    (1, 1000, 32, 3, "silu", torch.float32, True, "dyadic"),
    (2, 50, 48, 2, "sine", torch.float64, False, "rff"),
    (3, 1, 16, 1, "relu", torch.float64, False, "rff"),
]


@needs_cpp
@pytest.mark.parametrize("backend", ["cpu", "auto"])
@pytest.mark.parametrize("B,N,H,depth,act,dtype,shared,pe", CASES_3D,
                         ids=[f"B{c[0]}-N{c[1]}-H{c[2]}-L{c[3]}-{c[4]}-{str(c[5])[6:]}{'-shared' if c[6] else ''}-{c[7]}"
                              for c in CASES_3D])
def test_3d_forward_and_grads_match_reference(B, N, H, depth, act, dtype, shared, pe, backend):
    x, f, p, ws, bs = make_problem(B, N, [H] * depth, dtype, shared, K=3, seed=N + H, pe=pe, dim=3)
    cot = torch.randn(B, N, generator=torch.Generator().manual_seed(1), dtype=dtype)
    ref = run_with_grads("reference", x, f, p, ws, bs, act, cot)
    assert ref["dx"].shape == x.shape
    compare(ref, run_with_grads(backend, x, f, p, ws, bs, act, cot), dtype)
    t = torch.randn(B, N, generator=torch.Generator().manual_seed(2), dtype=dtype)
    ref = reference.fourier_mlp_train_step(x, t, f, p, ws, bs, act)
    fast = fourier_mlp_train_step(x, t, f, p, ws, bs, act, backend=backend)
    rms = dtype == torch.float32
    assert_close("3d loss", ref[0], fast[0])
    for l in range(depth + 1):
        assert_close(f"3d step dW{l}", ref[1][l], fast[1][l], rms=rms)
        assert_close(f"3d step db{l}", ref[2][l], fast[2][l], rms=rms)


@needs_cpp
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
@pytest.mark.parametrize("isa", ["generic", "avx2", "avx512"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("act", ["tanh", "relu"])  # relu: sign-bit epilogues in the micro-kernels
def test_every_instruction_set_variant(isa, dtype, act, dim):
    if isa != "generic" and _ext.require_cpp().fourier_mlp_isa("auto") == "generic":
        pytest.skip(f"CPU lacks {isa}")
    if isa == "avx512" and _ext.require_cpp().fourier_mlp_isa("auto") != "avx512":
        pytest.skip("CPU lacks AVX-512")
    B, N = 2, 200
    x, f, p, ws, bs = make_problem(B, N, [48, 40], dtype, pe="rff", K=5, dim=dim)  # awkward widths: padding
    t = torch.randn(B, N, dtype=dtype, generator=torch.Generator().manual_seed(3))
    ref = reference.fourier_mlp_train_step(x, t, f, p, ws, bs, act)
    loss, dw, db = cpu.fourier_mlp_train_step(x, t, f, p, ws, bs, act, isa=isa)
    rms = dtype == torch.float32
    assert_close(f"{isa} loss", ref[0], loss)
    for l in range(3):
        assert_close(f"{isa} dW{l}", ref[1][l], dw[l], rms=rms)
        assert_close(f"{isa} db{l}", ref[2][l], db[l], rms=rms)
    assert_close(f"{isa} y", reference.fourier_mlp(x, f, p, ws, bs, act),
                 cpu.fourier_mlp_fwd(x, f, p, ws, bs, act, isa=isa))
    cot = torch.randn(B, N, dtype=dtype, generator=torch.Generator().manual_seed(4))
    xr = x.clone().requires_grad_(True)
    (ref_dx,) = torch.autograd.grad(reference.fourier_mlp(xr, f, p, ws, bs, act), xr, cot)
    dx, _, _ = cpu.fourier_mlp_bwd(cot, x, f, p, ws, bs, act, True, isa=isa)
    assert_close(f"{isa} dx", ref_dx, dx)


@needs_cpp
def test_sincos_polynomial_accuracy():
    u = np.linspace(-8200, 8200, 400001, dtype=np.float32)
    for isa in ("generic", _ext.require_cpp().fourier_mlp_isa("auto")):
        sc = _ext.require_cpp().fourier_mlp_sincos_f32(u, isa)
        assert np.abs(sc[0] - np.sin(u.astype(np.float64))).max() < 2e-7, isa
        assert np.abs(sc[1] - np.cos(u.astype(np.float64))).max() < 2e-7, isa


@needs_cpp
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
@pytest.mark.parametrize("act", ["relu", "sine"])
def test_large_pe_arguments_match_reference(act, dim):
    """|x| from 1 to 1e8 (PE arguments u up to ~2.5e9): beyond |u| = 8000 the kernel must switch
    to libm as fourier_features does (the polynomial alone gave 9.86 vs 1.03 at x = (3, 5e6)).
    Axis-aligned frequencies and zero phases make u = fl(w x) the same float32 number in the kernel
    and the float32 reference, so the comparison measures sin/cos, not the rounding of u."""
    f, p = (t.float() for t in encoding(4, "dyadic", dim))
    g = torch.Generator().manual_seed(0)
    ws = [torch.randn(2, 2 * len(f), 16, generator=g) / 3, torch.randn(2, 16, 1, generator=g) / 4]
    bs = [torch.randn(2, 16, generator=g) * 0.1, torch.zeros(2, 1)]
    for logx in range(0, 9):
        x = (torch.rand(2, 60, dim, generator=g) * 2 - 1) * 10.0 ** logx
        x[0, 0] = torch.tensor([3.0, 5e6, -7e5][:dim]) if logx >= 6 else x[0, 0]
        ref = reference.fourier_mlp(x, f, p, ws, bs, act)
        assert_close(f"y |x|~1e{logx}", ref, fourier_mlp(x, f, p, ws, bs, act, backend="cpu"))
        t = torch.zeros(2, 60)
        r = reference.fourier_mlp_train_step(x, t, f, p, ws, bs, act)
        k = fourier_mlp_train_step(x, t, f, p, ws, bs, act, backend="cpu")
        assert_close(f"loss |x|~1e{logx}", r[0], k[0])
        assert_close(f"dW0 |x|~1e{logx}", r[1][0], k[1][0], rms=True)


@needs_cpp
def test_sine_activation_large_preactivations():
    """Hidden pre-activations up to ~1e8: sin stays in [-1, 1] (the polynomial alone gave 2e24);
    at ~2e4 (beyond the polynomial's range, still resolvable in float32) it matches the reference."""
    x, f, p, ws, bs = make_problem(2, 64, [16, 16], torch.float32, seed=3)
    for scale in (2e4 / 16, 1e6, 1e8):
        big = [ws[0], ws[1] * scale, ws[2]]
        y = fourier_mlp(x, f, p, big, bs, "sine", backend="cpu")
        bound = (ws[2].abs().sum(dim=(1, 2)) + bs[2].abs().sum(1))[:, None] + 1e-3
        assert torch.isfinite(y).all() and (y.abs() <= bound).all(), f"scale {scale:g}: max |y| {y.abs().max():.3g}"
        if scale < 1e5:
            ref = reference.fourier_mlp(x.double(), f.double(), p.double(), [w.double() for w in big],
                                        [b.double() for b in bs], "sine")
            assert_close("y sine 2e4", ref.float(), y, rms=True, rtol=1e-2)


@needs_cpp
def test_gradcheck_float64():
    x, f, p, ws, bs = make_problem(1, 5, [8, 8], torch.float64, K=2)
    inputs = [t.clone().requires_grad_(True) for t in [x, *ws, *bs]]

    def fn(x, *params):
        return fourier_mlp(x, f, p, list(params[:3]), list(params[3:]), "silu", backend="cpu")

    assert torch.autograd.gradcheck(fn, inputs)


@needs_cpp
def test_double_backward_falls_back_to_reference():
    """Eikonal-style loss: d/dW of a function of dy/dx (create_graph=True) goes through the reference."""
    x, f, p, ws, bs = make_problem(2, 30, [32], torch.float64)
    grads = {}
    for backend in ("reference", "cpu"):
        xx = x.clone().requires_grad_(True)
        w0 = ws[0].clone().requires_grad_(True)
        y = fourier_mlp(xx, f, p, [w0, ws[1]], bs, "tanh", backend=backend)
        dx, = torch.autograd.grad(y.sum(), xx, create_graph=True)
        eik = (dx.norm(dim=-1) - 1).pow(2).mean()
        grads[backend] = torch.autograd.grad(eik, w0)[0]
    assert_close("d eikonal / dW0", grads["reference"], grads["cpu"])


@needs_cpp
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
def test_deterministic_across_thread_counts_and_chunks(dim):
    """N spans several fixed-size work chunks; results are bitwise equal for 1 and 2 threads."""
    B, N = 2, 3000
    assert cpu.chunk_size(B, N) < N  # several chunks per model
    x, f, p, ws, bs = make_problem(B, N, [32, 32], torch.float32, seed=5, dim=dim)
    t = torch.randn(B, N, generator=torch.Generator().manual_seed(4))
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = fourier_mlp_train_step(x, t, f, p, ws, bs, "relu", backend="cpu")
        torch.set_num_threads(2)
        two = fourier_mlp_train_step(x, t, f, p, ws, bs, "relu", backend="cpu")
    finally:
        torch.set_num_threads(before)
    for a, b in zip([one[0], *one[1], *one[2]], [two[0], *two[1], *two[2]]):
        assert torch.equal(a, b)
    ref = reference.fourier_mlp_train_step(x, t, f, p, ws, bs, "relu")
    assert_close("chunked loss", ref[0], one[0])
    for l in range(3):
        assert_close(f"chunked dW{l}", ref[1][l], one[1][l], rms=True)


@needs_cpp
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
def test_torch_compile_and_custom_op(dim):
    x, f, p, ws, bs = make_problem(2, 40, [32], torch.float32, dim=dim)
    ws = [w.requires_grad_(True) for w in ws]

    def loss_fn(x, ws, bs):
        return fourier_mlp(x, f, p, ws, bs, "relu", backend="cpu").pow(2).sum()

    compiled = torch.compile(loss_fn, backend="aot_eager", fullgraph=True)
    g_c = torch.autograd.grad(compiled(x, ws, bs), ws)
    g_e = torch.autograd.grad(reference.fourier_mlp(x, f, p, ws, bs, "relu").pow(2).sum(), ws)
    for l, (a, b) in enumerate(zip(g_e, g_c)):
        assert_close(f"compiled dW{l}", a, b, rms=True)
    torch.library.opcheck(torch.ops.symfast.fourier_mlp.default,
                          (x, f, p, [w.detach() for w in ws], bs, "relu", "cpu"))


@needs_cpp
@pytest.mark.parametrize("backend", ["cpu", "auto"])
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
@pytest.mark.parametrize("shared", [False, True], ids=["per_model_x", "shared_x"])
def test_opcheck_backward_and_train_step_ops(shared, dim, backend):
    x, f, p, ws, bs = make_problem(2, 30, [16], torch.float64, shared=shared, dim=dim)
    t = torch.randn(2, 30, dtype=torch.float64)
    opcheck(torch.ops.symfast.fourier_mlp.default, (x.requires_grad_(True), f, p,
                                                    [w.requires_grad_(True) for w in ws], bs, "tanh", backend))
    x, ws = x.detach(), [w.detach() for w in ws]
    opcheck(torch.ops.symfast.fourier_mlp_backward.default, (t, x, f, p, ws, bs, "tanh", backend, True), fast=True)
    opcheck(torch.ops.symfast.fourier_mlp_train_step.default, (x, t, f, p, ws, bs, "tanh", backend), fast=shared)


@pytest.mark.parametrize("act", list(reference.ACTIVATIONS))
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
@pytest.mark.parametrize("shared", [False, True], ids=["per_model_x", "shared_x"])
def test_ops_reference_default_vs_autograd(act, dim, shared):
    """Each op's default implementation (backend "reference": the hand-written backward) matches
    autograd through reference.fourier_mlp, output by output."""
    x, f, p, ws, bs = make_problem(3, 37, [16, 8], torch.float64, shared=shared, dim=dim, pe="random")
    cot, t = torch.randn(3, 37, dtype=torch.float64), torch.randn(3, 37, dtype=torch.float64)
    ref = run_with_grads("reference", x, f, p, ws, bs, act, cot)
    assert_close("op y", ref["y"], torch.ops.symfast.fourier_mlp(x, f, p, ws, bs, act, "reference"))
    out = torch.ops.symfast.fourier_mlp_backward(cot, x, f, p, ws, bs, act, "reference", True)
    names = ["dx"] + [f"dW{l}" for l in range(3)] + [f"db{l}" for l in range(3)]
    for name, g in zip(names, out):
        assert_close(f"op {name}", ref[name], g)
    assert out[0].shape == x.shape
    assert torch.ops.symfast.fourier_mlp_backward(cot, x, f, p, ws, bs, act, "reference", False)[0].numel() == 0
    loss, dw, db = reference.fourier_mlp_train_step(x, t, f, p, ws, bs, act)
    out = torch.ops.symfast.fourier_mlp_train_step(x, t, f, p, ws, bs, act, "reference")
    assert_close("op step loss", loss, out[0])
    for name, a, b in zip(names[1:], [*dw, *db], out[1:]):
        assert_close(f"op step {name}", a, b)
    opcheck(torch.ops.symfast.fourier_mlp.default, (x.requires_grad_(True), f, p,
                                                    [w.requires_grad_(True) for w in ws], bs, act, "reference"))
    x, ws = x.detach(), [w.detach() for w in ws]
    opcheck(torch.ops.symfast.fourier_mlp_backward.default, (cot, x, f, p, ws, bs, act, "reference", True),
            fast=True)
    opcheck(torch.ops.symfast.fourier_mlp_train_step.default, (x, t, f, p, ws, bs, act, "reference"), fast=True)


@needs_cpp
@pytest.mark.parametrize("shared", [False, True], ids=["per_model_x", "shared_x"])
def test_ops_cpu_kernel_is_the_cpp_launcher(shared):
    """backend "cpu" on CPU tensors runs the C++ launcher itself (bit-identical results)."""
    x, f, p, ws, bs = make_problem(2, 50, [32], torch.float32, shared=shared)
    cot, t = torch.randn(2, 50), torch.randn(2, 50)
    assert torch.equal(torch.ops.symfast.fourier_mlp(x, f, p, ws, bs, "silu", "cpu"),
                       cpu.fourier_mlp_fwd(x, f, p, ws, bs, "silu"))
    dx, dw, db = cpu.fourier_mlp_bwd(cot, x, f, p, ws, bs, "silu", True)
    out = torch.ops.symfast.fourier_mlp_backward(cot, x, f, p, ws, bs, "silu", "cpu", True)
    for a, b in zip([dx.sum(0) if shared else dx, *dw, *db], out):
        assert torch.equal(a, b)
    loss, dw, db = cpu.fourier_mlp_train_step(x, t, f, p, ws, bs, "silu")
    out = torch.ops.symfast.fourier_mlp_train_step(x, t, f, p, ws, bs, "silu", "cpu")
    for a, b in zip([loss, *dw, *db], out):
        assert torch.equal(a, b)


def test_nn_modules_roundtrip_sequential():
    pe = sf.DyadicAxisPE(3)
    torch.manual_seed(0)
    seqs = [torch.nn.Sequential(pe, torch.nn.Linear(12, 32), torch.nn.SiLU(), torch.nn.Linear(32, 32),
                                torch.nn.SiLU(), torch.nn.Linear(32, 1)) for _ in range(3)]
    x = torch.rand(50, 2) * 2 - 1
    one = sf.nn.FourierMLP.from_sequential(seqs[0])
    assert_close("FourierMLP", seqs[0](x)[:, 0], one(x))
    assert_close("FourierMLP -> Sequential", seqs[0](x), one.to_sequential()(x))
    ens = sf.nn.FourierMLPEnsemble.from_sequentials(seqs)
    y = ens(x)
    for i in range(3):
        assert_close(f"ensemble member {i}", seqs[i](x)[:, 0], y[i])
        assert_close(f"ensemble[{i}]", ens[i](x), y[i])
    xb, t = torch.rand(3, 20, 2), torch.rand(3, 20)
    loss = ens.train_step(xb, t)
    ref = reference.fourier_mlp_train_step(xb, t, pe.frequencies.float(), pe.phases.float(),
                                           list(ens.weights), list(ens.biases), "silu")
    assert_close("module loss", ref[0], loss)
    assert_close("module dW0", ref[1][0], ens.weights[0].grad, rms=True)
    with pytest.raises(ValueError, match="activation"):
        sf.nn.FourierMLP.from_sequential(torch.nn.Sequential(pe, torch.nn.Linear(12, 8), torch.nn.GELU(),
                                                             torch.nn.Linear(8, 1)))


@pytest.mark.parametrize("mutate,match", [
    (lambda a: a.update(x=a["x"][:, :5]), "x must be"),
    (lambda a: a.update(x=torch.rand(2, 9, 3)), r"x must be \[B, N, 2\] or \[N, 2\] to match frequencies \[8, 2\]"
                                                r".*got x \[2, 9, 3\]"),
    (lambda a: a.update(frequencies=torch.rand(8, 3)), r"x must be \[B, N, 3\] or \[N, 3\] to match frequencies "
                                                       r"\[8, 3\].*got x \[2, 9, 2\]"),
    (lambda a: a.update(x=torch.rand(2, 9, 4), frequencies=torch.rand(8, 4)),
     r"frequencies must be \[m, D\] with D in \[2, 3\], got \[8, 4\] \(x is \[2, 9, 4\]\)"),
    (lambda a: a.update(x=torch.rand(9)), r"x must be \[B, N, D\] or \[N, D\]"),
    (lambda a: a["weights"].__setitem__(1, torch.rand(2, 16, 32)), r"weights\[1\] must be"),
    (lambda a: a["biases"].__setitem__(0, torch.rand(2, 31)), r"biases\[0\] must be"),
    (lambda a: a["weights"].__setitem__(0, a["weights"][0].transpose(1, 2).contiguous().transpose(1, 2)),
     "contiguous"),
    (lambda a: a["weights"].__setitem__(0, a["weights"][0].double()), "dtype"),
    (lambda a: a.update(x=a["x"].int()), "float32 or float64"),
    (lambda a: a.update(activation="gelu"), "unsupported activation"),
    (lambda a: a.update(weights=a["weights"][-1:], biases=a["biases"][-1:]), "hidden layer"),
    (lambda a: a.update(backend="cuda"), "backend must be"),
])
def test_bad_input_raises_clear_error(mutate, match):
    x, f, p, ws, bs = make_problem(2, 9, [32], torch.float32)
    args = dict(x=x, frequencies=f, phases=p, weights=ws, biases=bs, activation="relu", backend="auto")
    mutate(args)
    with pytest.raises(ValueError, match=match):
        fourier_mlp(**args)


@needs_cpp
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("where", ["x", "shared x", "3d x", "targets", "gradient"])
def test_kernel_names_nonfinite_inputs(dtype, where):
    """The C++ kernel checks x and targets/cotangents as it reads them (no separate pass)."""
    N = 200  # the bad value sits in the last, partial tile
    shared = where == "shared x"
    dim = 3 if where == "3d x" else 2
    x, f, p, ws, bs = make_problem(3, N, [32], dtype, shared=shared, dim=dim)
    t = torch.rand(3, N, dtype=dtype)
    for bad in (float("nan"), float("inf"), -float("inf")):
        if where in ("x", "shared x", "3d x"):
            xb = x.clone()
            xb[..., N - 1, dim - 1] = bad
            with pytest.raises(ValueError, match="^x contains NaN or Inf"):
                fourier_mlp(xb, f, p, ws, bs, "relu", backend="cpu")
            with pytest.raises(ValueError, match="^x contains NaN or Inf"):
                fourier_mlp_train_step(xb, t, f, p, ws, bs, "relu", backend="cpu")
        elif where == "targets":
            tb = t.clone()
            tb[2, N - 1] = bad
            with pytest.raises(ValueError, match="^targets contains NaN or Inf"):
                fourier_mlp_train_step(x, tb, f, p, ws, bs, "relu", backend="cpu")
        else:
            w0 = ws[0].clone().requires_grad_(True)
            y = fourier_mlp(x, f, p, [w0, ws[1]], bs, "relu", backend="cpu")
            cot = torch.ones_like(y)
            cot[1, N - 1] = bad
            with pytest.raises(ValueError, match="^the incoming gradient contains NaN or Inf"):
                y.backward(cot)
    # finite but extreme values are not flagged
    fourier_mlp_train_step(x, t * 1e30, f, p, ws, bs, "relu", backend="cpu")


@needs_cpp
def test_bad_values_and_widths():
    x, f, p, ws, bs = make_problem(2, 9, [32], torch.float32)
    for bad in (float("nan"), float("inf")):
        xb = x.clone()
        xb[1, 3, 0] = bad
        with pytest.raises(ValueError, match="NaN or Inf"):
            fourier_mlp(xb, f, p, ws, bs, "relu", backend="cpu")
    with pytest.raises(ValueError, match="targets"):
        fourier_mlp_train_step(x, torch.rand(2, 8), f, p, ws, bs, "relu")
    wide = [torch.zeros(2, 16, 2048), torch.zeros(2, 2048, 1)]
    with pytest.raises(ValueError, match="hidden widths up to 1024, got 2048; use backend='reference'"):
        fourier_mlp(x, f, p, wide, [torch.zeros(2, 2048), torch.zeros(2, 1)], "relu", backend="cpu")


TRITON_SCRIPT = textwrap.dedent("""
    import torch, symfast as sf
    from symfast.ops.fourier_mlp import fourier_mlp, fourier_mlp_train_step, reference
    from symfast.testing import assert_close
    from test_fourier_mlp import make_problem, run_with_grads, compare
    for B, N, H, depth, act, shared, dim, pe in [
            (2, 70, 16, 1, "relu", False, 2, "dyadic"), (1, 5, 32, 2, "tanh", True, 2, "dyadic"),
            (3, 20, 16, 3, "silu", False, 2, "dyadic"), (1, 9, 16, 4, "sine", False, 2, "dyadic"),
            (2, 70, 16, 1, "relu", False, 3, "dyadic"), (2, 5, 32, 2, "tanh", True, 3, "rff"),
            (1, 20, 16, 3, "sine", False, 3, "rff")]:
        x, f, p, ws, bs = make_problem(B, N, [H] * depth, torch.float32, shared, K=3, pe=pe, dim=dim)
        cot = torch.randn(B, N, generator=torch.Generator().manual_seed(1))
        ref = run_with_grads("reference", x, f, p, ws, bs, act, cot)
        assert ref["dx"].shape == x.shape
        compare(ref, run_with_grads("triton", x, f, p, ws, bs, act, cot), torch.float32)
        t = torch.randn(B, N, generator=torch.Generator().manual_seed(2))
        ref = reference.fourier_mlp_train_step(x, t, f, p, ws, bs, act)
        fast = fourier_mlp_train_step(x, t, f, p, ws, bs, act, backend="triton")
        assert_close(f"triton D={dim} loss", ref[0], fast[0])
        for l in range(depth + 1):
            assert_close(f"triton D={dim} dW{l}", ref[1][l], fast[1][l], rms=True)
            assert_close(f"triton D={dim} db{l}", ref[2][l], fast[2][l], rms=True)
    try:
        fourier_mlp(x.double(), f, p, [w.double() for w in ws], [b.double() for b in bs], "relu",
                    backend="triton")
        raise SystemExit("float64 on triton should raise")
    except ValueError as e:
        assert "float32 only" in str(e)
    print("TRITON-OK")
""")


def test_triton_kernels_under_interpreter(run_interpreted):
    run_interpreted(TRITON_SCRIPT, expect="TRITON-OK")


TRITON_ROUTE_SCRIPT = textwrap.dedent("""
    import torch, symfast
    from symfast.ops.fourier_mlp import triton as tri
    from test_fourier_mlp import make_problem
    for shared in (False, True):
        x, f, p, ws, bs = make_problem(2, 9, [16], torch.float32, shared, K=2)
        cot, t = torch.randn(2, 9), torch.randn(2, 9)
        assert torch.equal(torch.ops.symfast.fourier_mlp(x, f, p, ws, bs, "tanh", "triton"),
                           tri.fourier_mlp_fwd(x, f, p, ws, bs, "tanh"))
        dx, dw, db = tri.fourier_mlp_bwd(cot, x, f, p, ws, bs, "tanh", True)
        out = torch.ops.symfast.fourier_mlp_backward(cot, x, f, p, ws, bs, "tanh", "triton", True)
        assert all(torch.equal(a, b) for a, b in zip([dx.sum(0) if shared else dx, *dw, *db], out))
        loss, dw, db = tri.fourier_mlp_train_step(x, t, f, p, ws, bs, "tanh")
        out = torch.ops.symfast.fourier_mlp_train_step(x, t, f, p, ws, bs, "tanh", "triton")
        assert all(torch.equal(a, b) for a, b in zip([loss, *dw, *db], out))
    print("ROUTE-OK")
""")


def test_ops_triton_backend_runs_the_triton_launchers(run_interpreted):
    """backend "triton" (CPU tensors under TRITON_INTERPRET=1) runs the Triton launchers themselves."""
    run_interpreted(TRITON_ROUTE_SCRIPT, expect="ROUTE-OK")


@pytest.mark.skipif(not torch.cuda.is_available() or not _ext.HAS_TRITON, reason="needs CUDA + triton")
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
def test_triton_on_gpu(dim):
    x, f, p, ws, bs = make_problem(4, 3000, [64, 64], torch.float32, dim=dim)
    dev = [t.cuda() for t in (x, f, p)]
    ws_c, bs_c = [w.cuda() for w in ws], [b.cuda() for b in bs]
    cot = torch.randn(4, 3000, generator=torch.Generator().manual_seed(1)).cuda()
    compare(run_with_grads("reference", *dev, ws_c, bs_c, "relu", cot),
            run_with_grads("triton", *dev, ws_c, bs_c, "relu", cot), torch.float32)


@pytest.mark.parametrize("backend", ["reference", "cpu"])
@pytest.mark.parametrize("where", ["weights", "biases"])
def test_nonfinite_parameters_are_refused_on_every_backend(backend, where):
    """An Inf weight made the C++ kernel return NaN where the reference returned a number (0 * Inf
    in different places): every backend now refuses non-finite parameters with the same error."""
    if backend == "cpu" and not _ext.cpp_available():
        pytest.skip("symfast._C not built")
    g = torch.Generator().manual_seed(0)
    pe = sf.DyadicAxisPE(2)
    ws = [torch.randn(1, pe.dim, 4, generator=g), torch.randn(1, 4, 1, generator=g)]
    bs = [torch.zeros(1, 4), torch.zeros(1, 1)]
    (ws if where == "weights" else bs)[0].view(-1)[0] = float("inf")
    x = torch.zeros(1, 3, 2)
    with pytest.raises(ValueError, match=rf"{where}\[0\] contains NaN or Inf"):
        sf.fourier_mlp(x, pe.frequencies.float(), pe.phases.float(), ws, bs, "relu", backend=backend)
    with pytest.raises(ValueError, match=rf"{where}\[0\] contains NaN or Inf"):
        sf.fourier_mlp_train_step(x, torch.zeros(1, 3), pe.frequencies.float(), pe.phases.float(), ws, bs, "relu",
                                  backend=backend)


def test_triton_kernel_the_gpu_refuses_runs_the_reference_with_a_warning(monkeypatch):
    """A model whose plain Triton kernel the GPU refuses at launch (too large for its shared memory,
    known only once compiled for that GPU) runs the reference in each op, with a one-time warning."""
    pytest.importorskip("triton")
    from symfast.ops import _dispatch
    from symfast.ops.fourier_mlp import triton as tri

    def refuse(*args, **kwargs):
        raise tri.DoesNotFit("the Triton backward kernel for this model does not fit this GPU (test)")

    for name in ("fourier_mlp_fwd", "fourier_mlp_bwd", "fourier_mlp_train_step"):
        monkeypatch.setattr(tri, name, refuse)
    monkeypatch.setattr(_dispatch, "_warned", set())
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 7, 2, generator=g)
    pe = sf.DyadicAxisPE(3)
    ws = [torch.randn(2, pe.dim, 16, generator=g) * 0.3, torch.randn(2, 16, 1, generator=g) * 0.3]
    bs = [torch.zeros(2, 16), torch.zeros(2, 1)]
    f, p = pe.frequencies.float(), pe.phases.float()
    t, grad = torch.randn(2, 7, generator=g), torch.randn(2, 7, generator=g)
    ops = torch.ops.symfast
    calls = {"forward": lambda be: [ops.fourier_mlp(x, f, p, ws, bs, "tanh", be)],
             "backward": lambda be: ops.fourier_mlp_backward(grad, x, f, p, ws, bs, "tanh", be, True),
             "train step": lambda be: ops.fourier_mlp_train_step(x, t, f, p, ws, bs, "tanh", be)}
    for name, call in calls.items():
        with pytest.warns(RuntimeWarning, match="does not fit this GPU.*using the PyTorch reference"):
            fast = call("triton")
        for i, (a, b) in enumerate(zip(call("reference"), fast)):
            assert_close(f"{name} output {i}", a, b)
