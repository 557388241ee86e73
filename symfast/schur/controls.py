"""Equal-norm random controls: is an ablation's damage about its direction or only its size?

An ablation removes `dT = T - T~` (Frobenius norm m) from the Schur form. Three random
perturbations of the same norm m separate direction from size:

    anywhere       W + m G / ||G||_F, G iid Gaussian [n, n] (isotropic; `schur_ablation`'s
                   original control);
    same pattern   W + Q (m G_S / ||G_S||_F) Q^T, G_S Gaussian on exactly the entries of T the
                   ablated blocks own (same sector pair(s), same Schur basis), zero elsewhere;
    outside        the same on every other entry of T (its complement: diagonal blocks, the other
                   coupling blocks and the sub-block-diagonal part).

If dFVU(block) ~ dFVU(same pattern) >> dFVU(outside) the Schur pattern matters and the removed
entries are not special; if dFVU(block) differs from dFVU(same pattern), the particular entries
(the trained coupling) matter ("Task-Restricted Symmetries in Recurrent Weight Space", arXiv
2606.18457, compares to no such control).
"""
from __future__ import annotations

import torch

from symfast.schur.blocks import SchurBlocks, subset_mask

__all__ = ["pattern_perturbations", "CONTROLS"]

CONTROLS = ("anywhere", "pattern", "outside")


def pattern_perturbations(sb: SchurBlocks, subset, mass: float, n_random: int,
                          generator: torch.Generator | None = None) -> dict:
    """Random perturbed copies of sb.W at Frobenius distance `mass`, for each control.

    Args:
        sb: the split (its Q basis and block masks define the pattern).
        subset: tuple of block names (the ablation being controlled); must be non-empty.
        mass: ||W - W~||_F of the ablation (>= 0); 0 gives copies of W.
        n_random: draws per control (>= 0).
        generator: torch RNG for reproducibility.

    Returns:
        {"anywhere" | "pattern" | "outside": [n_random, n, n] float64}; each ||W' - W||_F = mass
        (when the pattern or its complement has no entries, that control is W itself).
    """
    if not subset:
        raise ValueError("subset must name at least one block")
    if not mass >= 0 or n_random < 0:
        raise ValueError(f"mass and n_random must be >= 0, got {mass}, {n_random}")
    M = subset_mask(sb, subset)
    n = sb.W.shape[0]
    out = {c: [] for c in CONTROLS}
    for _ in range(n_random):
        for c, sel in (("anywhere", None), ("pattern", M), ("outside", ~M)):
            G = torch.randn(n, n, generator=generator, dtype=torch.float64)
            if sel is not None:
                G = torch.where(sel, G, torch.zeros_like(G))
                G = sb.Q @ G @ sb.Q.T
            nrm = float(G.norm())
            out[c].append(sb.W + (mass / nrm) * G if nrm > 0 else sb.W.clone())
    return {c: (torch.stack(v) if v else sb.W.new_zeros(0, n, n)) for c, v in out.items()}
