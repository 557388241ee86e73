"""Identifiable sub-model: remove dead and duplicated neurons, keeping the function.

The layerwise theorem ("Identifiable Equivariant Networks are Layerwise Equivariant" (Shahverdi, Marchetti, Bökman, Kohn)) needs (weakly) identifiable parameters. Three
kinds of redundancy are removed here, each with an exact function-preserving
rewrite of the next layer:
- zero outgoing weights: the neuron does not influence anything -> dropped;
- constant neurons (zero incoming weights, or ReLU never active on the given
  data): the constant act(b_i) is folded into the next layer's bias;
- duplicated neurons: augmented rows [w_j, b_j] = c [w_i, b_i] with c in the activation's
  scaling group (see `activations`: c > 0 for ReLU, c = +-1 for tanh and sigmoid, any c for
  monomials), so h_j = phi(c) h_i + offset(c) -> neuron j merged into i
  (W_next[:, i] += phi(c) W_next[:, j], b_next += offset(c) W_next[:, j]; sigmoid(-z) = 1 - sigmoid(z)).
A fourth non-identifiability, units in their near-linear range, cannot be
removed this way; `near_linear_fraction` flags it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symfast._progress import Progress, reporter
from symfast.activations import activation as activation_entry
from symfast.layerwise.network import MLP, as_mlp

__all__ = ["identifiable_submodel", "Reduction", "near_linear_fraction"]


@dataclass
class Reduction:
    """Result of `identifiable_submodel`.

    Attributes:
        model: the reduced MLP; kept: per hidden layer, the original indices of the kept neurons.
        removed: per hidden layer, list of (original index, reason) with reason one of
            "zero-out", "constant", "dead-on-data", "duplicate-of-<i>" (<i> original index, with c).
        function_error: max |f(x) - f_reduced(x)| / max |f(x)| on the check inputs.
    """

    model: MLP
    kept: list
    removed: list
    function_error: float

    def summary(self) -> str:
        rows = []
        for l, (k, r) in enumerate(zip(self.kept, self.removed)):
            kinds = {}
            for _, why in r:
                key = why.split("-of-")[0]
                kinds[key] = kinds.get(key, 0) + 1
            rows.append(f"layer {l + 1}: kept {len(k)}, removed {len(r)} {kinds if kinds else ''}".rstrip())
        rows.append(f"function error {self.function_error:.2e}")
        return "\n".join(rows)


def _as_np(x):
    return None if x is None else np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x, np.float64)


def identifiable_submodel(layers, data=None, activation: str | None = None, tol: float = 1e-8,
                          check_inputs: int = 256, seed: int = 0, progress: Progress = False) -> Reduction:
    """Reduce an MLP to its identifiable sub-model with the same function.

    Args:
        layers: nn.Sequential / list of (W, b) / MLP.
        data: optional [N, d0] inputs; enables "dead-on-data" (ReLU never active). The function is
            then preserved on this data (exactly on all inputs for the other rules).
        tol: relative tolerance for zero rows/columns and parallel rows.
        check_inputs: number of Gaussian inputs for the function check when no data is given; seed:
            their seed.
        progress: False (default), True (a tqdm bar over the hidden layers) or a callable given a line
            about every tenth of them (`symfast._progress`).

    Returns:
        Reduction with the reduced model, kept / removed neurons and the measured function error.
    """
    net = as_mlp(layers, activation)
    x = _as_np(data)
    if x is not None and (x.ndim != 2 or x.shape[1] != net.sizes[0]):
        raise ValueError(f"data must be [N, {net.sizes[0]}], got shape {list(x.shape)}")
    if x is not None and not np.isfinite(x).all():
        raise ValueError("data has NaN or inf entries")
    ent = activation_entry(net.activation)
    mode, act = ent.mode, ent.fn
    Ws = [W.copy() for W, _ in net.layers]
    bs = [b.copy() for _, b in net.layers]
    kept_all, removed_all = [], []
    h = x
    bar = reporter(progress, "symfast.layerwise").bar(net.num_layers - 1, "identifiable sub-model", unit="layer")
    for l in range(net.num_layers - 1):
        W, b, Wn = Ws[l], bs[l], Ws[l + 1]
        H = W.shape[0]
        alive = np.ones(H, bool)
        removed = []
        row = np.concatenate([W, b[:, None]], 1)
        rn = np.linalg.norm(row, axis=1)
        scale_in = max(np.linalg.norm(W, axis=1).max(), 1e-300)
        scale_out = max(np.linalg.norm(Wn, axis=0).max(), 1e-300)
        for i in range(H):
            if np.linalg.norm(Wn[:, i]) <= tol * scale_out:
                alive[i] = False
                removed.append((i, "zero-out"))
            elif np.linalg.norm(W[i]) <= tol * scale_in:
                bs[l + 1] = bs[l + 1] + Wn[:, i] * act(b[i])
                alive[i] = False
                removed.append((i, "constant"))
        if h is not None and net.activation == "relu":
            z = h @ W.T + b
            dead = alive & (z.max(0) <= 0)
            for i in np.flatnonzero(dead):
                removed.append((int(i), "dead-on-data"))
            alive &= ~dead
        # duplicates: parallel augmented rows (vectorised Gram, then a pass over the pairs found)
        u = row / np.where(rn > 0, rn, 1.0)[:, None]
        cos = u @ u.T
        np.fill_diagonal(cos, 0.0)
        ii, jj = np.nonzero(np.triu(np.abs(cos) >= 1 - tol))
        for i, j in zip(ii, jj):
            if not (alive[i] and alive[j]):
                continue
            c = float(row[j] @ row[i] / (rn[i] ** 2))  # row_j = c row_i
            if mode == "scale":
                ok = c > 0
            elif mode == "real_scale":
                ok = True
            elif mode == "sign":
                ok = abs(abs(c) - 1) <= 1e3 * tol
                c = float(np.sign(c))
            else:
                ok = abs(c - 1) <= 1e3 * tol
            if ok:  # h_j = act(c z_i) = phi(c) h_i + offset(c)
                phi, off = float(ent.phi(np.array([c]))[0]), float(ent.offset(np.array([c]))[0])
                bs[l + 1] = bs[l + 1] + off * Wn[:, j]
                Wn[:, i] += phi * Wn[:, j]
                alive[j] = False
                removed.append((int(j), f"duplicate-of-{int(i)} (c={c:.3g})"))
        idx = np.flatnonzero(alive)
        Ws[l], bs[l] = W[idx], b[idx]
        Ws[l + 1] = Wn[:, idx]
        kept_all.append(idx)
        removed_all.append(sorted(removed))
        if h is not None:
            h = act(h @ Ws[l].T + bs[l])
        bar.update()
    bar.close()
    red = net.with_layers(list(zip(Ws, bs)))
    xc = x if x is not None else np.random.default_rng(seed).normal(size=(check_inputs, net.sizes[0]))
    y, yr = net(xc), red(xc)
    err = float(np.abs(y - yr).max() / max(np.abs(y).max(), 1e-300))
    return Reduction(red, kept_all, removed_all, err)


def near_linear_fraction(layers, data, activation: str | None = None, z_linear: float = 0.5) -> np.ndarray:
    """Per hidden layer, how linear the units are on the data: [L-1] fractions in [0, 1].

    tanh / sine / sigmoid-like: the fraction of pre-activations with |z| < z_linear (tanh'(0.5) = 0.79).
    ReLU: the fraction of units whose pre-activation never changes sign on the data (always on = a
    linear unit; always off = dead). Near 1 means the hidden basis is defined only up to a linear
    map on this data, a non-identifiability that dead/duplicate checks do not see.
    """
    net = as_mlp(layers, activation)
    zs = net.hidden(_as_np(data), pre=True)
    if net.activation in ("relu", "leaky_relu"):
        return np.array([float(((z > 0).all(0) | (z <= 0).all(0)).mean()) for z in zs])
    return np.array([float((np.abs(z) < z_linear).mean()) for z in zs])
