"""Triton kernel for `gram_scores` (CUDA; CPU under TRITON_INTERPRET=1 for tests).

One program per (element e, block of BLOCK_M models): the lift rho_e is loaded once,
zero-padded to BLOCK_D = max(16, next_pow2(d)) (tl.dot needs dims >= 16), and for each
model ||G rho - rho G||_F = ||rho^T G rho - G||_F (rho orthogonal) is computed with two
tl.dot in IEEE precision (no TF32). Block-permutation lifts are densified first: on a GPU
the O(d^3) products are cheap next to a gather kernel's irregular loads.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from symfast.ops.gram_scores.lifts import BlockPermLift


@triton.jit
def _gram_scores_fwd_kernel(G_ptr, R_ptr, Out_ptr, M, E, D,
                            stride_gm, stride_gi, stride_re, stride_ri, stride_om,
                            BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr):
    """Out[m, e] = ||G_m R_e - R_e G_m||_F for m in this program's block.

    G: [M, D, D] (row stride stride_gi, unit column stride), R: [E, D, D], Out: [M, E].
    Source: symfast/ops/gram_scores/reference.py (same value as ||R^T G R - G||_F for orthogonal R).
    """
    pid_e = tl.program_id(0).to(tl.int64)
    pid_m = tl.program_id(1).to(tl.int64)
    offs = tl.arange(0, BLOCK_D)
    mask = (offs[:, None] < D) & (offs[None, :] < D)
    r = tl.load(R_ptr + pid_e * stride_re + offs[:, None] * stride_ri + offs[None, :], mask=mask, other=0.0)
    for i in range(BLOCK_M):
        m = pid_m * BLOCK_M + i
        mm = tl.minimum(m, M - 1)  # past the end: recompute the last model, store nothing
        g = tl.load(G_ptr + mm * stride_gm + offs[:, None] * stride_gi + offs[None, :], mask=mask, other=0.0)
        diff = (tl.dot(g, r, input_precision="ieee", out_dtype=g.dtype)
                - tl.dot(r, g, input_precision="ieee", out_dtype=g.dtype))
        val = tl.sqrt(tl.sum(tl.sum(diff * diff, axis=1), axis=0))
        tl.store(Out_ptr + m * stride_om + pid_e, val, mask=m < M)


def gram_scores_fwd(phi: torch.Tensor, rho: torch.Tensor, block_m: int = 8) -> torch.Tensor:
    """Launcher: phi [M, d, d], rho [E, d, d] (same dtype/device) -> ||rho^T phi rho - phi||_F [M, E]."""
    phi = phi.contiguous()
    rho = rho.contiguous()
    M, d, _ = phi.shape
    E = rho.shape[0]
    out = torch.empty(M, E, dtype=phi.dtype, device=phi.device)
    if M == 0 or E == 0:
        return out
    block_d = max(16, triton.next_power_of_2(d))
    grid = (E, triton.cdiv(M, block_m))
    _gram_scores_fwd_kernel[grid](phi, rho, out, M, E, d,
                                  phi.stride(0), phi.stride(1), rho.stride(0), rho.stride(1), out.stride(0),
                                  BLOCK_D=block_d, BLOCK_M=block_m)
    return out


def gram_scores_asym(phi: torch.Tensor, lifts) -> torch.Tensor:
    """Absolute asymmetry norms [M, E] float64 for a BlockPermLift or dense float64 lifts [E, d, d]."""
    rho = lifts.to_dense() if isinstance(lifts, BlockPermLift) else lifts
    return gram_scores_fwd(phi, rho.to(phi.device, phi.dtype)).to(torch.float64)
