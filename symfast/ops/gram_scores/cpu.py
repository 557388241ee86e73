"""CPU launchers for `gram_scores`: C++ kernels in csrc/gram_scores.cpp (`gram`: symfast/ops/gram/cpu.py).

Block-permutation lifts -> `blockperm_asym` (gathers of 2x2 blocks, O(d^2) per pair).
Dense orthogonal lifts  -> ||rho^T G rho - G|| = ||G rho - rho G|| = ||G rho - (G rho^T)^T||:
    `dense_asym` computes, per model (OpenMP), the products G U with the distinct
    multipliers U (the lifts and their transposes, shared when a transpose is itself in
    the set) by a register-blocked float64 kernel (one instance per ISA) and reduces each
    pair while both products sit in L1: nothing of size [M, E, d, d] or [M, d, U, d]
    exists. (A formulation as one large torch GEMM [M * d, d] @ [d, U * d] plus a
    reduction pass measured about 2.5x slower than this fused kernel on the 2-core dev
    machine: MKL's float64 GEMM reached ~6 GFLOP/s there, the fused kernel ~15.)
"""
from __future__ import annotations

import torch

from symfast import _ext
from symfast.ops.gram_scores.lifts import BlockPermLift, split_lifts, transpose_pairs


def _sfx(dtype: torch.dtype) -> str:
    return "f32" if dtype == torch.float32 else "f64"


def blockperm_asym(phi: torch.Tensor, lifts: BlockPermLift, isa: str = "auto") -> torch.Tensor:
    """||rho_e^T phi_m rho_e - phi_m||_F: [M, E] float64, by gathers (isa as in `dense_asym`)."""
    C = _ext.require_cpp()
    fn = getattr(C, f"blockperm_asym_{_sfx(phi.dtype)}")
    return torch.from_numpy(fn(phi.contiguous().numpy(), lifts.perm.numpy(), lifts.blocks.numpy(),
                               _ext.num_threads(), isa))


def dense_asym(phi: torch.Tensor, rho: torch.Tensor, isa: str = "auto") -> torch.Tensor:
    """||rho_e^T phi_m rho_e - phi_m||_F for orthogonal rho: [E, d, d] float64 -> [M, E] float64.

    isa: "auto" (the widest vector registers this CPU has) or "generic", "avx2", "avx512" to force
    that instance (tests). Every instance sums in the same order: AVX2 and AVX-512 (fused
    multiply-adds) give the same bits, generic (separate multiply and add) agrees to rounding."""
    C = _ext.require_cpp()
    M, E = phi.shape[0], rho.shape[0]
    if M == 0 or E == 0:
        return torch.zeros(M, E, dtype=torch.float64)
    order, U, a, b, _ = transpose_pairs(rho)  # elements sharing products are adjacent in `order`
    fn = getattr(C, f"dense_asym_{_sfx(phi.dtype)}")
    res = torch.from_numpy(fn(phi.contiguous().numpy(), U.contiguous().numpy(), a.numpy(), b.numpy(),
                              _ext.num_threads(), isa))
    out = torch.empty_like(res)
    out[:, order] = res
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
