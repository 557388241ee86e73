"""Fused training of B bias-free tanh RNNs at once: forward, masked MSE and BPTT in one call.

    rnn_train_step(W [B, H, H], U [B, H, I], V [B, O, H], x [B, S, T, I], targets [B, S, T, O], ...)
        -> (loss [B], dW, dU, dV, dx, dh0)                  torch.ops.symfast.rnn_train_step
    rnn_train_loss(...) -> loss [B], differentiable         torch.ops.symfast.rnn_train_loss

Model b: h_t = tanh(W_b h_{t-1} + U_b x_t), y_t = V_b h_t, on its own sequences x_b and
targets, loss_b = sum m (y - targets)^2 / max(sum m, 1). Models of different widths share one
call by zero-padding to a common H and passing `widths`: model b then uses its first
widths[b] units only (entries beyond are ignored, its hidden states there are exactly zero and
its gradients there exactly zero; the kernel does no work for them).

Where things live:
  ops           _op.py: torch.ops.symfast.rnn_train_step and rnn_train_loss (custom ops, fakes,
                autograd)
  reference     symfast/ops/rnn_train/reference.py (batched torch.bmm loop; the ground truth)
  CPU kernel    csrc/rnn_train.cpp + csrc/rnn_train_impl.h via cpu.py: one thread per model
                (OpenMP over models, GIL released), all T steps and the BPTT in one call,
                register-blocked products, AVX-512 / AVX2 / baseline chosen at run time
  Triton        triton.py: one program per (model, tile of sequences), weights on chip for
                all T steps, forward + BPTT in one launch (CUDA float32, H <= 128; tested
                on CPU under TRITON_INTERPRET=1 only, not yet measured on a GPU)
  tests         tests/ops/test_rnn_train.py
  benchmark     benchmarks/benchmarks/bench_rnn_train.py
Backends resolve in `symfast.ops._dispatch` ("auto": C++ on CPU, Triton on CUDA, else the reference).
Under torch.func transforms the reference runs instead of the kernel.
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from symfast.ops import _dispatch
from symfast.ops.rnn_train import reference
from symfast.ops.rnn_train._op import resolve_backend, rnn_train_loss_op, rnn_train_step_op, validate

__all__ = ["rnn_train_step", "rnn_train_loss", "RnnTrainStep"]


class RnnTrainStep(NamedTuple):
    """Result of `rnn_train_step`: loss [B]; dW [B, H, H]; dU [B, H, I]; dV [B, O, H];
    dx [B, S, T, I] or None; dh0 [B, S, H] or None."""

    loss: torch.Tensor
    dW: torch.Tensor
    dU: torch.Tensor
    dV: torch.Tensor
    dx: torch.Tensor | None
    dh0: torch.Tensor | None


def _prepare(W, U, V, x, targets, mask, h0, widths, backend):
    if isinstance(mask, torch.Tensor) and (mask.dtype == torch.bool or not mask.is_floating_point()):
        mask = mask.to(x.dtype if isinstance(x, torch.Tensor) else torch.float32)
    if widths is not None and not isinstance(widths, torch.Tensor):
        widths = torch.as_tensor(list(widths), dtype=torch.int64)
    if isinstance(widths, torch.Tensor) and widths.dtype != torch.int64 and not widths.is_floating_point():
        widths = widths.to(torch.int64)
    validate(W, U, V, x, targets, mask, h0, widths)
    if widths is not None:
        widths = widths.to(x.device)
    be = resolve_backend(backend, x, W)
    contig = [None if t is None else t.contiguous() for t in (W, U, V, x, targets, mask, h0, widths)]
    return contig, be, _dispatch.for_op(backend, be)


def rnn_train_step(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, targets: torch.Tensor,
                   mask: torch.Tensor | None = None, h0: torch.Tensor | None = None, widths=None,
                   need_dx: bool = False, need_dh0: bool = False, backend: str = "auto") -> RnnTrainStep:
    """Forward + per-model masked MSE + backward through time for B tanh RNNs in one call.

    No autograd graph: inputs may require grad (they are read, not tracked). For gradients
    through a parametrisation of W (e.g. Cayley), call `W.backward(step.dW)` afterwards, or
    use `rnn_train_loss` inside autograd.

    Args:
        W: [B, H, H] recurrent weights; U: [B, H, I] input weights; V: [B, O, H] readouts.
        x: [B, S, T, I] inputs (S sequences of T steps per model); targets: [B, S, T, O].
        mask: [B, S, T, O], or [B, S, T] broadcast over outputs, or None (all ones);
            float or bool, non-negative weights.
        h0: [B, S, H] initial states, or None (zeros).
        widths: [B] ints (list or int64 tensor), model b's width <= H, or None (all H).
        need_dx, need_dh0: also return the gradients of x and h0.
        backend: "auto" (C++ on CPU, Triton on CUDA), "cpu", "triton" (float32, H <= 128) or
            "reference".
            All tensors float32 or float64 (one dtype), on one device.

    Returns:
        RnnTrainStep(loss [B], dW, dU, dV, dx, dh0): gradients of loss.sum(), so model b's are
        those of its own loss, each summed per model in a fixed order (the same result for any
        thread count). Entries beyond a model's width are exactly zero. NaN or Inf in any input
        raises ValueError on the C++ kernel.
    """
    (W, U, V, x, targets, mask, h0, widths), be, op_be = _prepare(W, U, V, x, targets, mask, h0, widths, backend)
    args = [t.detach() if t is not None else None for t in (W, U, V, x, targets, mask, h0)]
    if be == "reference" or _dispatch.under_functorch(*[t for t in (W, U, V, x, targets, mask, h0) if t is not None]):
        out = reference.rnn_train_step(*args, widths, need_dx, need_dh0)
        return RnnTrainStep(*out)
    loss, dW, dU, dV, dx, dh0 = rnn_train_step_op(*args, widths, bool(need_dx), bool(need_dh0), op_be)
    return RnnTrainStep(loss, dW, dU, dV, dx if need_dx else None, dh0 if need_dh0 else None)


def rnn_train_loss(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, targets: torch.Tensor,
                   mask: torch.Tensor | None = None, h0: torch.Tensor | None = None, widths=None,
                   backend: str = "auto") -> torch.Tensor:
    """Per-model masked MSE loss [B] of B tanh RNNs, differentiable in W, U, V, x and h0.

    The forward runs the fused kernel without storing a graph; the backward runs the fused
    training step (the forward again + BPTT) and scales model b's gradients by the cotangent
    of loss_b, so `loss.sum().backward()` costs about 4/3 of one `rnn_train_step`. Arguments
    as `rnn_train_step`; targets and mask are not differentiable.

    Returns:
        loss: [B].
    """
    (W, U, V, x, targets, mask, h0, widths), be, op_be = _prepare(W, U, V, x, targets, mask, h0, widths, backend)
    for name, t in (("targets", targets), ("mask", mask)):
        if t is not None and t.requires_grad and torch.is_grad_enabled():
            raise ValueError(f"rnn_train_loss is not differentiable in {name}; pass {name}.detach()")
    if be == "reference" or _dispatch.under_functorch(*[t for t in (W, U, V, x, targets, mask, h0) if t is not None]):
        return reference.rnn_train_loss(W, U, V, x, targets, mask, h0, widths)
    return rnn_train_loss_op(W, U, V, x, targets, mask, h0, widths, op_be)
