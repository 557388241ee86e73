"""Compact block-permutation lifts and lift-set preparation for `gram_scores`.

An exact lift of a Fourier PE is a permutation of 2x2 orthogonal blocks
(Chiba, Sugiyama, Uranishi, arXiv 2607.03108): row block j of rho holds one non-zero 2x2 block B_j, in
column block perm[j]. Then

    (rho^T G rho)[perm[j], perm[k]] = B_j^T G[j, k] B_k        (2x2 blocks of G)

so a score is a gather of G's blocks with 2x2 mixes: O(d^2) per (model, element)
instead of the O(d^3) of two dense products.
"""
from __future__ import annotations

import numpy as np
import torch

__all__ = ["BlockPermLift", "ORTHO_TOL", "blockperm_to_dense", "split_lifts", "transpose_pairs"]

# Max |rho^T rho - I| per lift dtype: the fast dense path relies on ||rho^T X rho|| = ||X||.
ORTHO_TOL = {torch.float64: 1e-8, torch.float32: 1e-5}


class BlockPermLift:
    """E lifts of size [d, d], each a permutation of 2x2 blocks.

    Attributes:
        perm: [E, m] int64, m = ceil(d / 2): row block j of lift e has its block in column block perm[e, j].
        blocks: [E, m, 2, 2] float64, the non-zero 2x2 block of row block j.
        dim: d. An odd d is padded with one index that every lift fixes, so the last
            original index must be fixed too (e.g. the bias-augmented lift diag(rho, 1)).
    """

    def __init__(self, perm, blocks, dim: int | None = None):
        perm = torch.as_tensor(perm, dtype=torch.int64).cpu()
        blocks = torch.as_tensor(blocks, dtype=torch.float64).cpu()
        if perm.ndim != 2:
            raise ValueError(f"perm must be [E, m], got {list(perm.shape)}")
        E, m = perm.shape
        if blocks.shape != (E, m, 2, 2):
            raise ValueError(f"blocks must be [E, m, 2, 2] = [{E}, {m}, 2, 2], got {list(blocks.shape)}")
        dim = 2 * m if dim is None else int(dim)
        if dim not in (2 * m, 2 * m - 1):
            raise ValueError(f"dim must be 2m or 2m - 1 for m = {m} blocks, got {dim}")
        if m and not (torch.sort(perm, dim=1).values == torch.arange(m)).all():
            raise ValueError("perm rows must be permutations of 0..m-1")
        if not torch.isfinite(blocks).all():
            raise ValueError("blocks contain NaN or Inf")
        if E and m:  # gathered scores assume orthogonal blocks, as every exact lift has
            err = (blocks.transpose(-1, -2) @ blocks - torch.eye(2, dtype=torch.float64)).abs().amax(dim=(-1, -2))
            if (err > ORTHO_TOL[torch.float64]).any():
                e, j = (int(i) for i in (err > ORTHO_TOL[torch.float64]).nonzero()[0])
                raise ValueError(f"block {j} of lift {e} is not orthogonal: max |B^T B - I| = "
                                 f"{float(err[e, j]):.3e} > {ORTHO_TOL[torch.float64]:.0e}")
        self.perm, self.blocks, self.dim = perm.contiguous(), blocks.contiguous(), dim

    def __len__(self) -> int:
        return self.perm.shape[0]

    def __repr__(self) -> str:
        return f"BlockPermLift(E={len(self)}, dim={self.dim})"

    def __getitem__(self, idx) -> "BlockPermLift":
        idx = torch.as_tensor(idx, dtype=torch.int64).reshape(-1)
        return BlockPermLift(self.perm[idx], self.blocks[idx], self.dim)

    @staticmethod
    def from_dense(lifts, atol: float = 0.0) -> "BlockPermLift":
        """Compact form of dense block-permutation lifts [E, d, d]; raises ValueError if one is not.

        Entries with |x| <= atol count as zero (default: exact zeros, as `FourierPE.lift` gives).
        """
        rho = _as_lifts(lifts)
        ok, perm, blocks = _detect(rho, atol)
        if not ok.all():
            bad = int((~ok).nonzero()[0])
            raise ValueError(f"lift {bad} is not a permutation of 2x2 blocks (each row/column block "
                             f"needs exactly one non-zero block; an odd last index must be fixed)")
        return BlockPermLift(perm, blocks, rho.shape[-1])

    def to_dense(self) -> torch.Tensor:
        """[E, d, d] float64."""
        return blockperm_to_dense(self.perm, self.blocks, self.dim)


def blockperm_to_dense(perm: torch.Tensor, blocks: torch.Tensor, dim: int) -> torch.Tensor:
    """Dense [E, dim, dim] lifts from perm [E, m] and blocks [E, m, 2, 2] (no validation: traceable)."""
    E, m = perm.shape
    out = blocks.new_zeros(E, m, 2, m, 2)
    e = torch.arange(E, device=perm.device)[:, None].expand(E, m)
    j = torch.arange(m, device=perm.device)[None, :].expand(E, m)
    out[e, j, :, perm, :] = blocks
    out = out.reshape(E, 2 * m, 2 * m)
    return out[:, :dim, :dim].contiguous()


def _as_lifts(lifts) -> torch.Tensor:
    rho = torch.as_tensor(np.asarray(lifts) if not isinstance(lifts, torch.Tensor) else lifts)
    if rho.ndim != 3 or rho.shape[1] != rho.shape[2]:
        raise ValueError(f"lifts must be [E, d, d], got {list(rho.shape)}")
    return rho.detach().to("cpu", torch.float64)


def _detect(rho: torch.Tensor, atol: float):
    """Per lift: (is block permutation [E] bool, perm [E, m], blocks [E, m, 2, 2])."""
    E, d, _ = rho.shape
    m = (d + 1) // 2
    if d % 2:  # pad with a fixed index
        pad = torch.zeros(E, d + 1, d + 1, dtype=rho.dtype)
        pad[:, :d, :d] = rho
        pad[:, d, d] = 1.0
        rho = pad
    b = rho.reshape(E, m, 2, m, 2).permute(0, 1, 3, 2, 4)  # [E, j, k, 2, 2]
    nz = (b.abs() > atol).flatten(3).any(-1)  # [E, m, m]
    ok = (nz.sum(-1) == 1).all(-1) & (nz.sum(-2) == 1).all(-1)
    perm = nz.to(torch.int64).argmax(-1)  # [E, m]
    blocks = torch.gather(b, 2, perm[:, :, None, None, None].expand(E, m, 1, 2, 2))[:, :, 0]
    if d % 2:  # the padded block must not mix the last original index with the pad
        last = blocks[:, -1]
        ok &= (perm[:, -1] == m - 1) & (last[:, 0, 1].abs() <= atol) & (last[:, 1, 0].abs() <= atol)
    return ok, perm, blocks.contiguous()


def split_lifts(rho: torch.Tensor):
    """Split dense lifts [E, d, d] into (indices, BlockPermLift) and (indices, dense rest)."""
    ok, perm, blocks = _detect(rho.detach().to("cpu", torch.float64), 0.0)
    bp_idx = ok.nonzero().reshape(-1)
    dense_idx = (~ok).nonzero().reshape(-1)
    bp = BlockPermLift(perm[bp_idx], blocks[bp_idx], rho.shape[-1]) if len(bp_idx) else None
    return bp_idx, bp, dense_idx


def transpose_pairs(rho: torch.Tensor):
    """Multipliers U and index pairs so that s_e = ||G U[a_e] - (G U[b_e])^T|| (G symmetric).

    ||rho^T G rho - G|| = ||G rho - rho G|| for orthogonal rho, and rho G = (G rho^T)^T,
    so each element needs G rho_e and G rho_e^T. A lift whose transpose is (bit for bit)
    another element's lift -- the inverse element's, when a sweep builds it that way --
    or itself (an involution) shares the product: the multiplier count drops from 2E
    towards E.

    Returns:
        (order [E] element indices grouped so each group's multipliers are adjacent,
         U [nu, d, d], a [E], b [E] indices into U in `order`'s order,
         group_end [n_groups] cumulative multiplier counts at group ends).
    """
    rho = rho.contiguous()
    by_key: dict[bytes, list[int]] = {}
    for e in range(rho.shape[0]):
        by_key.setdefault(rho[e].numpy().tobytes(), []).append(e)
    seen = set()
    order, U, a, b, group_end = [], [], [], [], []
    for e in range(rho.shape[0]):
        k = rho[e].numpy().tobytes()
        if k in seen:
            continue
        seen.add(k)
        t = rho[e].T.contiguous()
        kt = t.numpy().tobytes()
        ua = len(U)
        U.append(rho[e])
        ub = ua
        if kt != k:  # not an involution: also G rho^T
            ub = len(U)
            U.append(t)
        for x in by_key[k]:
            order.append(x), a.append(ua), b.append(ub)
        if kt != k and kt in by_key:  # the transposed lift is in the set: its score shares both products
            seen.add(kt)
            for x in by_key[kt]:
                order.append(x), a.append(ub), b.append(ua)
        group_end.append(len(U))
    return (torch.tensor(order, dtype=torch.int64), torch.stack(U), torch.tensor(a, dtype=torch.int64),
            torch.tensor(b, dtype=torch.int64), group_end)
