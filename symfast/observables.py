"""Weight observables Phi that transform as Phi -> rho(g)^T Phi rho(g), and their scores.

- "gram": first-layer Gram W1^T W1 ([d, d]; invariant to hidden-neuron permutations, data-free);
- "prefixK": weight-prefix Gram M_K^T M_K with M_K = W_K ... W_1 (K = 1 is "gram");
- "gram_bias": the Gram of [W1 | b1], with rho extended by 1 for the constant feature.
Score s(g) = ||rho^T Phi rho - Phi||_F / ||Phi||_F (0 = symmetric).
"""
from __future__ import annotations

import re

import numpy as np
import torch

__all__ = ["observable", "extend_lift", "scores", "split_half_null", "pair_null", "OBSERVABLES"]

OBSERVABLES = ("gram", "gram_bias", "prefixK (K = 1, 2, ...)")


def observable(weights: list, biases: list, kind: str = "gram") -> torch.Tensor:
    """Per-model observable [B, d', d'] (float64) from fan-in-first weights [B, fan_in, fan_out]."""
    w0 = weights[0].double()
    if kind == "gram":
        return w0 @ w0.transpose(1, 2)
    if kind == "gram_bias":
        aug = torch.cat([w0, biases[0].double()[:, None, :]], dim=1)  # [B, d+1, H]
        return aug @ aug.transpose(1, 2)
    m = re.fullmatch(r"prefix(\d+)", kind)
    if m:
        k = int(m.group(1))
        if not 1 <= k <= len(weights):
            raise ValueError(f"{kind}: K must be in 1..{len(weights)} for this network")
        p = w0
        for w in weights[1:k]:
            p = p @ w.double()
        return p @ p.transpose(1, 2)
    raise ValueError(f"unknown observable {kind!r}; choose from {', '.join(OBSERVABLES)}")


def extend_lift(rho: np.ndarray, kind: str) -> np.ndarray:
    """The lift acting on the observable's index space (bias-augmented: diag(rho, 1))."""
    if kind == "gram_bias":
        out = np.zeros((rho.shape[0] + 1, rho.shape[1] + 1))
        out[:-1, :-1] = rho
        out[-1, -1] = 1.0
        return out
    return rho


def _asym_norm(phi: torch.Tensor, rho: torch.Tensor, chunk: int = 64) -> torch.Tensor:
    """||rho_e^T phi_s rho_e - phi_s||_F for phi: [S, d, d], rho: [E, d, d] -> [S, E]."""
    out = []
    for r in rho.split(chunk):
        t = torch.einsum("eij,sjk,ekl->seil", r.transpose(1, 2), phi, r) - phi[:, None]
        out.append(t.flatten(2).norm(dim=2))
    return torch.cat(out, dim=1)


def scores(phi: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """Relative scores s(g) for phi: [S, d, d] and lifts rho: [E, d, d] -> [S, E]."""
    return _asym_norm(phi, rho) / phi.flatten(1).norm(dim=1)[:, None]


def split_half_null(phi: torch.Tensor, rho: torch.Tensor, num_null: int, generator: torch.Generator):
    """Null scores of the ensemble-mean observable: [num_null, E].

    For a random split of the S models into halves A, B, (mean_A - mean_B) / 2 has the
    sampling noise of the S-model mean but no systematic part, so its score is what
    seed noise alone produces for that element.
    """
    S = phi.shape[0]
    h = S // 2
    norm = phi.mean(0).norm()
    out = []
    for _ in range(num_null):
        perm = torch.randperm(S, generator=generator)
        d = (phi[perm[:h]].mean(0) - phi[perm[h:2 * h]].mean(0)) / 2
        out.append(_asym_norm(d[None], rho)[0] / norm)
    return torch.stack(out)


def pair_null(phi: torch.Tensor, rho: torch.Tensor, num_null: int, generator: torch.Generator):
    """Null scores of the mean per-model score: [num_null, E].

    Random disjoint pairs (i, j): (phi_i - phi_j) / sqrt(2) has one model's noise and no
    systematic part; its relative score, averaged over pairs, is one null draw.
    """
    S = phi.shape[0]
    h = S // 2
    norms = phi.flatten(1).norm(dim=1)
    out = []
    for _ in range(num_null):
        perm = torch.randperm(S, generator=generator)
        a, b = perm[:h], perm[h:2 * h]
        d = (phi[a] - phi[b]) / np.sqrt(2.0)
        out.append((_asym_norm(d, rho) / norms[a][:, None]).mean(0))
    return torch.stack(out)
