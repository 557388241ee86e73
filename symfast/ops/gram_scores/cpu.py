"""CPU launchers for `gram_scores`: C++ kernels (csrc/gram_scores.cpp) and torch GEMMs.

Block-permutation lifts -> `blockperm_asym` (gathers of 2x2 blocks, O(d^2) per pair).
Dense orthogonal lifts  -> ||rho^T G rho - G|| = ||G rho - rho G|| = ||G rho - (G rho^T)^T||:
    one GEMM [Mc * d, d] @ [d, U * d] per chunk over all models at once (the distinct
    multipliers U are the lifts and their transposes, shared when a transpose is itself
    in the set), then `pair_diff_norm` reduces the paired products without materialising
    [M, E, d, d].
"""
from __future__ import annotations

import torch

from symfast import _ext
from symfast.ops.gram_scores.lifts import BlockPermLift, split_lifts, transpose_pairs

# Bytes of GEMM output per chunk: stays in the last-level cache next to the phi chunk.
_CHUNK_BYTES = 1 << 24


def _sfx(dtype: torch.dtype) -> str:
    return "f32" if dtype == torch.float32 else "f64"


def gram(weights: torch.Tensor) -> torch.Tensor:
    """weights: [M, d, H] float32/float64 CPU -> [M, d, d] (exactly symmetric)."""
    C = _ext.require_cpp()
    fn = getattr(C, f"gram_fwd_{_sfx(weights.dtype)}")
    return torch.from_numpy(fn(weights.detach().contiguous().numpy(), _ext.num_threads()))


def blockperm_asym(phi: torch.Tensor, lifts: BlockPermLift) -> torch.Tensor:
    """||rho_e^T phi_m rho_e - phi_m||_F: [M, E] float64, by gathers."""
    C = _ext.require_cpp()
    fn = getattr(C, f"blockperm_asym_{_sfx(phi.dtype)}")
    return torch.from_numpy(fn(phi.contiguous().numpy(), lifts.perm.numpy(), lifts.blocks.numpy(),
                               _ext.num_threads()))


def dense_asym(phi: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """||rho_e^T phi_m rho_e - phi_m||_F for orthogonal rho: [E, d, d] float64 -> [M, E] float64."""
    C = _ext.require_cpp()
    reduce = getattr(C, f"pair_diff_norm_{_sfx(phi.dtype)}")
    M, d, _ = phi.shape
    E = rho.shape[0]
    out = torch.empty(M, E, dtype=torch.float64)
    if M == 0 or E == 0:
        return out
    order, U, a, b, group_end = transpose_pairs(rho)
    nu = U.shape[0]
    ucat = U.to(phi.dtype).permute(1, 0, 2).reshape(d, nu * d)  # [k, (u, j)] = U[u][k, j]
    per = d * d * phi.element_size()  # bytes of one (model, multiplier) product
    u_cap = max(2, _CHUNK_BYTES // (min(M, 256) * per))
    bounds, lo, prev = [], 0, 0  # multiplier chunks end at group ends: each element's pair lies in one chunk
    for end in group_end:
        if end - lo > u_cap and prev > lo:
            bounds.append(prev)
            lo = prev
        prev = end
    bounds.append(nu)
    chunks, lo = [], 0
    for hi in bounds:
        if hi > lo:
            pos = ((a >= lo) & (a < hi)).nonzero().reshape(-1)
            chunks.append((lo, hi, pos, order[pos], (a[pos] - lo).contiguous(), (b[pos] - lo).contiguous()))
            lo = hi
    phi = phi.contiguous()
    uc_max = max(hi - lo for lo, hi, *_ in chunks)
    mc = max(1, min(M, _CHUNK_BYTES // (uc_max * per)))
    nt = _ext.num_threads()
    for m0 in range(0, M, mc):
        p = phi[m0:m0 + mc]
        flat = p.reshape(-1, d)
        for lo, hi, pos, elems, aa, bb in chunks:
            prod = (flat @ ucat[:, lo * d:hi * d]).view(p.shape[0], d, hi - lo, d)
            out[m0:m0 + p.shape[0], elems] = torch.from_numpy(reduce(prod.numpy(), aa.numpy(), bb.numpy(), nt))
    return out


def gram_scores_asym(phi: torch.Tensor, lifts) -> torch.Tensor:
    """Absolute asymmetry norms [M, E] float64 for a BlockPermLift or dense float64 lifts [E, d, d]."""
    if isinstance(lifts, BlockPermLift):
        return blockperm_asym(phi, lifts)
    bp_idx, bp, dense_idx = split_lifts(lifts)
    out = torch.empty(phi.shape[0], lifts.shape[0], dtype=torch.float64)
    if bp is not None:
        out[:, bp_idx] = blockperm_asym(phi, bp)
    if len(dense_idx):
        out[:, dense_idx] = dense_asym(phi, lifts[dense_idx])
    return out
