"""torch.ops.symfast.fourier_features vs its PyTorch reference: outputs and gradients by name."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import symfast as sf
from symfast import _ext
from symfast.ops.fourier_features import fourier_features, fourier_features_op, reference
from symfast.testing import assert_close, opcheck

needs_cpp = pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")


def _inputs(n, dtype, m=6, seed=0, grad=False, dim=2):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, dim, generator=g, dtype=dtype) * 2 - 1
    w = torch.randn(m, dim, generator=g, dtype=dtype) * 3
    b = torch.rand(m, generator=g, dtype=dtype)
    return [t.requires_grad_(grad) for t in (x, w, b)]


@needs_cpp
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("backend", ["cpu", "reference", "auto"])
def test_opcheck(dtype, backend, dim):
    fast = dtype != torch.float64 or dim != 2  # the full check once per backend
    for n, grad in ((1, False), (7, True)):
        x, w, b = _inputs(n, dtype, grad=grad, dim=dim)
        opcheck(fourier_features_op, (x, w, b, backend), fast=fast)


@needs_cpp
@pytest.mark.parametrize("dim", [2, 3], ids=["2d", "3d"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("shape", [(1,), (63,), (4, 250)], ids=["N1", "N63", "4x250"])
def test_forward_and_gradients_match_reference(dtype, shape, dim):
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(*shape, dim, generator=g, dtype=dtype) * 2 - 1).requires_grad_(True)
    w = (torch.randn(5, dim, generator=g, dtype=dtype) * 4).requires_grad_(True)
    b = torch.rand(5, generator=g, dtype=dtype).requires_grad_(True)
    cot = torch.randn(*shape, 10, generator=g, dtype=dtype)
    fast = fourier_features(x, w, b, backend="cpu")
    ref = reference.fourier_features(x, w, b)
    assert_close("features", ref, fast)
    gf = torch.autograd.grad(fast, (x, w, b), cot)
    gr = torch.autograd.grad(ref, (x, w, b), cot)
    for name, r, f in zip(("dx", "dfrequencies", "dphases"), gr, gf):
        assert_close(name, r, f, rms=name != "dx")


@needs_cpp
def test_double_backward_matches_reference():
    x, w, b = _inputs(9, torch.float64)
    x.requires_grad_(True)
    outs = {}
    for name, fn in (("ref", reference.fourier_features), ("cpu", lambda *a: fourier_features(*a, backend="cpu"))):
        y = fn(x, w, b).pow(2).sum()
        (gx,) = torch.autograd.grad(y, x, create_graph=True)
        outs[name] = torch.autograd.grad(gx.sum(), x)[0]
    assert_close("d2x", outs["ref"], outs["cpu"])


@needs_cpp
@settings(max_examples=25, deadline=None)
@given(logu=st.floats(-3, 9), seed=st.integers(0, 1000), dim=st.sampled_from([2, 3]))
def test_float32_argument_sweep_matches_reference(logu, seed, dim):
    """Arguments from 1e-3 to 1e9: the vectorised polynomial below |u| = 8000, libm beyond."""
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(50, dim, generator=g, dtype=torch.float64) * 2 - 1) * 10 ** logu
    w = torch.randn(3, dim, generator=g, dtype=torch.float64)
    b = torch.zeros(3, dtype=torch.float64)
    x32 = x.float()
    fast = fourier_features(x32, w.float(), b.float(), backend="cpu")
    # the reference on the same float32 argument u (rounding of u itself is not the kernel's error)
    ref = reference.fourier_features(x32.double(), w.float().double(), b.double())
    u_abs = (x32.double() @ w.float().double().T).abs().max().item()
    assert_close("features", ref, fast, rtol=0, atol=2e-6 + 2e-7 * u_abs)


def test_complex_and_integer_inputs_raise():
    w, b = torch.ones(2, 2), torch.zeros(2)
    with pytest.raises(ValueError, match="x must be a real floating-point tensor"):
        fourier_features(torch.ones(3, 2, dtype=torch.complex64), w, b)
    with pytest.raises(ValueError, match="frequencies must be a real"):
        fourier_features(torch.ones(3, 2), w.to(torch.complex64), b)
    with pytest.raises(ValueError, match="complex64"):
        sf.DyadicAxisPE(2)(torch.ones(3, 2, dtype=torch.complex64))
    with pytest.raises(ValueError, match=r"x must be \[\.\.\., 2\]"):
        fourier_features(torch.ones(3, 3), w, b)


@pytest.mark.parametrize("x_shape,w_shape,match", [
    ((3, 3), (2, 2), r"x must be \[\.\.\., 2\] to match frequencies \[2, 2\].*got x \[3, 3\]"),
    ((3, 2), (2, 3), r"x must be \[\.\.\., 3\] to match frequencies \[2, 3\].*got x \[3, 2\]"),
    ((3, 4), (2, 4), r"frequencies must be \[m, D\] with D in \[2, 3\], got \[2, 4\] \(x is \[3, 4\]\)"),
    ((3, 1), (2, 1), r"frequencies must be \[m, D\].*got \[2, 1\]"),
    ((), (2, 3), r"x must be \[\.\.\., 3\].*got x \[\]"),
])
def test_input_dimension_mismatch_names_both_shapes(x_shape, w_shape, match):
    with pytest.raises(ValueError, match=match):
        fourier_features(torch.ones(x_shape), torch.ones(w_shape), torch.zeros(w_shape[0]))


def test_unknown_backend_raises():
    with pytest.raises(ValueError, match="backend must be one of"):
        fourier_features(torch.ones(3, 2), torch.ones(2, 2), torch.zeros(2), backend="gpu")
    with pytest.raises(ValueError, match="no Triton kernel"):
        fourier_features(torch.ones(3, 2), torch.ones(2, 2), torch.zeros(2), backend="triton")


@needs_cpp
def test_large_arguments_fall_back_exactly():
    """Beyond the vectorised sin/cos range (|u| > 8000) the C++ kernel uses libm."""
    w = torch.tensor([[4096.0 * math.pi, 0.0]])
    x = torch.tensor([[1.5, 0.0], [0.01, 0.0]])
    fast = fourier_features(x, w, torch.zeros(1), backend="cpu")
    assert_close("features", reference.fourier_features(x, w, torch.zeros(1)), fast, atol=1e-6, rtol=0)
    w3 = torch.tensor([[0.0, 0.0, 4096.0 * math.pi], [1.0, 0.0, 0.0]])  # the same arguments on the z axis, at D = 3
    x3 = torch.tensor([[0.2, 0.0, 1.5], [0.0, 0.3, 0.01]])
    fast = fourier_features(x3, w3, torch.zeros(2), backend="cpu")
    assert_close("3d features", reference.fourier_features(x3, w3, torch.zeros(2)), fast, atol=1e-6, rtol=0)


# float16/bfloat16 features are computed in float32 and rounded once to x's dtype: against float64
# math on the same (rounded) points, the error is that final rounding (half an ulp at 1: 2^-11 for
# float16, 2^-8 for bfloat16) plus float32's error on arguments up to 2^11 pi (about 1e-3).
HALF_TOL = {torch.float16: 1e-2, torch.bfloat16: 2e-2}


@pytest.mark.parametrize("backend", ["auto", "reference"] + (["cpu"] if _ext.cpp_available() else []))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_half_precision_matches_float64_math(dtype, backend):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(512, 2, generator=g) * 2 - 1).to(dtype)
    w = torch.tensor([[2.0 ** k * math.pi, 0.0] for k in range(12)] + [[0.0, 2.0 ** k * math.pi] for k in range(12)],
                     dtype=torch.float64)  # the dyadic encoding's frequencies, up to 2^11 pi
    b = torch.rand(24, generator=g, dtype=torch.float64)
    out = fourier_features(x, w, b, backend=backend)
    exact = reference.fourier_features(x.double(), w, b)
    assert out.dtype == dtype and out.shape == exact.shape
    assert (out.double() - exact).abs().max() < HALF_TOL[dtype]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
def test_half_precision_gradients_reach_the_half_inputs(dtype):
    x, w, b = (t.to(dtype).requires_grad_() for t in _inputs(9, torch.float32))
    fourier_features(x, w, b).sum().backward()
    assert all(t.grad is not None and t.grad.dtype == dtype and torch.isfinite(t.grad).all() for t in (x, w, b))
