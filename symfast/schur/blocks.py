"""Sectors, coupling blocks and block ablations in ordered real Schur coordinates.

With the ordered real Schur form `W = Q T Q^T` (blocks sorted by |lambda|,
non-increasing), write `T = B + N`: B the 1x1 / 2x2 diagonal blocks, N the
strictly block-upper coupling. The R sector holds the leading rows with
`|lambda| >= alpha * rho(W)`, C the rest, and N splits into the coupling blocks

    T_RR   = N[R, R]     (inside the slow/large sector)
    T_C->R = N[R, C]     (rows R, columns C: C feeding R)
    T_CC   = N[C, C]     (inside the complement)

An ablation zeroes a subset S of those blocks: `W~ = Q (B + N~) Q^T`. All 8
subsets are built at once as a batch [8, n, n] (float64). The removed Schur
mass is `||T - T~||_F` (= ||W - W~||_F, Q is orthogonal), reported absolute
and relative to ||N||_F and to ||T||_F.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict
from dataclasses import dataclass, replace

import numpy as np
import torch

from symfast.ops.ordered_schur import ordered_schur

__all__ = ["BLOCKS", "SUBSETS", "SchurBlocks", "schur_blocks", "split_blocks", "ablate", "subset_name",
           "departure_from_normality", "subset_mask", "NOOP_C", "storage_dtype", "noop_tolerance"]

BLOCKS = ("T_RR", "T_C->R", "T_CC")
# all 8 subsets, in order of size then name: (), (RR,), (C->R,), (CC,), (RR,C->R), ...
SUBSETS: tuple[tuple[str, ...], ...] = tuple(
    s for k in range(4) for s in itertools.combinations(BLOCKS, k))


def subset_name(subset: tuple[str, ...]) -> str:
    """'full' for the empty subset, else e.g. '-T_RR,-T_CC'."""
    return "full" if not subset else ",".join("-" + b for b in subset)


@dataclass
class SchurBlocks:
    """Sector split of one recurrent matrix (float64 tensors).

    Attributes:
        W: [n, n]; Q, T: [n, n] ordered real Schur (R sector first); B, N: [n, n] with T = B + N.
        eigvals: [n] complex; rho: spectral radius; alpha: sector cut; n_R: size of R.
        masks: {block name: [n, n] bool} the entries of N each coupling block owns.
        near_cut: [n] bool, eigenvalues with ||lambda| - alpha rho| <= margin * rho.
        failed_swaps: rejected dtrexc swaps inside sectors (0 in all our runs so far).
    """

    W: torch.Tensor
    Q: torch.Tensor
    T: torch.Tensor
    B: torch.Tensor
    N: torch.Tensor
    eigvals: torch.Tensor
    rho: float
    alpha: float
    n_R: int
    masks: dict
    near_cut: torch.Tensor
    failed_swaps: int

    def __repr__(self) -> str:  # short: the dataclass default would print every matrix
        norms = self.block_norms()
        parts = ", ".join(f"||{b}||/||T|| = {norms[b] / norms['T']:.3g}" for b in self.masks) if norms["T"] else ""
        return (f"SchurBlocks(n={self.T.shape[0]}, alpha={self.alpha:g}, n_R={self.n_R}, rho={self.rho:.4g}"
                + (f", {parts}" if parts else "") + f", near_cut={int(self.near_cut.sum())})")

    def block_norms(self) -> dict:
        """Frobenius norm of each coupling block, of N, and of T."""
        out = {b: float(self.N[m].norm()) for b, m in self.masks.items()}
        out["N"] = float(self.N.norm())
        out["T"] = float(self.T.norm())
        return out


def schur_blocks(W, alpha: float = 0.9, tie_tol: float = 1e-9, margin: float = 0.01) -> SchurBlocks:
    """Ordered Schur form of W: [n, n] split into B, N and the coupling blocks at cut alpha.

    Args:
        W: [n, n] tensor/array (computed in float64).
        alpha: sector cut, R = {|lambda| >= alpha rho(W)}; in (0, 1].
        tie_tol: tie tolerance on moduli passed to `ordered_schur`.
        margin: eigenvalues within margin * rho of the cut are flagged in `near_cut`.
    """
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    Wt = torch.as_tensor(W).detach().cpu().double()
    if Wt.ndim != 2:
        raise ValueError(f"W must be [n, n], got {list(Wt.shape)}")
    key = (tuple(Wt.shape), Wt.contiguous().numpy().tobytes(), float(alpha), float(tie_tol), float(margin))
    sb = _FORMS.pop(key, None)
    if sb is None:
        res = ordered_schur(Wt, sector_alpha=alpha, tie_tol=tie_tol)
        if int(res.sector_failures) != 0:
            raise RuntimeError("ordered_schur could not separate the R and C sectors (dtrexc rejected a swap)")
        sb = split_blocks(Wt, res.Q, res.T, res.block_start, res.eigvals, int(res.n_R), alpha, margin,
                          int(res.failed_swaps))
    _FORMS[key] = sb  # most recently used last
    while len(_FORMS) > _FORMS_MAX:
        _FORMS.popitem(last=False)
    # a copy: callers may change their split in place without changing the next caller's
    return replace(sb, W=Wt, **{f: getattr(sb, f).clone() for f in ("Q", "T", "B", "N", "eigvals", "near_cut")},
                   masks={b: m.clone() for b, m in sb.masks.items()})


# The analysis of one model asks for the same ordered Schur form several times (the alpha sweep, the
# fine alpha grid, the subspace statistics): each (W, alpha, tie_tol, margin) is factorised once.
_FORMS: "OrderedDict[tuple, SchurBlocks]" = OrderedDict()
_FORMS_MAX = 32  # one model's sweep and grid need about 11 forms


def split_blocks(W, Q, T, block_start, eigvals, n_R: int, alpha: float, margin: float = 0.01,
                 failed_swaps: int = 0) -> SchurBlocks:
    """`SchurBlocks` from a given real Schur pair with the R sector in the first `n_R` rows.

    Used by `schur_blocks` and by within-sector reorderings (`symfast.schur.orderings`).

    Args:
        W, Q, T: [n, n] float64 (W = Q T Q^T); block_start: [n] start row of each row's block;
        eigvals: [n] complex; n_R: size of R; alpha, margin: as in `schur_blocks`.
    """
    n = T.shape[0]
    blockdiag = block_start.unsqueeze(1) == block_start.unsqueeze(0)  # [n, n] same block
    B = torch.where(blockdiag, T, torch.zeros_like(T))
    N = T - B
    nR = int(n_R)
    rows = torch.arange(n)
    inR = rows < nR
    upper = ~blockdiag & (rows.unsqueeze(1) < rows.unsqueeze(0))
    masks = {
        "T_RR": upper & inR.unsqueeze(1) & inR.unsqueeze(0),
        "T_C->R": upper & inR.unsqueeze(1) & ~inR.unsqueeze(0),
        "T_CC": upper & ~inR.unsqueeze(1) & ~inR.unsqueeze(0),
    }
    mod = eigvals.abs()
    rho = float(mod.max())
    near = (mod - alpha * rho).abs() <= margin * rho
    return SchurBlocks(W, Q, T, B, N, eigvals, rho, alpha, nR, masks, near, int(failed_swaps))


def subset_mask(sb: SchurBlocks, subset) -> torch.Tensor:
    """[n, n] bool: the entries of T (in sb's Schur basis) the blocks of `subset` own."""
    m = torch.zeros_like(sb.T, dtype=torch.bool)
    for b in subset:
        if b not in sb.masks:
            raise ValueError(f"unknown block {b!r}; expected one of {BLOCKS}")
        m |= sb.masks[b]
    return m


def ablate(sb: SchurBlocks, subsets=SUBSETS) -> tuple[torch.Tensor, list[dict]]:
    """Ablated recurrent matrices for each subset, with the removed Schur mass.

    Args:
        sb: the split from `schur_blocks`.
        subsets: iterable of tuples of block names (default: all 8).

    Returns:
        W_ablated: [S, n, n] float64 (`Q (B + N~) Q^T`; the empty subset gives W up to rounding),
        rows: per subset {"subset", "removed_mass", "removed_rel_N", "removed_rel_T"}.
    """
    subsets = list(subsets)
    keep = torch.ones((len(subsets),) + tuple(sb.T.shape), dtype=torch.bool)
    for k, s in enumerate(subsets):
        for b in s:
            if b not in sb.masks:
                raise ValueError(f"unknown block {b!r}; expected one of {BLOCKS}")
            keep[k] &= ~sb.masks[b]
    Tt = sb.B + torch.where(keep, sb.N, torch.zeros_like(sb.N))
    W_ab = sb.Q @ Tt @ sb.Q.T
    nN, nT = float(sb.N.norm()), float(sb.T.norm())
    rows = []
    for k, s in enumerate(subsets):
        m = float((sb.T - Tt[k]).norm())
        rows.append({"subset": subset_name(s), "removed_mass": m,
                     "removed_rel_N": m / nN if nN > 0 else 0.0,
                     "removed_rel_T": m / nT if nT > 0 else 0.0})
    return W_ab, rows


def departure_from_normality(sb: SchurBlocks) -> dict:
    """Henrici departure from normality, split into what the ablations can and cannot touch.

    dep(W)^2 = ||N||_F^2 + sum over 2x2 blocks (|b| - |c|)^2, the strictly upper part of the
    complex Schur form (no cancellation, unlike sqrt(||W||^2 - sum |lambda|^2)). The 2x2
    part stays after every ablation (it lives inside B).

    Returns:
        {"dep": total, "dep_N": ||N||_F, "dep_2x2": inside the 2x2 blocks, "dep_rel": dep / ||W||_F}.
    """
    T = sb.T
    n = T.shape[0]
    d2 = 0.0
    i = 0
    while i < n:
        if i + 1 < n and T[i + 1, i] != 0:
            d2 += (abs(float(T[i, i + 1])) - abs(float(T[i + 1, i]))) ** 2
            i += 2
        else:
            i += 1
    dN = float(sb.N.norm())
    dep = float(np.sqrt(dN ** 2 + d2))
    nW = float(sb.W.norm())
    return {"dep": dep, "dep_N": dN, "dep_2x2": float(np.sqrt(d2)), "dep_rel": dep / nW if nW > 0 else 0.0}


# An ablation is a no-op when the Schur mass it removes is within what storing W and
# factorising it can leave behind: NOOP_C * max(eps(storage dtype), n * eps(float64)) * ||T||_F.
# Rounding W to a dtype moves each entry by <= eps/2 of itself, so ||W - fl(W)||_F <= eps/2 ||W||_F,
# and the coupling it creates in the Schur form of a normal W is of that size to first order; the
# float64 Schur factorisation adds a backward error of ~ n eps(float64) ||W||_F. NOOP_C = 4 is a
# safety factor of 8 over the rounding bound (a float32-rounded orthogonal W at n = 64 measures
# ||N||/||T|| ~ 3e-8 = 0.25 eps(float32)).
NOOP_C = 4.0


def storage_dtype(W) -> torch.dtype:
    """The narrowest of float32 / float64 that holds every entry of W exactly (its storage precision)."""
    Wt = torch.as_tensor(W).detach().cpu()
    if Wt.dtype == torch.float32:
        return torch.float32
    Wd = Wt.double()
    return torch.float32 if bool((Wd.float().double() == Wd).all()) else torch.float64


def noop_tolerance(W, c: float = NOOP_C) -> float:
    """Relative Schur mass (removed ||T - T~||_F / ||T||_F) below which an ablation is a no-op.

    Args:
        W: [n, n] the recurrent matrix as stored (its dtype, or the narrowest float dtype that holds
            it exactly, sets the precision).
        c: safety factor (default NOOP_C = 4).

    Returns:
        c * max(eps(storage dtype), n * eps(float64)).
    """
    if not c > 0:
        raise ValueError(f"c must be > 0, got {c}")
    n = torch.as_tensor(W).shape[-1]
    return float(c * max(torch.finfo(storage_dtype(W)).eps, n * torch.finfo(torch.float64).eps))
