"""Fused rollout kernel vs the PyTorch reference (every output by name), and bad input."""
import pytest
import torch

from symfast import _ext
from symfast.ops.rnn_rollout import rnn_rollout, rnn_rollout_op
from symfast.testing import assert_close, opcheck


def _data(A, B, T, H, I, O, dtype, seed=0, scale=0.9):
    g = torch.Generator().manual_seed(seed)
    W = scale * torch.randn(A, H, H, generator=g, dtype=torch.float64) / H ** 0.5
    U = torch.randn(H, I, generator=g, dtype=torch.float64)
    V = torch.randn(O, H, generator=g, dtype=torch.float64)
    x = torch.randn(B, T, I, generator=g, dtype=torch.float64)
    h0 = 0.5 * torch.randn(B, H, generator=g, dtype=torch.float64)
    return [t.to(dtype) for t in (W, U, V, x, h0)]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("A,B,T,H", [(1, 1, 1, 1), (3, 5, 7, 17), (2, 33, 12, 64), (8, 3, 4, 70)],
                         ids=["tiny", "odd", "H64", "H70"])
def test_rollout_matches_reference(A, B, T, H, dtype):
    W, U, V, x, h0 = _data(A, B, T, H, 3, 2, dtype)
    y, hs = rnn_rollout(W, U, V, x, h0, return_hidden=True, backend="cpu")
    y_ref, hs_ref = rnn_rollout(W, U, V, x, h0, return_hidden=True, backend="reference")
    assert_close("y", y_ref, y, rms=dtype == torch.float32)
    assert_close("hs", hs_ref, hs, rms=dtype == torch.float32)
    y2 = rnn_rollout(W, U, V, x, backend="cpu")  # zero h0, no hidden
    assert_close("y_h0zero", rnn_rollout(W, U, V, x, backend="reference"), y2, rms=dtype == torch.float32)


def test_rollout_f32_tanh_accuracy_elementwise():
    """One step from h0 = 0 is tanh(U x): the rational tanh is accurate to a few ulp."""
    W, U, V, x, _ = _data(2, 4, 1, 40, 40, 3, torch.float32, scale=0.0)
    x = x * 4  # pre-activations far into saturation as well
    _, hs = rnn_rollout(W, U, V, x, return_hidden=True, backend="cpu")
    ref = torch.tanh((x @ U.T).double())  # same float32 pre-activation
    assert (hs[0].double() - ref).abs().max() < 4e-7


def test_rollout_single_matrix_and_torch_rnn():
    W, U, V, x, _ = _data(1, 4, 9, 16, 3, 2, torch.float32)
    y = rnn_rollout(W[0], U, V, x)
    rnn = torch.nn.RNN(3, 16, batch_first=True, bias=False)
    with torch.no_grad():
        rnn.weight_hh_l0.copy_(W[0])
        rnn.weight_ih_l0.copy_(U)
        out, _ = rnn(x)
    assert_close("y_vs_nn_RNN", out @ V.T, y, rms=True)


def test_rollout_deterministic_across_threads():
    W, U, V, x, h0 = _data(3, 37, 20, 24, 2, 2, torch.float32)
    C = _ext.require_cpp()
    ux = (x @ U.T).contiguous().numpy()
    a = C.rnn_rollout_f32(W.numpy(), ux, V.numpy(), h0.numpy(), False, 1)[0]
    b = C.rnn_rollout_f32(W.numpy(), ux, V.numpy(), h0.numpy(), False, 2)[0]
    assert (a == b).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("backend", ["cpu", "reference", "auto"])
def test_opcheck(dtype, backend):
    W, U, V, x, h0 = _data(2, 3, 4, 5, 2, 1, dtype)
    for ret, grad in ((False, False), (True, True)):
        args = [t.clone().requires_grad_(grad) for t in (W, U, V, x, h0)]
        opcheck(rnn_rollout_op, (*args, ret, backend), fast=dtype != torch.float64)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("return_hidden", [False, True], ids=["y", "y_hs"])
def test_gradients_match_reference(dtype, return_hidden):
    """dW, dU, dV, dx, dh0 of the C++ forward (BPTT through the reference) against the reference."""
    data = _data(3, 4, 6, 9, 2, 2, dtype)
    g = torch.Generator().manual_seed(5)
    grads = {}
    for backend in ("reference", "cpu"):
        args = [t.clone().requires_grad_(True) for t in data]
        out = rnn_rollout(*args, return_hidden=return_hidden, backend=backend)
        outs = list(out) if return_hidden else [out]
        g.manual_seed(5)
        cots = [torch.randn(o.shape, generator=g, dtype=dtype) for o in outs]
        grads[backend] = torch.autograd.grad(outs, args, cots)
    for name, r, f in zip(("dW", "dU", "dV", "dx", "dh0"), grads["reference"], grads["cpu"]):
        assert_close(name, r, f, rms=dtype == torch.float32)


@pytest.mark.parametrize("name", ["W", "U", "V", "x", "h0"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
def test_nan_in_any_input_raises(name, dtype):
    args = dict(zip(("W", "U", "V", "x", "h0"), _data(1, 2, 3, 4, 2, 1, dtype)))
    args[name] = args[name].clone()
    args[name].view(-1)[0] = float("nan")
    with pytest.raises(ValueError, match=f"{name} contains NaN"):
        rnn_rollout(**args, backend="cpu")


def test_complex_inputs_raise():
    W, U, V, x, h0 = _data(1, 2, 3, 4, 2, 1, torch.float64)
    with pytest.raises(ValueError, match="x must be a real floating-point tensor, got torch.complex128"):
        rnn_rollout(W, U, V, x.to(torch.complex128), h0)
    with pytest.raises(ValueError, match="W must be a real floating-point tensor"):
        rnn_rollout(W.to(torch.complex128), U, V, x, h0)


@pytest.mark.parametrize("kw, match", [
    (dict(W=torch.zeros(2, 3, 4)), "W must be"),
    (dict(U=torch.zeros(5, 2)), "U must be"),
    (dict(V=torch.zeros(2, 5)), "V must be"),
    (dict(x=torch.zeros(2, 3)), "x must be"),
    (dict(W=torch.full((1, 4, 4), float("nan"))), "NaN"),
])
def test_rollout_bad_input(kw, match):
    args = dict(W=torch.zeros(1, 4, 4), U=torch.zeros(4, 2), V=torch.zeros(1, 4), x=torch.zeros(2, 3, 2))
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        rnn_rollout(args["W"], args["U"], args["V"], args["x"])



@pytest.mark.skipif(not _ext.cpp_available(), reason="needs the compiled C++ kernels")
@pytest.mark.parametrize("fn", ["rnn_rollout_f32", "rnn_rollout_f64"])
def test_a_nan_pre_activation_stays_nan_in_the_kernel(fn):
    """A NaN reaching the recurrent tanh (here through the kernel's input projection, which the op
    itself refuses) stays NaN in that unit and spreads through W, as torch.tanh does; the float32
    rational tanh once clamped it to -1."""
    import numpy as np

    dt = np.float32 if fn.endswith("f32") else np.float64
    W = np.array([[[0.5, 0.25], [0.0, 0.5]]], dt)
    ux = np.zeros((1, 2, 2), dt)
    ux[0, 0, 0] = np.nan
    V, h0 = np.eye(2, dtype=dt), np.zeros((1, 2), dt)
    y, hs = getattr(_ext.require_cpp(), fn)(W, ux, V, h0, True, 1)
    assert np.isnan(hs[0, 0, 0, 0]) and not np.isnan(hs[0, 0, 0, 1])  # step 0: the unit that got NaN
    assert np.isnan(hs[0, 0, 1]).all()  # step 1: W spreads it (0 * NaN is NaN)
    assert np.isnan(y[0, 0, 0, 0])


@pytest.mark.skipif(not _ext.cpp_available(), reason="needs the compiled C++ kernels")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_overflow_of_finite_inputs_gives_nan_as_the_reference_does_without_fma(dtype):
    """Finite inputs whose W h overflows to inf - inf: NaN, as in the reference, on the generic
    instance (separate multiply and add). The AVX2/AVX-512 instances accumulate with fused
    multiply-adds, whose exact product never overflows: there the sum is +-inf and tanh +-1."""
    import os
    import subprocess
    import sys

    script = f"""
import torch
from symfast.ops.rnn_rollout import rnn_rollout
dt = torch.{dtype}
big = torch.finfo(dt).max / 2
W = torch.tensor([[[big, -big], [0.5, 0.0]]], dtype=dt)
U, V = torch.zeros(2, 1, dtype=dt), torch.eye(2, dtype=dt)
x, h0 = torch.zeros(1, 2, 1, dtype=dt), torch.tensor([[big, big]], dtype=dt)
ref = rnn_rollout(W, U, V, x, h0, return_hidden=True, backend="reference")[1]
got = rnn_rollout(W, U, V, x, h0, return_hidden=True, backend="cpu")[1]
assert torch.isnan(ref[0, 0, 0, 0]), ref
assert torch.equal(torch.isnan(got), torch.isnan(ref)), (got, ref)
print("ok")
"""
    env = {**os.environ, "SYMFAST_ISA": "generic"}
    # -P: the symfast under test, never a source tree (without _C) in the working directory
    r = subprocess.run([sys.executable, "-P", "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]
