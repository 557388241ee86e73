"""Within-sector orderings of the Schur form, and the spread of an ablation over them.

The ordered real Schur form fixes the R sector (|lambda| >= alpha rho) in the first n_R rows,
and that is all it fixes: any order of the 1x1 / 2x2 blocks *inside* R and inside C is another
valid real Schur form with the same sectors ("Task-Restricted Symmetries in Recurrent Weight
Space", arXiv 2606.18457, sorts by modulus; ties and near-ties leave that order arbitrary).
Reordering inside the sectors is an orthogonal change of basis Q_R -> Q_R Z_R, Q_C -> Q_C Z_C, so

    -T_C->R   zeroes P_R W P_C (P_R, P_C the orthogonal projectors onto span Q_R and its
              complement): the same ablated W in every ordering;
    -T_RR     replaces Z_R^T A_R Z_R by its block diagonal, which depends on Z_R
              (A_R = Q_R^T W Q_R); likewise -T_CC with A_C = Q_C^T W Q_C.

`within_sector_orderings` builds the modulus order, the reversed order (inside each sector) and
K seeded random orders, each by LAPACK block swaps (`symfast.ops.ordered_schur.ordschur` with one
label per block); `order_spread` summarises an effect over them.
"""
from __future__ import annotations

import numpy as np
import torch

from symfast.ops.ordered_schur import ordschur
from symfast.schur.blocks import SchurBlocks, split_blocks

__all__ = ["sector_blocks", "reorder", "within_sector_orderings", "order_spread", "ORDER_FLOOR", "MODULUS_TIE_TOL",
           "modulus_ties"]

# Spreads below this (in dFVU, units of target variance) are rollout noise, never "order-dependent".
ORDER_FLOOR = 1e-4
# The paper's order (blocks by non-increasing |lambda|) is ambiguous between two blocks of one sector
# whose moduli differ by less than this times rho(W): there, and only there, its rule leaves the
# order open. Fixed before any run; LAPACK's own tie handling works at ~1e-9.
MODULUS_TIE_TOL = 1e-6


def sector_blocks(sb: SchurBlocks) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(start, size) of every diagonal block of sb.T, split into the R sector and the C sector."""
    n = sb.T.shape[0]
    blocks, i = [], 0
    while i < n:
        s = 2 if i + 1 < n and sb.T[i + 1, i] != 0 else 1
        blocks.append((i, s))
        i += s
    return [b for b in blocks if b[0] < sb.n_R], [b for b in blocks if b[0] >= sb.n_R]


def modulus_ties(sb: SchurBlocks, tol: float = MODULUS_TIE_TOL) -> tuple[int, int]:
    """(ties in R, ties in C): neighbouring blocks of the modulus order, inside one sector, whose
    moduli differ by less than tol * rho(W); where a sector has none, the paper's ordering of it
    is unique."""
    bR, bC = sector_blocks(sb)
    mod = np.abs(np.asarray(sb.eigvals))
    scale = tol * max(float(sb.rho), 1e-300)

    def ties(blocks):
        m = [float(mod[i]) for i, _ in blocks]
        return int(sum(abs(a - b) < scale for a, b in zip(m, m[1:])))

    return ties(bR), ties(bC)


def reorder(sb: SchurBlocks, perm_R, perm_C) -> SchurBlocks:
    """The same W and sectors with the blocks inside R and inside C in a new order.

    Args:
        sb: a split from `schur_blocks` (R first).
        perm_R: permutation of range(#blocks in R): new position j holds old block perm_R[j];
            perm_C likewise for C.

    Returns:
        SchurBlocks in the new basis; `failed_swaps` counts block swaps LAPACK rejected (nearly
        equal eigenvalues), after which the order is only approximately the one asked for.
    """
    bR, bC = sector_blocks(sb)
    perm_R, perm_C = [int(p) for p in perm_R], [int(p) for p in perm_C]
    if sorted(perm_R) != list(range(len(bR))) or sorted(perm_C) != list(range(len(bC))):
        raise ValueError(f"perm_R / perm_C must be permutations of range({len(bR)}) / range({len(bC)}), "
                         f"got {perm_R} / {perm_C}")
    seq = [bR[p] for p in perm_R] + [bC[p] for p in perm_C]
    lab = torch.zeros(sb.T.shape[0], dtype=torch.int64)
    for j, (i, s) in enumerate(seq):
        lab[i:i + s] = len(seq) - j  # highest label top-left
    res = ordschur(sb.Q, sb.T, lab)
    return split_blocks(sb.W, res.Q, res.T, res.block_start, res.eigvals, sb.n_R, sb.alpha,
                        failed_swaps=int(res.failed_swaps))


def within_sector_orderings(sb: SchurBlocks, k: int = 8, seed: int = 0) -> list[tuple[str, SchurBlocks]]:
    """[("modulus", sb), ("reversed", ...), ("random 0", ...), ...]: 2 + k orderings of sb.

    Args:
        sb: the modulus-ordered split (`schur_blocks`).
        k: random within-sector orders (numpy default_rng(seed) permutations of R's and C's blocks).
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    bR, bC = sector_blocks(sb)
    out = [("modulus", sb), ("reversed", reorder(sb, range(len(bR))[::-1], range(len(bC))[::-1]))]
    rng = np.random.default_rng(int(seed))
    for j in range(k):
        out.append((f"random {j}", reorder(sb, rng.permutation(len(bR)), rng.permutation(len(bC)))))
    return out


def order_spread(values, effect_floor: float = ORDER_FLOOR) -> dict:
    """min / median / max of one ablation's effect over orderings, and the order-dependence rule.

    `order_dependent = max - min > max(|median| / 2, effect_floor)`: the ordering moves the
    effect by more than half of its typical size (so the sign or the ranking against another
    block can change), and by more than rollout noise.

    Args:
        values: [O] the effect (e.g. dFVU) in each ordering; the first is the modulus order.
    """
    v = np.asarray(values, dtype=float)
    if v.ndim != 1 or len(v) == 0 or not np.isfinite(v).all():
        raise ValueError(f"values must be a non-empty finite 1-D sequence, got {values!r}")
    lo, med, hi = float(v.min()), float(np.median(v)), float(v.max())
    return {"min": lo, "median": med, "max": hi, "spread": hi - lo,
            "order_dependent": bool(hi - lo > max(abs(med) / 2, effect_floor))}
