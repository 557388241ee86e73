"""PyTorch reference for symfast.rnn_train_loss() and symfast.rnn_train_step().

B bias-free tanh RNNs, each with its own weights and its own data:
    h_t = tanh(W_b h_{t-1} + U_b x_t),  y_t = V_b h_t
    loss_b = sum m (y - targets)^2 / max(sum m, 1)      (masked MSE per model)
`rnn_train_loss` is a plain batched loop over time steps (torch.bmm), differentiable by
autograd; `rnn_train_step` is the same forward with backpropagation through time written
out (no autograd graph, so it also runs inside a custom op's kernel). Padded models
(`widths`) are the unpadded ones with every entry beyond their width multiplied by zero.
"""
from __future__ import annotations

import torch

__all__ = ["rnn_train_loss", "rnn_train_step", "unit_mask"]


def unit_mask(widths: torch.Tensor | None, B: int, H: int, dtype, device) -> torch.Tensor | None:
    """[B, H] with 1 on model b's first widths[b] units, 0 beyond (None when widths is None)."""
    if widths is None:
        return None
    return (torch.arange(H, device=device)[None, :] < widths.to(device)[:, None]).to(dtype)


def _prepare(W, U, V, x, mask, h0, widths):
    B, H = W.shape[0], W.shape[1]
    S = x.shape[1]
    um = unit_mask(widths, B, H, x.dtype, x.device)
    if h0 is None:
        h0 = x.new_zeros(B, S, H)
    if um is not None:
        W = W * um[:, :, None] * um[:, None, :]
        U = U * um[:, :, None]
        V = V * um[:, None, :]
        h0 = h0 * um[:, None, :]
    if mask is not None and mask.ndim == 3:
        mask = mask[..., None]
    return W, U, V, h0, mask, um


def _forward(W, U, V, x, h0):
    """Hidden states [B, S, T, H] and outputs [B, S, T, O]."""
    ux = torch.einsum("bhi,bsti->bsth", U, x)
    h, hs = h0, []
    WT = W.transpose(1, 2)
    for t in range(x.shape[2]):
        h = torch.tanh(torch.bmm(h, WT) + ux[:, :, t])
        hs.append(h)
    hs = torch.stack(hs, dim=2)
    return hs, torch.einsum("boh,bsth->bsto", V, hs)


def _denominator(mask, e):
    if mask is None:
        return e.new_full((e.shape[0],), float(e[0].numel()))
    return mask.expand_as(e).sum(dim=(1, 2, 3)).clamp_min(1)


def rnn_train_loss(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, targets: torch.Tensor,
                   mask: torch.Tensor | None = None, h0: torch.Tensor | None = None,
                   widths: torch.Tensor | None = None) -> torch.Tensor:
    """Per-model masked MSE of B tanh RNNs (differentiable by autograd).

    Args:
        W: [B, H, H]; U: [B, H, I]; V: [B, O, H]; x: [B, S, T, I]; targets: [B, S, T, O];
        mask: [B, S, T, O] or [B, S, T] (broadcast over outputs) or None (ones);
        h0: [B, S, H] or None (zeros); widths: [B] integers or None (all H).

    Returns:
        loss: [B].
    """
    W, U, V, h0, mask, _ = _prepare(W, U, V, x, mask, h0, widths)
    _, y = _forward(W, U, V, x, h0)
    e = y - targets
    se = e * e if mask is None else mask * e * e
    return se.sum(dim=(1, 2, 3)) / _denominator(mask, e)


def rnn_train_step(W: torch.Tensor, U: torch.Tensor, V: torch.Tensor, x: torch.Tensor, targets: torch.Tensor,
                   mask: torch.Tensor | None = None, h0: torch.Tensor | None = None,
                   widths: torch.Tensor | None = None, need_dx: bool = False, need_dh0: bool = False):
    """Loss and gradients of loss.sum() (model b's gradient is that of its own loss), by explicit BPTT.

    Args: as `rnn_train_loss`; need_dx / need_dh0: also return dx [B, S, T, I] / dh0 [B, S, H].

    Returns:
        (loss [B], dW [B, H, H], dU [B, H, I], dV [B, O, H], dx or None, dh0 or None).
    """
    W, U, V, h0m, mask, um = _prepare(W, U, V, x, mask, h0, widths)
    hs, y = _forward(W, U, V, x, h0m)
    e = y - targets
    se = e * e if mask is None else mask * e * e
    den = _denominator(mask, e)
    loss = se.sum(dim=(1, 2, 3)) / den
    dy = 2 * e / den[:, None, None, None]
    if mask is not None:
        dy = dy * mask
    g_in = torch.einsum("bsto,boh->bsth", dy, V)  # dY_t V for all t
    dz = torch.empty_like(hs)
    dzn = None
    for t in range(x.shape[2] - 1, -1, -1):
        g = g_in[:, :, t] if dzn is None else g_in[:, :, t] + torch.bmm(dzn, W)
        dzn = g * (1 - hs[:, :, t] ** 2)
        dz[:, :, t] = dzn
    hprev = torch.cat([h0m[:, :, None], hs[:, :, :-1]], dim=2)
    dW = torch.einsum("bsth,bstk->bhk", dz, hprev)
    dU = torch.einsum("bsth,bsti->bhi", dz, x)
    dV = torch.einsum("bsto,bsth->boh", dy, hs)
    dx = torch.einsum("bsth,bhi->bsti", dz, U) if need_dx else None
    dh0 = torch.bmm(dz[:, :, 0], W) if need_dh0 else None
    if um is not None:  # chain rule through the zero padding: exactly zero beyond each width
        dW = dW * um[:, :, None] * um[:, None, :]
        dU = dU * um[:, :, None]
        dV = dV * um[:, None, :]
        if dh0 is not None:
            dh0 = dh0 * um[:, None, :]
    return loss, dW, dU, dV, dx, dh0
