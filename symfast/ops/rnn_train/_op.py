"""torch.library registration of the fused RNN ensemble training ops.

Two custom ops, both taking a backend name ("auto" resolved in the kernel by `resolve_backend`, the
public functions' rule; see `symfast.ops._dispatch`):
  symfast::rnn_train_step(W, U, V, x, targets, mask, h0, widths, need_dx, need_dh0, backend)
      -> [loss [B], dW, dU, dV, dx [B, S, T, I] or [0], dh0 [B, S, H] or [0]]   (not differentiable)
  symfast::rnn_train_loss(W, U, V, x, targets, mask, h0, widths, backend) -> loss [B]
      differentiable in W, U, V, x and h0: its backward runs rnn_train_step (forward again +
      BPTT in one kernel call) and scales model b's gradients by the cotangent of loss_b.
      Double backward (create_graph=True) goes through the reference's autograd.
Each op's default implementation is the reference; "cpu" runs the C++ kernel, "triton" the
Triton kernel (CUDA float32, or CPU under TRITON_INTERPRET=1).
Every kernel calls `validate` first, so a direct `torch.ops.symfast.*` call gets the same
checks (and messages) as the public functions.
"""
from __future__ import annotations

from typing import Optional

import torch

from symfast import _ext
from symfast.ops import _checks, _dispatch
from symfast.ops.rnn_train import cpu, reference

_LIB = "symfast"


def resolve_backend(backend: str, x, W) -> str:
    """The backend that trains these models (x [B, S, T, I], W [B, H, H]; "auto": C++ on CPU, Triton on
    CUDA where it takes x's dtype and H): the one rule for the public functions and the ops' "auto"."""
    problem = None
    if _ext.HAS_TRITON and (x.device.type == "cuda" or backend == "triton"):
        problem = _triton().unsupported(x.dtype, W.shape[-1])
    return _dispatch.resolve("rnn_train", backend, x.device, triton=True, triton_problem=problem)


def _auto(x, W, **_) -> str:
    return resolve_backend("auto", x, W)


def _shape(t):
    return list(t.shape)


def validate(W, U, V, x, targets, mask=None, h0=None, widths=None, values: bool = True):
    """Shapes, dtypes and devices of one ensemble step (and, with `values`, the range of widths);
    ValueError naming the offender. Returns (B, H, S, T, I, O)."""
    named = [("W", W), ("U", U), ("V", V), ("x", x), ("targets", targets), ("mask", mask), ("h0", h0)]
    for name, t in named:
        if t is not None and (not isinstance(t, torch.Tensor) or t.dtype not in (torch.float32, torch.float64)):
            raise ValueError(f"{name} must be a float32 or float64 tensor, got "
                             f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
    if W.ndim != 3 or W.shape[1] != W.shape[2]:
        raise ValueError(f"W must be [B, H, H], got {_shape(W)}")
    B, H = W.shape[0], W.shape[1]
    if x.ndim != 4 or x.shape[0] != B:
        raise ValueError(f"x must be [B={B}, S, T, I], got {_shape(x)}")
    S, T, I = x.shape[1], x.shape[2], x.shape[3]
    if min(B, H, S, T, I) < 1:
        raise ValueError(f"every size must be >= 1: W {_shape(W)}, x {_shape(x)}")
    if U.shape != (B, H, I):
        raise ValueError(f"U must be [B, H, I] = [{B}, {H}, {I}], got {_shape(U)}")
    if V.ndim != 3 or V.shape[0] != B or V.shape[2] != H or V.shape[1] < 1:
        raise ValueError(f"V must be [B, O, H] = [{B}, O, {H}], got {_shape(V)}")
    O = V.shape[1]
    if targets.shape != (B, S, T, O):
        raise ValueError(f"targets must be [B, S, T, O] = [{B}, {S}, {T}, {O}], got {_shape(targets)}")
    if mask is not None and mask.shape not in ((B, S, T), (B, S, T, O), (B, S, T, 1)):
        raise ValueError(f"mask must be [B, S, T] or [B, S, T, O] = [{B}, {S}, {T}, {O}], got {_shape(mask)}")
    if h0 is not None and h0.shape != (B, S, H):
        raise ValueError(f"h0 must be [B, S, H] = [{B}, {S}, {H}], got {_shape(h0)}")
    for name, t in named:
        if t is not None and t.dtype != x.dtype:
            raise ValueError(f"{name} has dtype {t.dtype}, expected {x.dtype} (same as x)")
        if t is not None and t.device != x.device:
            raise ValueError(f"{name} is on {t.device}, expected {x.device} (same as x)")
    if widths is not None:
        if not isinstance(widths, torch.Tensor) or widths.dtype != torch.int64 or widths.shape != (B,):
            raise ValueError(f"widths must be an int64 tensor [B={B}], got "
                             f"{_shape(widths) if isinstance(widths, torch.Tensor) else type(widths).__name__}")
        if widths.device != x.device:  # (a meta widths with real tensors would reach the fake: no result)
            raise ValueError(f"widths is on {widths.device}, expected {x.device} (same as x)")
        if values and widths.device.type != "meta" and not bool(((widths >= 1) & (widths <= H)).all()):
            raise ValueError(f"widths must lie in [1, H={H}], got {widths.tolist()}")
    return B, H, S, T, I, O


def _cpu_inputs(*tensors) -> None:
    for t in tensors:
        if t is not None and t.device.type != "cpu":
            raise ValueError(f"the CPU kernel needs CPU tensors, got one on {t.device}")


def _triton():
    from symfast.ops.rnn_train import triton as tri
    return tri


def _check_finite(*named) -> None:
    # the C++ kernel checks its inputs as it reads them; the Triton kernel does not
    for name, t in named:
        if t is not None and not _checks.all_finite(t):
            raise ValueError(f"{name} contains NaN or Inf values; the fused kernel needs finite inputs")


def _finite(W, U, V, x, targets, mask, h0):
    _check_finite(("W", W), ("U", U), ("V", V), ("x", x), ("targets", targets), ("mask", mask), ("h0", h0))


def _params_finite(W, U, V, mask, h0):
    # the C++ kernel checks x and targets as it reads them; the parameters, mask and h0 (small) here
    _check_finite(("W", W), ("U", U), ("V", V), ("mask", mask), ("h0", h0))


# ---- symfast::rnn_train_step ----

def _empty(x):
    return x.new_empty(0)


def _no_gradient_past_overflow(out: list) -> list:
    """NaN gradients for every model whose loss is Inf or NaN (overflow of finite inputs), in every
    backend: such a loss has no gradient, and the kernels and the reference would otherwise disagree
    (0 or +-Inf against NaN)."""
    bad = ~torch.isfinite(out[0])
    if bool(bad.any()):
        for g in out[1:]:
            if g.numel():
                g[bad] = float("nan")
    return out


def _step_reference(W, U, V, x, targets, mask, h0, widths, need_dx, need_dh0, backend):
    validate(W, U, V, x, targets, mask, h0, widths)
    loss, dW, dU, dV, dx, dh0 = reference.rnn_train_step(W, U, V, x, targets, mask, h0, widths, need_dx, need_dh0)
    return _no_gradient_past_overflow([loss, dW, dU, dV, _empty(x) if dx is None else dx,
                                       _empty(x) if dh0 is None else dh0])


def _step_cpu(W, U, V, x, targets, mask, h0, widths, need_dx, need_dh0, backend):
    validate(W, U, V, x, targets, mask, h0, widths)
    _cpu_inputs(W, U, V, x, targets, mask, h0, widths)
    _params_finite(W, U, V, mask, h0)
    loss, dW, dU, dV, dx, dh0 = cpu.rnn_train(W, U, V, x, targets, mask, h0, widths, True, need_dx, need_dh0)
    return _no_gradient_past_overflow([loss, dW, dU, dV, _empty(x) if dx is None else dx,
                                       _empty(x) if dh0 is None else dh0])


@torch.library.custom_op(f"{_LIB}::rnn_train_step", mutates_args=())
def rnn_train_step_op(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, targets: torch.Tensor,
                      mask: Optional[torch.Tensor], h0: Optional[torch.Tensor], widths: Optional[torch.Tensor],
                      need_dx: bool, need_dh0: bool, backend: str) -> list[torch.Tensor]:
    return _step_reference(W, U, V, x, targets, mask, h0, widths, need_dx, need_dh0, backend)


def _step_triton(W, U, V, x, targets, mask, h0, widths, need_dx, need_dh0, backend):
    validate(W, U, V, x, targets, mask, h0, widths)
    _finite(W, U, V, x, targets, mask, h0)
    loss, dW, dU, dV, dx, dh0 = _triton().rnn_train(W, U, V, x, targets, mask, h0, widths, True, need_dx, need_dh0)
    return _no_gradient_past_overflow([loss, dW, dU, dV, _empty(x) if dx is None else dx,
                                       _empty(x) if dh0 is None else dh0])


_dispatch.register_kernels(rnn_train_step_op, _step_reference, {"cpu": _step_cpu, "triton": _step_triton}, _auto)


@rnn_train_step_op.register_fake
def _(W, U, V, x, targets, mask, h0, widths, need_dx, need_dh0, backend):
    _checks.backend("rnn_train_step", backend)
    B, H, S, _, _, _ = validate(W, U, V, x, targets, mask, h0, widths, values=False)
    cf = torch.contiguous_format
    return [x.new_empty(B), torch.empty_like(W, memory_format=cf), torch.empty_like(U, memory_format=cf),
            torch.empty_like(V, memory_format=cf),
            torch.empty_like(x, memory_format=cf) if need_dx else _empty(x),
            x.new_empty(B, S, H) if need_dh0 else _empty(x)]


_dispatch.not_differentiable(rnn_train_step_op)


# ---- symfast::rnn_train_loss ----

def _loss_reference(W, U, V, x, targets, mask, h0, widths, backend):
    validate(W, U, V, x, targets, mask, h0, widths)
    return reference.rnn_train_loss(W, U, V, x, targets, mask, h0, widths)


def _loss_cpu(W, U, V, x, targets, mask, h0, widths, backend):
    validate(W, U, V, x, targets, mask, h0, widths)
    _cpu_inputs(W, U, V, x, targets, mask, h0, widths)
    _params_finite(W, U, V, mask, h0)
    return cpu.rnn_train(W, U, V, x, targets, mask, h0, widths, False)


@torch.library.custom_op(f"{_LIB}::rnn_train_loss", mutates_args=())
def rnn_train_loss_op(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, targets: torch.Tensor,
                      mask: Optional[torch.Tensor], h0: Optional[torch.Tensor], widths: Optional[torch.Tensor],
                      backend: str) -> torch.Tensor:
    return _loss_reference(W, U, V, x, targets, mask, h0, widths, backend)


def _loss_triton(W, U, V, x, targets, mask, h0, widths, backend):
    validate(W, U, V, x, targets, mask, h0, widths)
    _finite(W, U, V, x, targets, mask, h0)
    return _triton().rnn_train(W, U, V, x, targets, mask, h0, widths, False)


_dispatch.register_kernels(rnn_train_loss_op, _loss_reference, {"cpu": _loss_cpu, "triton": _loss_triton}, _auto)


@rnn_train_loss_op.register_fake
def _(W, U, V, x, targets, mask, h0, widths, backend):
    _checks.backend("rnn_train_loss", backend)
    B = validate(W, U, V, x, targets, mask, h0, widths, values=False)[0]
    return x.new_empty(B)


def _setup_context(ctx, inputs, output):
    W, U, V, x, targets, mask, h0, widths, backend = inputs
    ctx.save_for_backward(W, U, V, x, targets, mask, h0, widths)
    ctx.backend = backend


def _backward(ctx, grad):
    W, U, V, x, targets, mask, h0, widths = ctx.saved_tensors
    need = ctx.needs_input_grad
    for k, name in ((4, "targets"), (5, "mask")):
        if need[k]:
            raise RuntimeError(f"symfast.rnn_train_loss is not differentiable in {name}; pass {name}.detach()")
    need_dx, need_dh0 = bool(need[3]), bool(need[6])
    if torch.is_grad_enabled():  # create_graph=True: differentiable gradients from the reference
        cands = [W, U, V, x, h0]
        flags = [need[0], need[1], need[2], need_dx, need_dh0]
        loss = reference.rnn_train_loss(W, U, V, x, targets, mask, h0, widths)
        wrt = [t for t, f in zip(cands, flags) if f]
        gs = iter(torch.autograd.grad(loss, wrt, grad, create_graph=True, allow_unused=True))
        out = [next(gs) if f else None for f in flags]
        out = [torch.zeros_like(t) if f and g is None else g for t, f, g in zip(cands, flags, out)]
        return out[0], out[1], out[2], out[3], None, None, out[4], None, None
    loss, dW, dU, dV, dx, dh0 = torch.ops.symfast.rnn_train_step(W, U, V, x, targets, mask, h0, widths, need_dx,
                                                                  need_dh0, ctx.backend)
    g3 = grad[:, None, None]
    return (dW * g3 if need[0] else None, dU * g3 if need[1] else None, dV * g3 if need[2] else None,
            dx * grad[:, None, None, None] if need_dx else None, None, None,
            dh0 * g3 if need_dh0 else None, None, None)


rnn_train_loss_op.register_autograd(_backward, setup_context=_setup_context)
