"""Launcher for the C++ rollout kernel (`csrc/rnn_rollout.cpp`)."""
from __future__ import annotations

import torch

from symfast import _ext


def rnn_rollout(W, U, V, x, h0, return_hidden: bool):
    """W: [A, H, H], U: [H, I], V: [O, H], x: [B, T, I], h0: [B, H] (float32/float64 CPU, one dtype)
    -> (y [A, B, T, O], hs [A, B, T, H] or empty). The input projection U x_t is one torch GEMM."""
    C = _ext.require_cpp()
    fn = C.rnn_rollout_f32 if x.dtype == torch.float32 else C.rnn_rollout_f64
    ux = (x @ U.T).contiguous()
    y, hs = fn(W.contiguous().numpy(), ux.numpy(), V.contiguous().numpy(), h0.contiguous().numpy(),
               bool(return_hidden), _ext.num_threads())
    return torch.from_numpy(y), (torch.from_numpy(hs) if return_hidden else x.new_empty(0))
