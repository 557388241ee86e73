"""PyTorch reference for symfast.rnn_rollout()."""
from __future__ import annotations

import torch

__all__ = ["rnn_rollout"]


def rnn_rollout(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, h0: torch.Tensor | None = None,
                return_hidden: bool = False):
    """h_t = tanh(W_a h_{t-1} + U x_t), y_t = V h_t for every variant a, one time step at a time.

    Args:
        W: [A, H, H]; U: [H, I]; V: [O, H]; x: [B, T, I]; h0: [B, H] or None (zeros).

    Returns:
        y: [A, B, T, O], and hs: [A, B, T, H] when return_hidden.
    """
    A, H = W.shape[0], W.shape[1]
    B, T = x.shape[0], x.shape[1]
    ux = x @ U.T  # [B, T, H]
    h = (torch.zeros(B, H, dtype=x.dtype, device=x.device) if h0 is None else h0).expand(A, B, H)
    hs = []
    for t in range(T):
        h = torch.tanh(torch.einsum("aij,abj->abi", W, h) + ux[:, t])
        hs.append(h)
    hs = torch.stack(hs, dim=2) if hs else h.new_zeros(A, B, 0, H)  # [A, B, T, H]
    y = hs @ V.T
    return (y, hs) if return_hidden else y
