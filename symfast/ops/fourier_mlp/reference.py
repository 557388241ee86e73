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


# ---- second order: f and its input gradient g = grad_x f (eikonal and normal losses) ----

# act''(z) given z and a = act(z): the curvature term of the jet's hand-written backward.
ACTIVATION_CURVATURES = {
    "relu": lambda z, a: torch.zeros_like(z),
    "tanh": lambda z, a: -2 * a * (1 - a * a),
    "silu": lambda z, a: torch.sigmoid(z) * (1 - torch.sigmoid(z)) * (2 + z * (1 - 2 * torch.sigmoid(z))),
    "sine": lambda z, a: -a,
}


def _jet_layers(x, frequencies, phases, weights, biases, activation):
    """Forward-mode pass: per layer (input h, input tangents t, pre-activation z, its tangents zd),
    the encoding's (sin u, cos u), and the outputs (f [B, N], g [B, N, D])."""
    act, act_grad = ACTIVATIONS[activation], ACTIVATION_GRADS[activation]
    B, D = weights[0].shape[0], x.shape[-1]
    freq = frequencies.to(x)
    u = x @ freq.T + phases.to(x)
    s, c = torch.sin(u), torch.cos(u)
    h = torch.stack((s, c), dim=-1).flatten(-2)                                             # [(B,) N, d]
    t = torch.stack((c[..., None, :] * freq.T, -s[..., None, :] * freq.T), -1).flatten(-2)  # [(B,) N, D, d]
    if h.ndim == 2:
        h, t = h.expand(B, *h.shape), t.expand(B, *t.shape)
    layers = []
    for l, (w, b) in enumerate(zip(weights, biases)):
        z = torch.baddbmm(b[:, None, :], h, w)
        zd = (t.flatten(1, 2) @ w).unflatten(1, (-1, D))                                    # [B, N, D, fan_out]
        layers.append((h, t, z, zd))
        if l < len(weights) - 1:
            h = act(z)
            t = act_grad(z, h)[:, :, None, :] * zd
    return layers, (s, c), (z[..., 0], zd[..., 0])


def fourier_mlp_jet(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                    weights: list[torch.Tensor], biases: list[torch.Tensor], activation: str = "relu"):
    """f = fourier_mlp(...) and its input gradient g = grad_x f by forward-mode tangents, written out
    (plain PyTorch, differentiable to any order by autograd; one output, K = 1).

    The encoding's tangent along x_d is analytic: d sin(u)/dx_d = cos(u) F[:, d], d cos(u)/dx_d =
    -sin(u) F[:, d]; each hidden layer maps a tangent td to act'(z) * (td @ W).

    Returns:
        (f [B, N], g [B, N, D]).
    """
    return _jet_layers(x, frequencies, phases, weights, biases, activation)[2]


def fourier_mlp_jet_vjp(cf: torch.Tensor, cg: torch.Tensor, x: torch.Tensor, frequencies: torch.Tensor,
                        phases: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor],
                        activation: str, need_dx: bool):
    """Gradients of sum(cf * f) + sum(cg * g) for (f, g) = `fourier_mlp_jet(...)`, by the chain rule
    written out without autograd (it runs inside a custom op's kernel, where autograd does not record).

    Per hidden layer, from the cotangents ch of act(z) and ct_d of its tangents:
        cz = act'(z) ch + act''(z) sum_d ct_d zd_d,   czd_d = act'(z) ct_d.

    Returns:
        (dx [B, N, D] per model or None, dW list like weights, db list like biases).
    """
    act_grad, act_curv = ACTIVATION_GRADS[activation], ACTIVATION_CURVATURES[activation]
    layers, (s, c), _ = _jet_layers(x, frequencies, phases, weights, biases, activation)
    L = len(weights)
    cz, czd = cf[..., None], cg[..., None]                       # [B, N, 1], [B, N, D, 1]
    dw, db = [None] * L, [None] * L
    for l in reversed(range(L)):
        h, t, z, zd = layers[l]
        if l < L - 1:                                            # through the activation
            a = ACTIVATIONS[activation](z)
            s1 = act_grad(z, a)
            cz = s1 * ch + act_curv(z, a) * (ct * zd).sum(2)
            czd = s1[:, :, None, :] * ct
        dw[l] = h.transpose(1, 2) @ cz + t.flatten(1, 2).transpose(1, 2) @ czd.flatten(1, 2)
        db[l] = cz.sum(1)
        if l > 0 or need_dx:
            wt = weights[l].transpose(1, 2)
            ch, ct = cz @ wt, (czd.flatten(1, 2) @ wt).unflatten(1, czd.shape[1:3])
    if not need_dx:
        return None, dw, db
    freq = frequencies.to(x)
    ch, ct = ch.unflatten(-1, (-1, 2)), ct.unflatten(-1, (-1, 2))  # [..., m, (sin, cos)]
    if s.ndim == 2:
        s, c = s.expand(cf.shape[0], *s.shape), c.expand(cf.shape[0], *c.shape)
    du = ch[..., 0] * c - ch[..., 1] * s - (freq.T * (ct[..., 0] * s[:, :, None] + ct[..., 1] * c[:, :, None])).sum(2)
    return du @ freq, dw, db


def eikonal_terms(f: torch.Tensor, g: torch.Tensor, targets: torch.Tensor, normals: torch.Tensor | None = None):
    """The per-model loss terms [B, 3] of second-order SDF training: the MSE of f against the target
    distances, the eikonal term mean (|g| - 1)^2 and the normal term mean |g - n|^2 (0 without normals)."""
    mse = (f - targets).pow(2).mean(dim=1)
    eik = (torch.linalg.vector_norm(g, dim=-1) - 1).pow(2).mean(dim=1)
    nrm = (g - normals).pow(2).sum(-1).mean(dim=1) if normals is not None else torch.zeros_like(mse)
    return torch.stack((mse, eik, nrm), dim=1)


def eikonal_cotangents(f, g, targets, normals, eikonal: float, normal: float):
    """(cf, cg): the gradients of sum_b (mse + eikonal * eik + normal * nrm) with respect to f and g,
    written out (d|g|/dg = g / |g|, taken as 0 at g = 0 as torch's norm backward does)."""
    n = f.shape[1]
    norm = torch.linalg.vector_norm(g, dim=-1, keepdim=True)
    cg = eikonal * 2 / n * torch.where(norm > 0, (norm - 1) / norm, torch.zeros_like(norm)) * g
    if normals is not None:
        cg = cg + normal * 2 / n * (g - normals)
    return 2 / n * (f - targets), cg


def eikonal_train_step(x: torch.Tensor, targets: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                       weights: list[torch.Tensor], biases: list[torch.Tensor], activation: str = "relu",
                       eikonal: float = 0.1, normals: torch.Tensor | None = None, normal: float = 0.0):
    """Loss terms [B, 3] (`eikonal_terms`) and the gradients of sum_b (mse + eikonal * eik + normal * nrm)
    by autograd double backward through the plain first-order `fourier_mlp` (ground truth for the
    fused step; independent of the jet formulas above).

    Returns:
        (terms [B, 3], dW list like weights, db list like biases).
    """
    B = weights[0].shape[0]
    with torch.enable_grad():
        ws = [w.detach().requires_grad_(True) for w in weights]
        bs = [b.detach().requires_grad_(True) for b in biases]
        xs = x.detach().expand(B, *x.shape[-2:]).clone().requires_grad_(True)  # per-model gradients
        f = fourier_mlp(xs, frequencies, phases, ws, bs, activation)
        g, = torch.autograd.grad(f.sum(), xs, create_graph=True)
        terms = eikonal_terms(f, g, targets, normals)
        total = terms[:, 0] + eikonal * terms[:, 1] + normal * terms[:, 2]
        grads = [g.contiguous() for g in torch.autograd.grad(total.sum(), ws + bs)]  # (double backward transposes)
    return terms.detach(), grads[:len(ws)], grads[len(ws):]
