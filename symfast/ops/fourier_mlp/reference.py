"""PyTorch reference for symfast.ops.fourier_mlp() (batched PE + MLP neural fields).

B independent models share one Fourier encoding; model b computes
    h_0 = phi(x_b),  h_l = act(h_{l-1} @ W_l[b] + b_l[b])  (hidden layers),
    y = h_L @ W_out[b] + b_out[b]                            (linear output, K >= 1 wide)
with weights stored fan-in first, so a layer is one `torch.baddbmm` for all B. Outputs are
[B, N] for K = 1 and [B, N, K] otherwise; N = 0 points give empty outputs and zero gradients.
"""
from __future__ import annotations

import torch

from symfast.activations import ACTIVATION_TABLE, FUSED

# The activations the fused kernels implement and act'(z) given z and a = act(z) (for the
# hand-written backward below), from the one activation table.
ACTIVATIONS = {name: ACTIVATION_TABLE[name].torch_fn for name in FUSED}
ACTIVATION_GRADS = {name: ACTIVATION_TABLE[name].grad for name in FUSED}


def fourier_mlp(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                weights: list[torch.Tensor], biases: list[torch.Tensor],
                activation: str = "relu") -> torch.Tensor:
    """Forward pass of B PE+MLP models.

    Args:
        x: [B, N, D] points per model, or [N, D] shared by all models (D = 2 or 3).
        frequencies: [m, D], phases: [m] of the Fourier PE (d = 2m features).
        weights: L+1 tensors; weights[0]: [B, d, H_1], weights[l]: [B, H_l, H_{l+1}],
            weights[-1]: [B, H_L, K].
        biases: L+1 tensors; biases[l]: [B, fan_out_l].
        activation: "relu", "tanh", "silu" or "sine" (hidden layers only).

    Returns:
        [B, N] outputs for K = 1, [B, N, K] for K > 1.
    """
    act = ACTIVATIONS[activation]
    B = weights[0].shape[0]
    u = x @ frequencies.to(x).T + phases.to(x)
    h = torch.stack((torch.sin(u), torch.cos(u)), dim=-1).flatten(-2)  # [(B,) N, d]
    if h.ndim == 2:
        h = h.expand(B, *h.shape)
    for l, (w, b) in enumerate(zip(weights, biases)):
        h = torch.baddbmm(b[:, None, :], h, w)
        if l < len(weights) - 1:
            h = act(h)
    return h[..., 0] if h.shape[-1] == 1 else h


def fourier_mlp_vjp(grad: torch.Tensor, x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                    weights: list[torch.Tensor], biases: list[torch.Tensor], activation: str, need_dx: bool):
    """Gradients of sum(grad * fourier_mlp(...)) by the chain rule written out, without autograd
    (so it also runs inside a custom op's kernel, where autograd does not record).

    Args:
        grad: cotangent of the outputs ([B, N], or [B, N, K] for K > 1); the rest as in `fourier_mlp`.
        need_dx: also return the gradient to x.

    Returns:
        (dx [B, N, D] per model (also for shared x [N, D]) or None, dW list like weights,
        db list like biases).
    """
    act, act_grad = ACTIVATIONS[activation], ACTIVATION_GRADS[activation]
    B, L = weights[0].shape[0], len(weights)
    u = x @ frequencies.to(x).T + phases.to(x)
    sin_u, cos_u = torch.sin(u), torch.cos(u)
    h = torch.stack((sin_u, cos_u), dim=-1).flatten(-2)
    hs, zs = [h.expand(B, *h.shape) if h.ndim == 2 else h], []  # inputs of each layer, pre-activations
    for w, b in zip(weights[:-1], biases[:-1]):
        zs.append(torch.baddbmm(b[:, None, :], hs[-1], w))
        hs.append(act(zs[-1]))
    g = grad[..., None] if grad.ndim == 2 else grad  # dLoss/d(layer output) [B, N, fan_out]
    dw, db = [None] * L, [None] * L
    for l in reversed(range(L)):
        dw[l] = hs[l].transpose(1, 2) @ g
        db[l] = g.sum(1)
        if l > 0 or need_dx:
            g = g @ weights[l].transpose(1, 2)
        if l > 0:
            g = g * act_grad(zs[l - 1], hs[l])
    dx = None
    if need_dx:  # phi = (sin u_1, cos u_1, sin u_2, ...), u = x F^T + p
        g = g.unflatten(-1, (-1, 2))
        dx = (g[..., 0] * cos_u - g[..., 1] * sin_u) @ frequencies.to(x)
    return dx, dw, db


def mse_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-model mean squared error [B] from pred, target: [B, N] (or [B, N, K]: the mean over points
    and outputs; NaN for N = 0, as torch's mean of nothing); the training loss sums these."""
    return (pred - target).pow(2).flatten(1).mean(dim=1)


def fourier_mlp_train_step(x: torch.Tensor, targets: torch.Tensor, frequencies: torch.Tensor,
                           phases: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor],
                           activation: str = "relu"):
    """Forward + per-model MSE + backward by autograd (ground truth for the fused step).

    Args:
        x: [B, N, D] or [N, D]; targets: shaped like the outputs ([B, N] or [B, N, K]); the rest as in
            `fourier_mlp`.

    Returns:
        (loss [B], dW list like weights, db list like biases): loss[b] = `mse_loss` of model b and
        the gradients of loss.sum() (so model b's gradient is that of its own MSE).
    """
    with torch.enable_grad():
        ws = [w.detach().requires_grad_(True) for w in weights]
        bs = [b.detach().requires_grad_(True) for b in biases]
        loss = mse_loss(fourier_mlp(x.detach(), frequencies, phases, ws, bs, activation), targets)
        grads = torch.autograd.grad(loss.sum(), ws + bs)
    return loss.detach(), list(grads[:len(ws)]), list(grads[len(ws):])
