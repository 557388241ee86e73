"""Triton kernels for the fused batched Fourier-PE + MLP (CUDA, or CPU under TRITON_INTERPRET=1).

Supported: float32, 1..4 hidden layers of one width H in {16, 32, 64, 128, 256}, m <= 128
frequencies (d = 2m), one output, points of dimension D = 2 or 3 (a constexpr). Other models fall back to
the reference (see `unsupported`). Wide, deep models inside those bounds can still need more shared memory
than a GPU block has (e.g. width 128, 4 layers, 128 frequencies, 3-D: about 530 KB for the backward when
compiled for sm_90, against an H100's 227 KB); the GPU refuses them at launch (`DoesNotFit`), and the ops
then run the reference with a one-time warning.

Kernels (reference: reference.py):
  _fourier_mlp_fwd_kernel: grid (tiles of BLOCK_N points, B); y = MLP(phi(x)).
  _fourier_mlp_bwd_kernel: grid (B, C chunks); each program loops over its chunk's tiles,
    recomputes the forward of a tile in registers, forms dLoss/dy (MSE: 2 (y - t) / N, or a
    given cotangent), and accumulates dW, db in registers; partials [B, C, ...] are summed
    over C in PyTorch in a fixed order (deterministic, no atomics). [B, N, H] activations
    never touch global memory.
Products use tl.dot with input_precision "ieee" (full fp32) unless ALLOW_TF32 is set.
"""
from __future__ import annotations

import torch

from symfast.activations import FUSED

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - symfast works without triton
    triton = None

ACT_CODES = {name: code for code, name in enumerate(FUSED)}  # the kernels' code order, as the C++ enum's
ALLOW_TF32 = False   # set True to let tl.dot use TF32 on Ampere+ (faster, ~1e-3 relative error)
BLOCK_N = 64
MAX_HIDDEN_LAYERS = 4


class DoesNotFit(ValueError):
    """The GPU refused a kernel for this model (shared memory or registers): known only once the
    kernel is compiled for the GPU in hand, so the ops then run the reference with a warning."""


def launch(kernel, grid, *args, name: str, **meta):
    """Launch `kernel`, with a GPU's out-of-resources refusal turned into `DoesNotFit` naming the model."""
    try:
        kernel[grid](*args, **meta)
    except triton.runtime.OutOfResources as e:
        raise DoesNotFit(f"the Triton {name} kernel for hidden width {meta['H']}, {meta['NH']} hidden layers, "
                         f"{meta['MP']} padded frequencies and D = {meta['D']} does not fit this GPU ({e})") from None


def unsupported(dtype, weights) -> str:
    """Why the Triton kernels cannot run this model ('' when they can)."""
    if triton is None:
        return "triton is not installed"
    if dtype != torch.float32:
        return f"float32 only, got {dtype}"
    nh = len(weights) - 1
    if not 1 <= nh <= MAX_HIDDEN_LAYERS:
        return f"1..{MAX_HIDDEN_LAYERS} hidden layers, got {nh}"
    widths = {w.shape[2] for w in weights[:-1]}
    H = weights[0].shape[2]
    if len(widths) != 1 or H not in (16, 32, 64, 128, 256):
        return f"all hidden widths equal and one of 16..256 (powers of two), got {sorted(widths)}"
    if weights[0].shape[1] > 256:
        return f"at most 128 frequencies (d <= 256), got d = {weights[0].shape[1]}"
    if weights[-1].shape[2] != 1:
        return f"one output (out_features = 1), got {weights[-1].shape[2]}"
    return ""


if triton is not None:

    @triton.jit
    def act_fn(z, ACT: tl.constexpr):
        if ACT == 0:
            return tl.maximum(z, 0.0)
        elif ACT == 1:
            return 2.0 * tl.sigmoid(2.0 * z) - 1.0
        elif ACT == 2:
            return z * tl.sigmoid(z)
        else:
            return tl.sin(z)

    @triton.jit
    def act_grad_fn(z, a, ACT: tl.constexpr):
        """act'(z) given z and a = act(z)."""
        if ACT == 0:
            return tl.where(z > 0.0, 1.0, 0.0)
        elif ACT == 1:
            return 1.0 - a * a
        elif ACT == 2:
            s = tl.sigmoid(z)
            return s * (1.0 + z * (1.0 - s))
        else:
            return tl.cos(z)

    @triton.jit
    def tile_dot(a, b, TF32: tl.constexpr):
        if TF32:
            return tl.dot(a, b, input_precision="tf32")
        else:
            return tl.dot(a, b, input_precision="ieee")

    @triton.jit
    def pe_argument(X_ptr, F_ptr, rn, mn, rm, MP: tl.constexpr, D: tl.constexpr):
        """u[n, j] = sum_i x[n, i] F[i, j] + F[D, j] for a tile of D-dimensional points (coordinate order)."""
        u = tl.load(X_ptr + rn * D, mask=mn, other=0.0)[:, None] * tl.load(F_ptr + rm)[None, :]
        for i in tl.static_range(1, D):
            u += tl.load(X_ptr + rn * D + i, mask=mn, other=0.0)[:, None] * tl.load(F_ptr + i * MP + rm)[None, :]
        return u + tl.load(F_ptr + D * MP + rm)[None, :]

    @triton.jit
    def forward_tile(N, BLOCK_N: tl.constexpr):
        """A forward program's place in its (tiles, B) grid: (tile index, model b, points rn, mask mn)."""
        pid_n = tl.program_id(0)
        rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        return pid_n, tl.program_id(1).to(tl.int64), rn, rn < N

    # The backward kernels unroll hidden layers 2..4 by hand (Triton has no lists of tensors). Layer l
    # counts from 0 (W1s/W1c), so w2 is l = 1; the helpers do nothing for a layer the model lacks
    # (l >= NH, a constexpr test), so it compiles away.

    @triton.jit
    def hidden_layer(WH_ptr, BH_ptr, b, l: tl.constexpr, NH: tl.constexpr, H: tl.constexpr):
        """Model b's hidden layer l (W [H, H], bias [H]); placeholders, never read, when l >= NH."""
        if l < NH:
            rh = tl.arange(0, H)
            hh = rh[:, None] * H + rh[None, :]
            return tl.load(WH_ptr + (b * (NH - 1) + l - 1) * H * H + hh), tl.load(BH_ptr + (b * NH + l) * H + rh)
        else:
            return 0.0, 0.0

    @triton.jit
    def model_params(W1S_ptr, W1C_ptr, WH_ptr, BH_ptr, WO_ptr, BO_ptr, b, MP: tl.constexpr, H: tl.constexpr,
                     NH: tl.constexpr):
        """Model b's parameters in `pack_model`'s layout: (w1s, w1c, b1, w2, b2, w3, b3, w4, b4, wo, bo)."""
        rm = tl.arange(0, MP)
        rh = tl.arange(0, H)
        w2, b2 = hidden_layer(WH_ptr, BH_ptr, b, 1, NH, H)
        w3, b3 = hidden_layer(WH_ptr, BH_ptr, b, 2, NH, H)
        w4, b4 = hidden_layer(WH_ptr, BH_ptr, b, 3, NH, H)
        return (tl.load(W1S_ptr + b * MP * H + rm[:, None] * H + rh[None, :]),
                tl.load(W1C_ptr + b * MP * H + rm[:, None] * H + rh[None, :]), tl.load(BH_ptr + b * NH * H + rh),
                w2, b2, w3, b3, w4, b4, tl.load(WO_ptr + b * H + rh), tl.load(BO_ptr + b))

    @triton.jit
    def zero_grads(MP: tl.constexpr, H: tl.constexpr, BLOCK_N: tl.constexpr):
        """Zeroed gradient accumulators (g1s, g1c, g1b, g2w, g2b, g3w, g3b, g4w, g4b, gwo, gbo [BLOCK_N]);
        real tensors even for layers the model lacks, as a loop may carry them (they compile away). Tensors
        are values, so the accumulators can start from one zeros tensor."""
        hw = tl.zeros([H, H], tl.float32)
        hb = tl.zeros([H], tl.float32)
        return (tl.zeros([MP, H], tl.float32), tl.zeros([MP, H], tl.float32), hb, hw, hb, hw, hb, hw, hb, hb,
                tl.zeros([BLOCK_N], tl.float32))

    @triton.jit
    def _store_hidden(GWH_ptr, GBH_ptr, p, gw, gb, l: tl.constexpr, NH: tl.constexpr, H: tl.constexpr):
        if l < NH:
            rh = tl.arange(0, H)
            hh = rh[:, None] * H + rh[None, :]
            tl.store(GWH_ptr + (p * (NH - 1) + l - 1) * H * H + hh, gw)
            tl.store(GBH_ptr + (p * NH + l) * H + rh, gb)

    @triton.jit
    def store_grads(GW1S_ptr, GW1C_ptr, GWH_ptr, GBH_ptr, GWO_ptr, GBO_ptr, p, g1s, g1c, g1b, g2w, g2b, g3w, g3b,
                    g4w, g4b, gwo, gbo, MP: tl.constexpr, H: tl.constexpr, NH: tl.constexpr):
        """Store `zero_grads`' accumulators in partial slot p of the `gradient_partials` buffers."""
        rm = tl.arange(0, MP)
        rh = tl.arange(0, H)
        tl.store(GBO_ptr + p, tl.sum(gbo, axis=0))
        tl.store(GWO_ptr + p * H + rh, gwo)
        tl.store(GW1S_ptr + p * MP * H + rm[:, None] * H + rh[None, :], g1s)
        tl.store(GW1C_ptr + p * MP * H + rm[:, None] * H + rh[None, :], g1c)
        tl.store(GBH_ptr + p * NH * H + rh, g1b)
        _store_hidden(GWH_ptr, GBH_ptr, p, g2w, g2b, 1, NH, H)
        _store_hidden(GWH_ptr, GBH_ptr, p, g3w, g3b, 2, NH, H)
        _store_hidden(GWH_ptr, GBH_ptr, p, g4w, g4b, 3, NH, H)

    @triton.jit
    def _hidden_fwd(a, w, bias, l: tl.constexpr, NH: tl.constexpr, ACT: tl.constexpr, TF32: tl.constexpr):
        """Hidden layer l on the previous activations a: (z, act(z)); past the model's last layer a passes
        through, so the last returned activations always feed the output layer."""
        if l < NH:
            z = tile_dot(a, w, TF32) + bias[None, :]
            return z, act_fn(z, ACT)
        else:
            return 0.0, a

    @triton.jit
    def _fourier_mlp_fwd_kernel(X_ptr, F_ptr, W1S_ptr, W1C_ptr, WH_ptr, BH_ptr, WO_ptr, BO_ptr, Y_ptr,
                                N, stride_xb, MP: tl.constexpr, H: tl.constexpr, NH: tl.constexpr,
                                ACT: tl.constexpr, TF32: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
        """y[b, n] = wo_b . act(... act(sin(u) W1s_b + cos(u) W1c_b + b1_b) ...) + bo_b,
        u = x[b, n] @ F[:D] + F[D]  (W1s/W1c: the sin/cos rows of W_1, zero-padded to MP)."""
        _, b, rn, mn = forward_tile(N, BLOCK_N)
        rm = tl.arange(0, MP)
        rh = tl.arange(0, H)
        u = pe_argument(X_ptr + b * stride_xb, F_ptr, rn, mn, rm, MP, D)
        w1s = tl.load(W1S_ptr + b * MP * H + rm[:, None] * H + rh[None, :])
        w1c = tl.load(W1C_ptr + b * MP * H + rm[:, None] * H + rh[None, :])
        h = tile_dot(tl.sin(u), w1s, TF32) + tile_dot(tl.cos(u), w1c, TF32) + tl.load(BH_ptr + b * NH * H + rh)[None, :]
        h = act_fn(h, ACT)
        for l in tl.static_range(1, NH):
            w, bias = hidden_layer(WH_ptr, BH_ptr, b, l, NH, H)
            _, h = _hidden_fwd(h, w, bias, l, NH, ACT, TF32)
        y = tl.sum(h * tl.load(WO_ptr + b * H + rh)[None, :], axis=1) + tl.load(BO_ptr + b)
        tl.store(Y_ptr + b * N + rn, y, mask=mn)

    @triton.jit
    def _hidden_bwd(da, z, a, prev, w, gw, gb, l: tl.constexpr, NH: tl.constexpr, ACT: tl.constexpr,
                    TF32: tl.constexpr):
        """Hidden layer l's backward over a tile: (da_prev, gw + dW, gb + db); a pass-through past the last layer."""
        if l < NH:
            dz = da * act_grad_fn(z, a, ACT)
            return tile_dot(dz, tl.trans(w), TF32), gw + tile_dot(tl.trans(prev), dz, TF32), gb + tl.sum(dz, axis=0)
        else:
            return da, gw, gb

    @triton.jit
    def _fourier_mlp_bwd_kernel(X_ptr, AUX_ptr, F_ptr, W1S_ptr, W1C_ptr, WH_ptr, BH_ptr, WO_ptr, BO_ptr,
                                LOSS_ptr, GW1S_ptr, GW1C_ptr, GWH_ptr, GBH_ptr, GWO_ptr, GBO_ptr, DX_ptr,
                                N, C, TILES, stride_xb, inv_n,
                                MP: tl.constexpr, H: tl.constexpr, NH: tl.constexpr, ACT: tl.constexpr,
                                MODE: tl.constexpr, NEED_DX: tl.constexpr, TF32: tl.constexpr,
                                BLOCK_N: tl.constexpr, D: tl.constexpr):
        """Backward of model b over chunk c (TILES tiles of BLOCK_N points), forward recomputed.

        MODE 1: g = 2 (y - t) / N with t = AUX (MSE), loss partial stored; MODE 2: g = AUX.
        dz_l = da_l * act'(z_l), dW_l += a_{l-1}^T dz_l, db_l += sum dz_l, da_{l-1} = dz_l W_l^T;
        dx = sum_j (dh_sin_j cos u_j - dh_cos_j sin u_j) w_j when NEED_DX (D components).
        """
        b = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1).to(tl.int64)
        rm = tl.arange(0, MP)
        w1s, w1c, b1, w2, b2, w3, b3, w4, b4, wo, bo = model_params(W1S_ptr, W1C_ptr, WH_ptr, BH_ptr, WO_ptr, BO_ptr,
                                                                   b, MP, H, NH)
        g1s, g1c, g1b, g2w, g2b, g3w, g3b, g4w, g4b, gwo, gbo = zero_grads(MP, H, BLOCK_N)
        lacc = tl.zeros([BLOCK_N], tl.float32)
        for it in range(TILES):
            rn = (c * TILES + it) * BLOCK_N + tl.arange(0, BLOCK_N)
            mn = rn < N
            u = pe_argument(X_ptr + b * stride_xb, F_ptr, rn, mn, rm, MP, D)
            s = tl.sin(u)
            co = tl.cos(u)
            z1 = tile_dot(s, w1s, TF32) + tile_dot(co, w1c, TF32) + b1[None, :]
            a1 = act_fn(z1, ACT)
            z2, a2 = _hidden_fwd(a1, w2, b2, 1, NH, ACT, TF32)
            z3, a3 = _hidden_fwd(a2, w3, b3, 2, NH, ACT, TF32)
            z4, a4 = _hidden_fwd(a3, w4, b4, 3, NH, ACT, TF32)
            y = tl.sum(a4 * wo[None, :], axis=1) + bo
            if MODE == 1:
                t = tl.load(AUX_ptr + b * N + rn, mask=mn, other=0.0)
                e = tl.where(mn, y - t, 0.0)
                lacc += e * e
                g = 2.0 * inv_n * e
            else:
                g = tl.load(AUX_ptr + b * N + rn, mask=mn, other=0.0)
            gwo += tl.sum(a4 * g[:, None], axis=0)
            gbo += g
            da = g[:, None] * wo[None, :]
            da, g4w, g4b = _hidden_bwd(da, z4, a4, a3, w4, g4w, g4b, 3, NH, ACT, TF32)
            da, g3w, g3b = _hidden_bwd(da, z3, a3, a2, w3, g3w, g3b, 2, NH, ACT, TF32)
            da, g2w, g2b = _hidden_bwd(da, z2, a2, a1, w2, g2w, g2b, 1, NH, ACT, TF32)
            dz = da * act_grad_fn(z1, a1, ACT)
            g1s += tile_dot(tl.trans(s), dz, TF32)
            g1c += tile_dot(tl.trans(co), dz, TF32)
            g1b += tl.sum(dz, axis=0)
            if NEED_DX:
                du = tile_dot(dz, tl.trans(w1s), TF32) * co - tile_dot(dz, tl.trans(w1c), TF32) * s
                for i in tl.static_range(D):
                    tl.store(DX_ptr + (b * N + rn) * D + i, tl.sum(du * tl.load(F_ptr + i * MP + rm)[None, :], axis=1),
                             mask=mn)
        p = b * C + c  # partial slot
        tl.store(LOSS_ptr + p, tl.sum(lacc, axis=0))
        store_grads(GW1S_ptr, GW1C_ptr, GWH_ptr, GBH_ptr, GWO_ptr, GBO_ptr, p, g1s, g1c, g1b, g2w, g2b, g3w, g3b, g4w,
                    g4b, gwo, gbo, MP, H, NH)

def pack_model(freq, phase, weights, biases):
    """Kernel layout: F [D + 1, MP] (frequency coordinates f_0..f_{D-1}, then phases; zero-padded),
    W1 split into sin/cos rows."""
    m, D = freq.shape
    MP = max(16, triton.next_power_of_2(m))
    B, H, NH = weights[0].shape[0], weights[0].shape[2], len(weights) - 1
    F = freq.new_zeros(D + 1, MP)
    F[:D, :m], F[D, :m] = freq.T, phase
    w1s = freq.new_zeros(B, MP, H)
    w1c = freq.new_zeros(B, MP, H)
    w1s[:, :m], w1c[:, :m] = weights[0][:, 0::2], weights[0][:, 1::2]
    wh = torch.stack(list(weights[1:NH]), 1).contiguous() if NH > 1 else freq.new_zeros(1)
    bh = torch.stack(list(biases[:NH]), 1).contiguous()
    wo = weights[-1][:, :, 0].contiguous()
    bo = biases[-1][:, 0].contiguous()
    return dict(F=F, w1s=w1s, w1c=w1c, wh=wh, bh=bh, wo=wo, bo=bo, MP=MP, H=H, NH=NH, B=B, m=m, D=D)


def x_stride(x, N):
    return 0 if x.ndim == 2 else N * x.shape[-1]


def fourier_mlp_fwd(x, freq, phase, weights, biases, activation):
    """y: [B, N] (see reference.fourier_mlp)."""
    k = pack_model(freq, phase, weights, biases)
    B, N = k["B"], x.shape[-2]
    y = x.new_empty(B, N)
    grid = (triton.cdiv(N, BLOCK_N), B)
    launch(_fourier_mlp_fwd_kernel, grid, x, k["F"], k["w1s"], k["w1c"], k["wh"], k["bh"], k["wo"], k["bo"], y, N,
           x_stride(x, N), name="forward", MP=k["MP"], H=k["H"], NH=k["NH"], ACT=ACT_CODES[activation],
           TF32=ALLOW_TF32, BLOCK_N=BLOCK_N, D=k["D"])
    return y


def point_chunks(B, N, block=BLOCK_N):
    """Point chunks per model: enough programs to fill a GPU, fixed by (B, N) alone (deterministic)."""
    tiles = triton.cdiv(N, block)
    C = min(tiles, max(1, triton.cdiv(512, B)))
    per = triton.cdiv(tiles, C)
    return triton.cdiv(tiles, per), per


def _bwd(mode, aux, x, freq, phase, weights, biases, activation, need_dx):
    k = pack_model(freq, phase, weights, biases)
    B, N, MP, H, NH = k["B"], x.shape[-2], k["MP"], k["H"], k["NH"]
    C, per = point_chunks(B, N)
    loss = x.new_zeros(B, C)
    g1s, g1c, gwh, gbh, gwo, gbo = gradient_partials(k, C, x)
    dx = x.new_zeros(B, N, k["D"]) if need_dx else x.new_zeros(1)
    launch(_fourier_mlp_bwd_kernel, (B, C),
        x, aux.contiguous(), k["F"], k["w1s"], k["w1c"], k["wh"], k["bh"], k["wo"], k["bo"],
        loss, g1s, g1c, gwh, gbh, gwo, gbo, dx, N, C, per, x_stride(x, N), 1.0 / N,
        name="backward", MP=MP, H=H, NH=NH, ACT=ACT_CODES[activation], MODE=mode, NEED_DX=need_dx, TF32=ALLOW_TF32,
        BLOCK_N=BLOCK_N, D=k["D"], num_warps=4 if H <= 32 else 8)
    dw, db = sum_partials(k, g1s, g1c, gwh, gbh, gwo, gbo)
    return loss.sum(1) / N, (dx if need_dx else None), dw, db


def gradient_partials(k, C, like):
    """Zeroed per-(model, chunk) gradient slots in the kernels' layout: g1s, g1c [B, C, MP, H],
    gwh [B, C, NH-1, H, H] (a dummy when NH = 1), gbh [B, C, NH, H], gwo [B, C, H], gbo [B, C]."""
    B, MP, H, NH = k["B"], k["MP"], k["H"], k["NH"]
    new = like.new_zeros
    gwh = new(B, C, NH - 1, H, H) if NH > 1 else new(1)
    return new(B, C, MP, H), new(B, C, MP, H), gwh, new(B, C, NH, H), new(B, C, H), new(B, C)


def sum_partials(k, g1s, g1c, gwh, gbh, gwo, gbo):
    """(dW list, db list) from the `gradient_partials` slots, summed over chunks in a fixed order
    (deterministic); W1's sin/cos rows interleaved back."""
    B, H, NH, m = k["B"], k["H"], k["NH"], k["m"]
    g1s, g1c, gbh = g1s.sum(1), g1c.sum(1), gbh.sum(1)
    dw0 = torch.stack((g1s[:, :m], g1c[:, :m]), dim=2).reshape(B, 2 * m, H)
    dw = [dw0] + ([gwh.sum(1)[:, l] for l in range(NH - 1)] if NH > 1 else []) + [gwo.sum(1)[:, :, None]]
    db = [gbh[:, l] for l in range(NH)] + [gbo.sum(1)[:, None]]
    dw = [t.clone(memory_format=torch.contiguous_format) for t in dw]  # no aliasing between outputs
    db = [t.clone(memory_format=torch.contiguous_format) for t in db]
    return dw, db


def fourier_mlp_bwd(grad, x, freq, phase, weights, biases, activation, need_dx):
    """Cotangent grad: [B, N] -> (dx [B, N, D] per model or None, dW list, db list)."""
    _, dx, dw, db = _bwd(2, grad, x, freq, phase, weights, biases, activation, need_dx)
    return dx, dw, db


def fourier_mlp_train_step(x, targets, freq, phase, weights, biases, activation):
    """(loss [B], dW list, db list) of the per-model MSE."""
    loss, _, dw, db = _bwd(1, targets, x, freq, phase, weights, biases, activation, False)
    return loss, dw, db
