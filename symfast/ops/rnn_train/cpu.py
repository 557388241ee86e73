"""Launcher for the C++ fused RNN training kernel (`csrc/rnn_train.cpp`).

Inputs arrive checked by `symfast.ops.rnn_train` (the op's kernels); here they become numpy
views of contiguous CPU tensors, and outputs are torch tensors the kernel writes in place.
The C++ side checks every shape, dtype and contiguity again before it touches memory.
"""
from __future__ import annotations

import torch

from symfast import _ext


def _np(t: torch.Tensor | None):
    return None if t is None else t.detach().contiguous().numpy()


def rnn_train(W, U, V, x, targets, mask, h0, widths, grads: bool, need_dx: bool = False, need_dh0: bool = False,
              isa: str = "auto"):
    """grads False: loss [B]; True: (loss, dW, dU, dV, dx or None, dh0 or None), as the Triton
    launcher. See reference.rnn_train_step."""
    C = _ext.require_cpp()
    fn = C.rnn_train_f32 if x.dtype == torch.float32 else C.rnn_train_f64
    B, H, S = W.shape[0], W.shape[1], x.shape[1]
    if mask is not None and mask.ndim == 3:
        mask = mask[..., None]
    loss = torch.empty(B, dtype=x.dtype)
    if not grads:
        fn(_np(W), _np(U), _np(V), _np(x), _np(targets), _np(mask), _np(h0), _np(widths), C.RnnTrainMode.loss,
           loss.numpy(),
           None, None, None, None, None, _ext.num_threads(), isa)
        return loss
    cf = torch.contiguous_format
    dW, dU, dV = (torch.empty_like(t, memory_format=cf) for t in (W, U, V))
    dx = torch.empty_like(x, memory_format=cf) if need_dx else None
    dh0 = torch.empty(B, S, H, dtype=x.dtype) if need_dh0 else None
    fn(_np(W), _np(U), _np(V), _np(x), _np(targets), _np(mask), _np(h0), _np(widths), C.RnnTrainMode.gradients,
       loss.numpy(),
       dW.numpy(), dU.numpy(), dV.numpy(), _np(dx), _np(dh0), _ext.num_threads(), isa)
    return loss, dW, dU, dV, dx, dh0
