"""Weight observables Phi that transform as Phi -> rho(g)^T Phi rho(g), and their scores.

- "gram": first-layer Gram W1^T W1 ([d, d]; invariant to hidden-neuron permutations, data-free);
- "prefixK": weight-prefix Gram M_K^T M_K with M_K = W_K ... W_1 (K = 1 is "gram");
- "gram_bias": the Gram of [W1 | b1], with rho extended by 1 for the constant feature.
Score s(g) = ||rho^T Phi rho - Phi||_F / ||Phi||_F (0 = symmetric).

Grams and scores go through the batched kernels of `symfast.ops.gram_scores` (exactly
symmetric Grams; scores without materialising [S, E, d, d]; all null draws in one call).
`symfast.ops.gram_scores.reference` is the PyTorch reference they are tested against.
"""
from __future__ import annotations

import re

import numpy as np
import torch

from symfast.ops.gram import gram
from symfast.ops.gram_scores import gram_scores
from symfast.groups import rotation

__all__ = ["observable", "extend_lift", "scores", "split_half_null", "pair_null", "sweep_lifts", "OBSERVABLES"]

OBSERVABLES = ("gram", "gram_bias", "prefixK (K = 1, 2, ...)")


def observable(weights: list, biases: list, kind: str = "gram") -> torch.Tensor:
    """Per-model observable [B, d', d'] (float64) from fan-in-first weights [B, fan_in, fan_out]."""
    w0 = weights[0].double()
    if kind == "gram":
        return gram(w0)
    if kind == "gram_bias":
        aug = torch.cat([w0, biases[0].double()[:, None, :]], dim=1)  # [B, d+1, H]
        return gram(aug)
    m = re.fullmatch(r"prefix(\d+)", kind)
    if m:
        k = int(m.group(1))
        if not 1 <= k <= len(weights):
            raise ValueError(f"{kind}: K must be in 1..{len(weights)} for this network")
        p = w0
        for w in weights[1:k]:
            p = p @ w.double()
        return gram(p)
    raise ValueError(f"unknown observable {kind!r}; choose from {', '.join(OBSERVABLES)}")


def extend_lift(rho: np.ndarray, kind: str) -> np.ndarray:
    """The lift acting on the observable's index space (bias-augmented: diag(rho, 1))."""
    if kind == "gram_bias":
        out = np.zeros((rho.shape[0] + 1, rho.shape[1] + 1))
        out[:-1, :-1] = rho
        out[-1, -1] = 1.0
        return out
    return rho


def _asym_norm(phi: torch.Tensor, rho: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """||rho_e^T phi_s rho_e - phi_s||_F for phi: [S, d, d], rho: [E, d, d] -> [S, E]."""
    return gram_scores(_sym(phi), rho, normalize=False, backend=backend)


def _sym(phi: torch.Tensor) -> torch.Tensor:
    """Symmetric part: differences of Grams are symmetric only up to rounding."""
    return (phi + phi.transpose(-1, -2)) / 2


def scores(phi: torch.Tensor, rho: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """Relative scores s(g) for phi: [S, d, d] and lifts rho: [E, d, d] -> [S, E] (`gram_scores`' backend)."""
    return gram_scores(phi, rho, backend=backend)


def split_half_null(phi: torch.Tensor, rho: torch.Tensor, num_null: int, generator: torch.Generator,
                    backend: str = "auto"):
    """Null scores of the ensemble-mean observable: [num_null, E].

    For a random split of the S models into halves A, B, (mean_A - mean_B) / 2 has the
    sampling noise of the S-model mean but no systematic part, so its score is what
    seed noise alone produces for that element.
    """
    S = phi.shape[0]
    h = S // 2
    norm = phi.mean(0).norm()
    diffs = []
    for _ in range(num_null):
        perm = torch.randperm(S, generator=generator)
        diffs.append((phi[perm[:h]].mean(0) - phi[perm[h:2 * h]].mean(0)) / 2)
    if not diffs:
        return torch.zeros(0, rho.shape[0], dtype=phi.dtype)
    return _asym_norm(torch.stack(diffs), rho, backend) / norm  # all draws in one batched call


def pair_null(phi: torch.Tensor, rho: torch.Tensor, num_null: int, generator: torch.Generator, backend: str = "auto"):
    """Null scores of the mean per-model score: [num_null, E].

    Random disjoint pairs (i, j): (phi_i - phi_j) / sqrt(2) has one model's noise and no
    systematic part; its relative score, averaged over pairs, is one null draw.
    """
    S = phi.shape[0]
    h = S // 2
    norms = phi.flatten(1).norm(dim=1)
    per_draw = max(1, h * phi.shape[1] * phi.shape[2] * phi.element_size())
    batch = max(1, (1 << 26) // per_draw)  # draws per batched call (~64 MB of differences)
    out, diffs, denom = [], [], []
    for i in range(num_null):
        perm = torch.randperm(S, generator=generator)
        a, b = perm[:h], perm[h:2 * h]
        diffs.append((phi[a] - phi[b]) / np.sqrt(2.0))
        denom.append(norms[a])
        if len(diffs) == batch or i == num_null - 1:
            asym = _asym_norm(torch.cat(diffs), rho, backend).reshape(len(diffs), h, -1)
            out.append((asym / torch.stack(denom)[:, :, None]).mean(1))
            diffs, denom = [], []
    return torch.cat(out) if out else torch.zeros(0, rho.shape[0], dtype=phi.dtype)


def sweep_lifts(pe, num: int = 360, **lstsq_kw) -> torch.Tensor:
    """Orthogonal lifts [num, d, d] float64 of the rotations by 2 pi k / num, inverse pairs transposed.

    Exact lifts where `pe.lift` finds one, else the orthogonal least-squares (Procrustes)
    lift for k <= num / 2; for k > num / 2 the lift of the inverse rotation is taken as
    the transpose of lift(R_(num - k)). This is an assumption, not an identity: a
    Procrustes fit of R^-1 on samples differs from the transposed fit of R by sampling
    noise (both are orthogonal, and the exact lifts satisfy it exactly). It makes
    s(R^-1) = s(R) exactly and lets `gram_scores` share both products of a pair,
    halving the dense work. `symfast.readout.readout` fits every element independently instead.
    """
    half = {}
    out = []
    for k in range(num):
        j = num - k if k > num / 2 else k
        if j not in half:
            g = rotation(2 * np.pi * j / num)
            r = pe.lift(g)
            half[j] = torch.as_tensor(r if r is not None else pe.lift_lstsq(g, orthogonal=True, **lstsq_kw)[0])
        out.append(half[j] if j == k else half[j].T.contiguous())
    return torch.stack(out).to(torch.float64)
