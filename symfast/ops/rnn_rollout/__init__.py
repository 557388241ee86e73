"""Fused rollouts of many tanh-RNN recurrent matrices over the same inputs.

    rnn_rollout(W [A, H, H], U, V, x, h0) -> y [A, B, T, O]         torch.ops.symfast.rnn_rollout

Where things live:
  reference     symfast/ops/rnn_rollout/reference.py (a Python loop over time steps)
  CPU kernel    csrc/rnn_rollout.cpp via cpu.py: the whole time loop in one call, OpenMP over
                variants x batch tiles, vectorised register-blocked matvec and a rational tanh
  Triton        triton.py: W kept on chip for all steps (float32, no return_hidden; CUDA, or
                CPU under TRITON_INTERPRET=1 with backend="triton")
  tests         tests/ops/test_rnn_rollout.py, tests/ops/test_rnn_rollout_triton.py
  benchmark     benchmarks/benchmarks/bench_schur.py (the ablation's rollouts)
The input projection U x_t is shared by all variants and computed once with torch.
Gradients to W, U, V, x and h0 go through the reference's autograd (BPTT, recomputed in
the backward: the fused forward keeps no hidden states).
"""
from __future__ import annotations

import torch

from symfast.ops import _checks, _dispatch
from symfast.ops.rnn_rollout import cpu, reference

__all__ = ["rnn_rollout"]

_NAMES = ("W", "U", "V", "x", "h0")


def _check_finite(tensors) -> None:
    # a NaN or Inf input is refused by name (the kernels would propagate it, the caller wants to know)
    for name, t in zip(_NAMES, tensors):
        if not _checks.all_finite(t):
            raise ValueError(f"{name} contains NaN or Inf")


MAX_SIZE = 2 ** 31 - 1 - 32  # A, H, B, T and O: the C++ kernel's 32-bit sizes (its padded width included)


def validate(W, U, V, x, h0) -> None:
    """Static checks of one rollout (fake tensors too): W [A, H, H], U [H, I], V [O, H], x [B, T, I],
    h0 [B, H], one float dtype, one device (never a mix of meta and real tensors)."""
    op = "rnn_rollout"
    for name, t in zip(_NAMES, (W, U, V, x, h0)):
        _checks.tensor(op, name, t)
    if W.ndim != 3 or W.shape[1] != W.shape[2]:
        raise ValueError(f"{op}: W must be [A, H, H], got {list(W.shape)}")
    H = W.shape[1]
    if x.ndim != 3:
        raise ValueError(f"{op}: x must be [B, T, I], got {list(x.shape)}")
    B, I = x.shape[0], x.shape[2]
    if U.shape != (H, I):
        raise ValueError(f"{op}: U must be [H, I] = [{H}, {I}], got {list(U.shape)}")
    if V.ndim != 2 or V.shape[1] != H:
        raise ValueError(f"{op}: V must be [O, H] = [O, {H}], got {list(V.shape)}")
    if h0.shape != (B, H):
        raise ValueError(f"{op}: h0 must be [B, H] = [{B}, {H}], got {list(h0.shape)}")
    named = tuple(zip(_NAMES, (W, U, V, x, h0)))
    _checks.same_dtype(op, named, "x")
    _checks.same_device(op, named)
    for name, n in (("A", W.shape[0]), ("H", H), ("B", B), ("T", x.shape[1]), ("O", V.shape[0])):
        if n > MAX_SIZE:  # the kernel's loops index with 32-bit ints (a bigger size would be truncated)
            raise ValueError(f"{op}: {name} = {n} exceeds {MAX_SIZE}, the largest size the kernels take")


def resolve_backend(backend: str, x, return_hidden: bool) -> str:
    """The backend that runs on x's device and dtype ("auto": C++ on CPU, Triton on CUDA for float32
    without hidden states, else the reference): the one rule for `rnn_rollout` and the op's "auto"."""
    dt = x.dtype
    problem = None
    if dt != torch.float32:
        problem = f"dtype {dt} (float32 only)"
    elif return_hidden:
        problem = "return_hidden=True"
    be = _dispatch.resolve("rnn_rollout", backend, x.device, triton=True, triton_problem=problem)
    if be == "cpu" and dt not in (torch.float32, torch.float64):
        if backend != "auto":
            raise ValueError(f"backend='cpu' needs float32/float64 tensors, got {dt}")
        be = "reference"
    return be


def _reference(W, U, V, x, h0, return_hidden, backend):
    validate(W, U, V, x, h0)
    out = reference.rnn_rollout(W, U, V, x, h0, return_hidden=True)
    return [out[0], out[1] if return_hidden else x.new_empty(0)]


def _cpu(W, U, V, x, h0, return_hidden, backend):
    validate(W, U, V, x, h0)
    _check_finite((W, U, V, x, h0))
    return list(cpu.rnn_rollout(W, U, V, x, h0, return_hidden))


def _triton(W, U, V, x, h0, return_hidden, backend):
    validate(W, U, V, x, h0)
    from symfast.ops.rnn_rollout.triton import rnn_rollout_fwd

    _check_finite((W, U, V, x, h0))
    return [rnn_rollout_fwd(W, x @ U.T, V, h0), x.new_empty(0)]


@torch.library.custom_op("symfast::rnn_rollout", mutates_args=())
def rnn_rollout_op(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, h0: torch.Tensor,
                   return_hidden: bool, backend: str) -> list[torch.Tensor]:
    """W: [A, H, H], U: [H, I], V: [O, H], x: [B, T, I], h0: [B, H] -> [y [A, B, T, O], hs [A, B, T, H] or [0]]."""
    return _reference(W, U, V, x, h0, return_hidden, backend)


_dispatch.register_kernels(rnn_rollout_op, _reference, {"cpu": _cpu, "triton": _triton},
                           lambda x, return_hidden, **_: resolve_backend("auto", x, return_hidden))


@rnn_rollout_op.register_fake
def _(W, U, V, x, h0, return_hidden, backend):
    _checks.backend("rnn_rollout", backend)
    validate(W, U, V, x, h0)
    A, H = W.shape[0], W.shape[1]
    B, T = x.shape[0], x.shape[1]
    return [x.new_empty(A, B, T, V.shape[0]), x.new_empty(A, B, T, H) if return_hidden else x.new_empty(0)]


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:5])
    ctx.return_hidden = inputs[5]


def _backward(ctx, grads):
    inputs = ctx.saved_tensors
    need = ctx.needs_input_grad[:5]
    gy, ghs = grads
    with torch.enable_grad():
        leaves = [t.detach().requires_grad_(n) for t, n in zip(inputs, need)]
        y, hs = reference.rnn_rollout(*leaves, return_hidden=True)
        outs, cots = [y], [gy]
        if ctx.return_hidden and ghs is not None:
            outs.append(hs)
            cots.append(ghs)
        wrt = [t for t, n in zip(leaves, need) if n]
        gs = iter(torch.autograd.grad(outs, wrt, cots, allow_unused=True))
    out = [next(gs) if n else None for n in need]
    out = [torch.zeros_like(t) if n and g is None else g for t, n, g in zip(inputs, need, out)]
    return (*out, None, None)


rnn_rollout_op.register_autograd(_backward, setup_context=_setup_context)


def rnn_rollout(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None = None,
                return_hidden: bool = False, backend: str = "auto"):
    """Roll out `h_t = tanh(W_a h_{t-1} + U x_t)`, `y_t = V h_t` for all variants a at once.

    Differentiable in W, U, V, x and h0 on every backend (the backward runs the reference's BPTT).

    Args:
        W: [A, H, H] recurrent matrices (or [H, H] for one).
        U: [H, I] input weights; V: [O, H] readout (shared by all variants).
        x: [B, T, I] inputs (batch first); h0: [B, H] initial state (default zeros).
            All real floating point (complex raises); cast to x's dtype.
        return_hidden: also return the hidden states.
        backend: "auto" (C++ on CPU, Triton on CUDA), "cpu", "triton" (float32; return_hidden not
            supported) or "reference" (see `symfast.ops._dispatch`).

    Returns:
        y: [A, B, T, O] (or [B, T, O] for a single [H, H] W), and hs: [A, B, T, H] when
        return_hidden. Float32 kernels use a rational tanh accurate to a few ulp; NaN or Inf
        in any input raises on the fast paths.
    """
    for name, t in zip(_NAMES, (W, U, V, x, h0)):
        if t is not None and (not isinstance(t, torch.Tensor) or t.is_complex() or not t.is_floating_point()):
            raise ValueError(f"{name} must be a real floating-point tensor, got "
                             f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
    single = W.ndim == 2
    if single:
        W = W.unsqueeze(0)
    if W.ndim != 3 or W.shape[1] != W.shape[2]:
        raise ValueError(f"W must be [A, H, H] or [H, H], got {list(W.shape)}")
    H = W.shape[1]
    if x.ndim != 3:
        raise ValueError(f"x must be [B, T, I], got {list(x.shape)}")
    if U.ndim != 2 or U.shape != (H, x.shape[2]):
        raise ValueError(f"U must be [H, I] = [{H}, {x.shape[2]}], got {list(U.shape)}")
    if V.ndim != 2 or V.shape[1] != H:
        raise ValueError(f"V must be [O, {H}], got {list(V.shape)}")
    if h0 is not None and h0.shape != (x.shape[0], H):
        raise ValueError(f"h0 must be [B, H] = [{x.shape[0]}, {H}], got {list(h0.shape)}")
    dt = x.dtype
    W, U, V = W.to(dt), U.to(dt), V.to(dt)
    h0 = x.new_zeros(x.shape[0], H) if h0 is None else h0.to(dt)
    be = _dispatch.for_op(backend, resolve_backend(backend, x, return_hidden))
    if _dispatch.under_functorch(W, U, V, x, h0):
        out = reference.rnn_rollout(W, U, V, x, h0, return_hidden)
    else:
        y, hs = rnn_rollout_op(W, U, V, x, h0, bool(return_hidden), be)
        out = (y, hs) if return_hidden else y
    if single:
        out = tuple(o[0] for o in out) if return_hidden else out[0]
    return out
