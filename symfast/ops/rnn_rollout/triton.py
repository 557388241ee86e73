"""Triton kernel for symfast.rnn_rollout(): the whole time loop in one launch.

One program per (variant a, tile of BLOCK_B sequences). W_a^T [BLOCK_H, BLOCK_H] and
V^T [BLOCK_H, BLOCK_O] are loaded once and stay on chip (registers / shared memory) for
all T steps; each step is one tl.dot, an exp-based tanh and the readout dot:

    h_t = tanh(h_{t-1} W_a^T + ux_t),   y_t = h_t V^T,   ux_t = x_t U^T (precomputed)

Padded rows/columns are masked to zero (tanh(0) = 0 keeps them zero). `tl.dot` needs
every dim >= 16, so BLOCK_B, BLOCK_H, BLOCK_O >= 16. Precision: fp32 storage and
accumulation, input_precision="ieee" by default (no TF32); pass allow_tf32=True to trade
accuracy for speed on Ampere+ GPUs. Tested on CPU under TRITON_INTERPRET=1.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["rnn_rollout_fwd"]


@triton.jit
def _rnn_rollout_fwd_kernel(W_ptr, UX_ptr, V_ptr, H0_ptr, Y_ptr, B, T, H, O,
                            BLOCK_B: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_O: tl.constexpr,
                            PRECISION: tl.constexpr):
    """W: [A, H, H], UX: [B, T, H], V: [O, H], H0: [B, H] -> Y: [A, B, T, O] (all contiguous)."""
    pid_a = tl.program_id(0).to(tl.int64)
    pid_b = tl.program_id(1).to(tl.int64)
    rb = pid_b * BLOCK_B + tl.arange(0, BLOCK_B).to(tl.int64)
    rh = tl.arange(0, BLOCK_H)
    ro = tl.arange(0, BLOCK_O)
    mb, mh, mo = rb < B, rh < H, ro < O
    # W_a^T: wt[j, i] = W[a, i, j]
    wt = tl.load(W_ptr + pid_a * H * H + rh[None, :] * H + rh[:, None], mask=mh[:, None] & mh[None, :], other=0.0)
    vt = tl.load(V_ptr + ro[None, :] * H + rh[:, None], mask=mh[:, None] & mo[None, :], other=0.0)
    h = tl.load(H0_ptr + rb[:, None] * H + rh[None, :], mask=mb[:, None] & mh[None, :], other=0.0)
    for t in range(T):
        u = tl.load(UX_ptr + (rb[:, None] * T + t) * H + rh[None, :], mask=mb[:, None] & mh[None, :], other=0.0)
        z = tl.dot(h, wt, input_precision=PRECISION) + u
        h = 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)  # tanh; exp overflow gives the right limit +-1
        y = tl.dot(h, vt, input_precision=PRECISION)
        tl.store(Y_ptr + ((pid_a * B + rb[:, None]) * T + t) * O + ro[None, :], y, mask=mb[:, None] & mo[None, :])


def rnn_rollout_fwd(W: torch.Tensor, ux: torch.Tensor, V: torch.Tensor, h0: torch.Tensor,
                    allow_tf32: bool = False) -> torch.Tensor:
    """Launcher. W: [A, H, H], ux: [B, T, H], V: [O, H], h0: [B, H] (float32) -> y: [A, B, T, O]."""
    A, H = W.shape[0], W.shape[1]
    B, T = ux.shape[0], ux.shape[1]
    O = V.shape[0]
    W, ux, V, h0 = (t.float().contiguous() for t in (W, ux, V, h0))
    y = torch.empty(A, B, T, O, dtype=torch.float32, device=ux.device)
    BLOCK_H = max(16, triton.next_power_of_2(H))
    BLOCK_O = max(16, triton.next_power_of_2(O))
    BLOCK_B = 16 if BLOCK_H >= 128 else 32
    grid = (A, triton.cdiv(B, BLOCK_B))
    _rnn_rollout_fwd_kernel[grid](W, ux, V, h0, y, B, T, H, O, BLOCK_B=BLOCK_B, BLOCK_H=BLOCK_H, BLOCK_O=BLOCK_O,
                                  PRECISION="tf32" if allow_tf32 else "ieee")
    return y
