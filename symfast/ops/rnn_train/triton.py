"""Triton kernel for symfast.rnn_train_step() / rnn_train_loss(): forward, loss and BPTT in one launch.

One program per (model b, tile of BLOCK_S sequences). The model's W, U, V stay on chip for
all T steps; the forward stores the hidden states in a scratch buffer [B, S, T + 1, BLOCK_H]
(slot 0 = h0), the backward walks back through it:

    forward   h_t = tanh(h_{t-1} W^T + x_t U^T),  y_t = h_t V^T,  e = y_t - targets_t
    backward  dy = 2 m e / max(sum m, 1),  dz_t = (dy V + dz_{t+1} W) * (1 - h_t^2)
              dW += dz_t^T h_{t-1},  dU += dz_t^T x_t,  dV += dy^T h_t,  dx_t = dz_t U,  dh0 = dz_0 W

Model b uses its first widths[b] units (masked loads; tanh(0) = 0 keeps the rest zero). Each
program writes its own gradient partial; the launcher sums the tiles in a fixed order
(deterministic). `tl.dot` needs every dim >= 16, so BLOCK_S, BLOCK_H, BLOCK_I, BLOCK_O >= 16.
float32 only; input_precision="ieee" (no TF32) unless allow_tf32. Tested on CPU under
TRITON_INTERPRET=1 (tiny shapes); not yet measured on a GPU.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

__all__ = ["rnn_train", "unsupported"]


@triton.jit
def _rnn_train_kernel(W_ptr, U_ptr, V_ptr, X_ptr, Y_ptr, M_ptr, H0_ptr, WID_ptr, SCALE_ptr, HS_ptr,
                      LOSS_ptr, DW_ptr, DU_ptr, DV_ptr, DX_ptr, DH0_ptr,
                      S, T, H, I, O, MO, C,
                      HAS_MASK: tl.constexpr, HAS_H0: tl.constexpr, BACKWARD: tl.constexpr,
                      NEED_DX: tl.constexpr, NEED_DH0: tl.constexpr, BLOCK_S: tl.constexpr,
                      BLOCK_H: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_O: tl.constexpr,
                      PRECISION: tl.constexpr):
    """W [B, H, H], U [B, H, I], V [B, O, H], X [B, S, T, I], Y [B, S, T, O], M [B, S, T, MO],
    H0 [B, S, H], WID [B] int64, SCALE [B] = 1 / max(sum m, 1); partials LOSS [B, C],
    DW [B, C, H, H], DU [B, C, H, I], DV [B, C, O, H]; DX [B, S, T, I], DH0 [B, S, H]."""
    b = tl.program_id(0).to(tl.int64)
    c = tl.program_id(1).to(tl.int64)
    width = tl.load(WID_ptr + b)
    rs = c * BLOCK_S + tl.arange(0, BLOCK_S).to(tl.int64)
    rh = tl.arange(0, BLOCK_H)
    ri = tl.arange(0, BLOCK_I)
    ro = tl.arange(0, BLOCK_O)
    ms, mh, mi, mo = rs < S, rh < width, ri < I, ro < O
    mhh = mh[:, None] & mh[None, :]
    w = tl.load(W_ptr + b * H * H + rh[:, None] * H + rh[None, :], mask=mhh, other=0.0)    # w[i, j] = W[i, j]
    wt = tl.load(W_ptr + b * H * H + rh[None, :] * H + rh[:, None], mask=mhh, other=0.0)   # wt[j, i] = W[i, j]
    ut = tl.load(U_ptr + b * H * I + rh[None, :] * I + ri[:, None], mask=mi[:, None] & mh[None, :], other=0.0)
    vt = tl.load(V_ptr + b * O * H + ro[None, :] * H + rh[:, None], mask=mh[:, None] & mo[None, :], other=0.0)
    scale = tl.load(SCALE_ptr + b)
    msh = ms[:, None] & mh[None, :]
    hs_row = (b * C * BLOCK_S + rs[:, None]) * (T + 1)  # scratch row base, slot t + 1 holds h_t
    if HAS_H0:
        h = tl.load(H0_ptr + (b * S + rs[:, None]) * H + rh[None, :], mask=msh, other=0.0)
    else:
        h = tl.zeros([BLOCK_S, BLOCK_H], dtype=tl.float32)
    if BACKWARD:
        tl.store(HS_ptr + hs_row * BLOCK_H + rh[None, :], h)
    so = ms[:, None] & mo[None, :]
    lacc = tl.zeros([BLOCK_S], dtype=tl.float32)
    for t in range(T):
        xt = tl.load(X_ptr + ((b * S + rs[:, None]) * T + t) * I + ri[None, :], mask=ms[:, None] & mi[None, :],
                     other=0.0)
        z = tl.dot(h, wt, input_precision=PRECISION) + tl.dot(xt, ut, input_precision=PRECISION)
        h = 1.0 - 2.0 / (tl.exp(2.0 * z) + 1.0)  # tanh; exp overflow gives the right limit +-1
        if BACKWARD:
            tl.store(HS_ptr + (hs_row + t + 1) * BLOCK_H + rh[None, :], h)
        y = tl.dot(h, vt, input_precision=PRECISION)
        tg = tl.load(Y_ptr + ((b * S + rs[:, None]) * T + t) * O + ro[None, :], mask=so, other=0.0)
        e = tl.where(so, y - tg, 0.0)
        if HAS_MASK:
            m = tl.load(M_ptr + ((b * S + rs[:, None]) * T + t) * MO + tl.where(MO == 1, 0, ro[None, :]), mask=so,
                        other=0.0)
            lacc += tl.sum(m * e * e, axis=1)
        else:
            lacc += tl.sum(e * e, axis=1)
    tl.store(LOSS_ptr + b * C + c, tl.sum(lacc, axis=0))
    if BACKWARD:
        vp = tl.load(V_ptr + b * O * H + ro[:, None] * H + rh[None, :], mask=mo[:, None] & mh[None, :], other=0.0)
        up = tl.load(U_ptr + b * H * I + rh[:, None] * I + ri[None, :], mask=mh[:, None] & mi[None, :], other=0.0)
        dzn = tl.zeros([BLOCK_S, BLOCK_H], dtype=tl.float32)
        gw = tl.zeros([BLOCK_H, BLOCK_H], dtype=tl.float32)
        gu = tl.zeros([BLOCK_H, BLOCK_I], dtype=tl.float32)
        gv = tl.zeros([BLOCK_O, BLOCK_H], dtype=tl.float32)
        for tt in range(T):
            t = T - 1 - tt
            ht = tl.load(HS_ptr + (hs_row + t + 1) * BLOCK_H + rh[None, :])
            hp = tl.load(HS_ptr + (hs_row + t) * BLOCK_H + rh[None, :])
            xt = tl.load(X_ptr + ((b * S + rs[:, None]) * T + t) * I + ri[None, :], mask=ms[:, None] & mi[None, :],
                         other=0.0)
            y = tl.dot(ht, vt, input_precision=PRECISION)
            tg = tl.load(Y_ptr + ((b * S + rs[:, None]) * T + t) * O + ro[None, :], mask=so, other=0.0)
            dy = tl.where(so, 2.0 * scale * (y - tg), 0.0)
            if HAS_MASK:
                dy = dy * tl.load(M_ptr + ((b * S + rs[:, None]) * T + t) * MO + tl.where(MO == 1, 0, ro[None, :]),
                                  mask=so, other=0.0)
            g = tl.dot(dy, vp, input_precision=PRECISION) + tl.dot(dzn, w, input_precision=PRECISION)
            dz = g * (1.0 - ht * ht)
            gw += tl.dot(tl.trans(dz), hp, input_precision=PRECISION)
            gu += tl.dot(tl.trans(dz), xt, input_precision=PRECISION)
            gv += tl.dot(tl.trans(dy), ht, input_precision=PRECISION)
            if NEED_DX:
                dxt = tl.dot(dz, up, input_precision=PRECISION)
                tl.store(DX_ptr + ((b * S + rs[:, None]) * T + t) * I + ri[None, :], dxt,
                         mask=ms[:, None] & mi[None, :])
            dzn = dz
        if NEED_DH0:
            dh0 = tl.dot(dzn, w, input_precision=PRECISION)
            tl.store(DH0_ptr + (b * S + rs[:, None]) * H + rh[None, :], dh0, mask=msh)
        p = b * C + c
        tl.store(DW_ptr + p * H * H + rh[:, None] * H + rh[None, :], gw, mask=mhh)
        tl.store(DU_ptr + p * H * I + rh[:, None] * I + ri[None, :], gu, mask=mh[:, None] & mi[None, :])
        tl.store(DV_ptr + p * O * H + ro[:, None] * H + rh[None, :], gv, mask=mo[:, None] & mh[None, :])


def unsupported(dtype, H: int) -> str | None:
    """Why the kernel cannot take these inputs (None: it can)."""
    if dtype != torch.float32:
        return f"dtype {dtype} (float32 only)"
    if H > 128:
        return f"H = {H} > 128 (W, its transpose and dW are kept on chip)"
    return None


def rnn_train(W, U, V, x, targets, mask, h0, widths, backward: bool, need_dx: bool = False,
              need_dh0: bool = False, allow_tf32: bool = False):
    """backward=False: loss [B]; True: (loss, dW, dU, dV, dx or None, dh0 or None). See reference.rnn_train_step."""
    B, H, S, T, I, O = W.shape[0], W.shape[1], x.shape[1], x.shape[2], x.shape[3], V.shape[1]
    dev = x.device
    if mask is not None and mask.ndim == 3:
        mask = mask[..., None]
    MO = 1 if mask is None else mask.shape[3]
    den = torch.full((B,), float(S * T * O), device=dev) if mask is None else \
        (mask.sum(dim=(1, 2, 3)) * (O // MO)).clamp_min(1)
    scale = (1.0 / den).float().contiguous()
    wid = (torch.full((B,), H, dtype=torch.int64, device=dev) if widths is None else widths.to(dev)).contiguous()
    BLOCK_H = max(16, triton.next_power_of_2(H))
    BLOCK_I, BLOCK_O = max(16, triton.next_power_of_2(I)), max(16, triton.next_power_of_2(O))
    BLOCK_S = 16 if BLOCK_H >= 128 else 32 if S > 16 else 16
    C = triton.cdiv(S, BLOCK_S)
    f = dict(dtype=torch.float32, device=dev)
    loss = torch.empty(B, C, **f)
    hs = torch.empty(B, C * BLOCK_S, T + 1, BLOCK_H, **f) if backward else loss
    dW = torch.zeros(B, C, H, H, **f) if backward else loss
    dU = torch.zeros(B, C, H, I, **f) if backward else loss
    dV = torch.zeros(B, C, O, H, **f) if backward else loss
    dx = torch.empty(B, S, T, I, **f) if backward and need_dx else loss
    dh0 = torch.zeros(B, S, H, **f) if backward and need_dh0 else loss
    x, targets, W, U, V = (t.contiguous() for t in (x, targets, W, U, V))
    _rnn_train_kernel[(B, C)](
        W, U, V, x, targets, loss if mask is None else mask.contiguous(), loss if h0 is None else h0.contiguous(),
        wid, scale, hs, loss, dW, dU, dV, dx, dh0, S, T, H, I, O, MO, C,
        HAS_MASK=mask is not None, HAS_H0=h0 is not None, BACKWARD=backward, NEED_DX=backward and need_dx,
        NEED_DH0=backward and need_dh0, BLOCK_S=BLOCK_S, BLOCK_H=BLOCK_H, BLOCK_I=BLOCK_I, BLOCK_O=BLOCK_O,
        PRECISION="tf32" if allow_tf32 else "ieee")
    total = loss.sum(1) * scale
    if not backward:
        return total
    return (total, dW.sum(1), dU.sum(1), dV.sum(1), dx if need_dx else None, dh0 if need_dh0 else None)
