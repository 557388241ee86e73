"""Fused rollouts of many tanh-RNN recurrent matrices over the same inputs.

CPU float32/float64 without autograd -> C++ kernel (`csrc/rnn_rollout.cpp`: the
whole time loop in one call, OpenMP over variants x batch tiles, vectorised
register-blocked matvec and tanh); CUDA float32 without autograd -> Triton kernel
(`triton.py`, W kept on chip for all steps; also on CPU under TRITON_INTERPRET=1 with
backend="triton"); otherwise the PyTorch reference. The input projection `U x_t` is
shared by all variants and computed once with torch.
"""
from __future__ import annotations

import torch

from symfast import _ext
from symfast.ops.rnn_rollout import reference

__all__ = ["rnn_rollout"]


def rnn_rollout(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None = None,
                return_hidden: bool = False, backend: str = "auto"):
    """Roll out `h_t = tanh(W_a h_{t-1} + U x_t)`, `y_t = V h_t` for all variants a at once.

    Args:
        W: [A, H, H] recurrent matrices (or [H, H] for one).
        U: [H, I] input weights; V: [O, H] readout (shared by all variants).
        x: [B, T, I] inputs (batch first); h0: [B, H] initial state (default zeros).
        return_hidden: also return the hidden states.
        backend: "auto" (C++ on CPU / Triton on CUDA when no gradient is needed), "cpu",
            "triton" (float32; return_hidden not supported) or "reference".

    Returns:
        y: [A, B, T, O] (or [B, T, O] for a single [H, H] W), and hs: [A, B, T, H] when
        return_hidden. Float32 uses a rational tanh accurate to a few ulp.
    """
    if backend not in ("auto", "cpu", "triton", "reference"):
        raise ValueError(f"backend must be 'auto', 'cpu', 'triton' or 'reference', got {backend!r}")
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
    h0 = None if h0 is None else h0.to(dt)
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (W, U, V, x, h0))
    use_triton = (backend == "triton" or (backend == "auto" and x.device.type == "cuda" and not needs_grad
                                           and not return_hidden and _ext.triton_usable(x.device)))
    if use_triton:
        if not _ext.triton_usable(x.device) or dt != torch.float32 or return_hidden:
            raise ValueError("backend='triton' needs float32 tensors on CUDA (or CPU under TRITON_INTERPRET=1) "
                             f"and return_hidden=False; got {dt} on {x.device}")
        from symfast.ops.rnn_rollout.triton import rnn_rollout_fwd
        with torch.no_grad():
            ux = x @ U.T
            hz = torch.zeros(x.shape[0], H, dtype=dt, device=x.device) if h0 is None else h0
            y = rnn_rollout_fwd(W.detach(), ux, V.detach(), hz.detach())
        return y[0] if single else y
    use_cpp = (backend == "cpu" or (backend == "auto" and x.device.type == "cpu" and not needs_grad
                                    and _ext.cpp_available())) and dt in (torch.float32, torch.float64)
    if not use_cpp:
        if backend == "cpu":
            raise ValueError(f"backend='cpu' needs float32/float64 CPU tensors, got {dt} on {x.device}")
        out = reference.rnn_rollout(W, U, V, x, h0, return_hidden)
    else:
        if x.device.type != "cpu":
            raise ValueError(f"backend='cpu' needs CPU tensors, got device {x.device}")
        for name, t in (("W", W), ("x", x)):
            if not torch.isfinite(t).all():
                raise ValueError(f"{name} contains NaN or Inf")
        C = _ext.require_cpp()
        fn = C.rnn_rollout_f32 if dt == torch.float32 else C.rnn_rollout_f64
        with torch.no_grad():
            ux = (x @ U.T).contiguous()
            hz = torch.zeros(x.shape[0], H, dtype=dt) if h0 is None else h0.contiguous()
            y, hs = fn(W.detach().contiguous().numpy(), ux.numpy(), V.detach().contiguous().numpy(),
                       hz.detach().numpy(), bool(return_hidden), _ext.num_threads())
        y = torch.from_numpy(y)
        out = (y, torch.from_numpy(hs)) if return_hidden else y
    if single:
        out = tuple(o[0] for o in out) if return_hidden else out[0]
    return out
