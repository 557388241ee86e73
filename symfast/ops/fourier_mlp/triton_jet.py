"""Triton kernels for the second-order fused PE+MLP: f, its input gradient g = grad_x f, and the
gradients of losses on both (CUDA, or CPU under TRITON_INTERPRET=1).

Supported models: those of `triton.unsupported` (float32, 1..4 hidden layers of one width H in
16..256, m <= 128 frequencies, one output, D = 2 or 3); the ops refuse others.

Forward-mode tangents ride beside the values (reference: reference.fourier_mlp_jet). A tile of
BLOCK_N points carries its D tangents as one [DP * BLOCK_N, H] block, row d * BLOCK_N + n for
point n and direction d (DP = D rounded up to a power of two; the padded direction has zero
frequencies, so its tangents are zero), so each layer's tangents take one tl.dot:
    encoding   t_sin = cos(u) F_d,  t_cos = -sin(u) F_d     (analytic, same phases u as the values)
    layer      zd_d = t_d @ W,  t'_d = act'(z) zd_d
    output     f = a_L . w_o + b_o,  g_d = t_L,d . w_o

Kernels:
  _fourier_mlp_jet_fwd_kernel: grid (tiles, B); writes f [B, N] and g [B, N, D].
  _fourier_mlp_jet_bwd_kernel: grid (B, C chunks), the layout of triton._fourier_mlp_bwd_kernel:
    each program recomputes its tiles' jet in registers and accumulates the gradients of
    sum(cf f) + sum(cg g) (reference.fourier_mlp_jet_vjp) per hidden layer:
        cz = act'(z) ch + act''(z) sum_d ct_d zd_d,   czd_d = act'(z) ct_d,
        dW += h^T cz + sum_d t_d^T czd_d,   ch <- cz W^T,   ct_d <- czd_d W^T;
    MODE 2 reads cf, cg; MODE 3 forms them from the eikonal step's loss (reference.eikonal_cotangents)
    and stores per-chunk sums of its three terms. Partials [B, C, ...] are summed over C in PyTorch
    in a fixed order (deterministic, no atomics).
The tangent block holds D + 1 tiles per layer, hence a smaller tile than the first-order kernels':
compiled for sm_90, the backward of a 3-D model with 4 hidden layers of width 64 asks for 275 KB of
shared memory at BLOCK_N = 32 (an H100 block has 227 KB) and 172 KB at 16. The largest models
`unsupported` lets through still do not fit (4 hidden layers of width 256, 128 frequencies, D = 3:
345 KB for the forward alone); a launch the GPU refuses raises `DoesNotFit`, and the ops run the
reference instead with a one-time RuntimeWarning (a kernel's shared memory is known only once
it is compiled for the GPU at hand).
"""
from __future__ import annotations

from symfast.ops.fourier_mlp import triton as tri
from symfast.ops.fourier_mlp.triton import triton

if triton is not None:
    import triton.language as tl

    from symfast.ops.fourier_mlp.triton import (act_fn, act_grad_fn, forward_tile, hidden_layer, model_params,
                                                pe_argument, store_grads, tile_dot, zero_grads)

BLOCK_N = 16


if triton is not None:

    @triton.jit
    def _act_curv(z, a, ACT: tl.constexpr):
        """act''(z) given z and a = act(z) (reference.ACTIVATION_CURVATURES)."""
        if ACT == 0:
            return tl.zeros_like(z)
        elif ACT == 1:
            return -2.0 * a * (1.0 - a * a)
        elif ACT == 2:
            s = tl.sigmoid(z)
            return s * (1.0 - s) * (2.0 + z * (1.0 - 2.0 * s))
        else:
            return -a

    @triton.jit
    def _jet_encoding(X_ptr, F_ptr, rn, mn, rm, MP: tl.constexpr, D: tl.constexpr, DP: tl.constexpr,
                      BLOCK_N: tl.constexpr):
        """(sin u, cos u [BLOCK_N, MP], their tangents t_sin, t_cos [DP * BLOCK_N, MP], F_d rows [DP, MP])."""
        u = pe_argument(X_ptr, F_ptr, rn, mn, rm, MP, D)
        s = tl.sin(u)
        c = tl.cos(u)
        rd = tl.arange(0, DP)
        fd = tl.load(F_ptr + rd[:, None] * MP + rm[None, :], mask=(rd < D)[:, None], other=0.0)
        ts = tl.reshape(c[None, :, :] * fd[:, None, :], [DP * BLOCK_N, MP])
        tc = tl.reshape(-s[None, :, :] * fd[:, None, :], [DP * BLOCK_N, MP])
        return s, c, ts, tc, fd

    @triton.jit
    def _jet_act(z, zd, ACT: tl.constexpr, DP: tl.constexpr, BLOCK_N: tl.constexpr, H: tl.constexpr):
        """(a, t) = (act(z), act'(z) zd_d for every direction d)."""
        a = act_fn(z, ACT)
        t = tl.reshape(tl.reshape(zd, [DP, BLOCK_N, H]) * act_grad_fn(z, a, ACT)[None, :, :], [DP * BLOCK_N, H])
        return a, t

    @triton.jit
    def _jet_act_bwd(ch, ct, z, zd, a, ACT: tl.constexpr, DP: tl.constexpr, BLOCK_N: tl.constexpr,
                     H: tl.constexpr):
        """Through one activation: (cz, czd) from the cotangents ch of a and ct of its tangents."""
        s1 = act_grad_fn(z, a, ACT)
        ct3 = tl.reshape(ct, [DP, BLOCK_N, H])
        cz = s1 * ch + _act_curv(z, a, ACT) * tl.sum(ct3 * tl.reshape(zd, [DP, BLOCK_N, H]), axis=0)
        return cz, tl.reshape(ct3 * s1[None, :, :], [DP * BLOCK_N, H])

    @triton.jit
    def _jet_hidden_fwd(a, t, w, bias, l: tl.constexpr, NH: tl.constexpr, ACT: tl.constexpr, TF32: tl.constexpr,
                        DP: tl.constexpr, BLOCK_N: tl.constexpr, H: tl.constexpr):
        """Hidden layer l on the previous activations a and their tangents t: (z, zd, a', t'); past the
        model's last layer (l >= NH) a and t pass through (`triton` unrolls the layers so)."""
        if l < NH:
            z = tile_dot(a, w, TF32) + bias[None, :]
            zd = tile_dot(t, w, TF32)
            an, tn = _jet_act(z, zd, ACT, DP, BLOCK_N, H)
            return z, zd, an, tn
        else:
            return 0.0, 0.0, a, t

    @triton.jit
    def _jet_hidden_bwd(ch, ct, z, zd, a, h, t, w, gw, gb, l: tl.constexpr, NH: tl.constexpr, ACT: tl.constexpr,
                        TF32: tl.constexpr, DP: tl.constexpr, BLOCK_N: tl.constexpr, H: tl.constexpr):
        """Hidden layer l (h -> a = act(h W + b), input tangents t) backward: (ch_prev, ct_prev, gw + dW,
        gb + db); a pass-through past the model's last layer."""
        if l < NH:
            cz, czd = _jet_act_bwd(ch, ct, z, zd, a, ACT, DP, BLOCK_N, H)
            wt = tl.trans(w)
            return (tile_dot(cz, wt, TF32), tile_dot(czd, wt, TF32),
                    gw + (tile_dot(tl.trans(h), cz, TF32) + tile_dot(tl.trans(t), czd, TF32)), gb + tl.sum(cz, axis=0))
        else:
            return ch, ct, gw, gb

    @triton.jit
    def _fourier_mlp_jet_fwd_kernel(X_ptr, F_ptr, W1S_ptr, W1C_ptr, WH_ptr, BH_ptr, WO_ptr, BO_ptr, FO_ptr, GO_ptr,
                                    N, stride_xb, MP: tl.constexpr, H: tl.constexpr, NH: tl.constexpr,
                                    ACT: tl.constexpr, TF32: tl.constexpr, BLOCK_N: tl.constexpr,
                                    D: tl.constexpr, DP: tl.constexpr):
        """f[b, n] and g[b, n, :] = grad_x f of one tile (forward-mode tangents, see the module docstring)."""
        pid_n, b, rn, mn = forward_tile(N, BLOCK_N)
        rm = tl.arange(0, MP)
        rh = tl.arange(0, H)
        rr = tl.arange(0, DP * BLOCK_N)  # tangent rows: direction rr // BLOCK_N of point rr % BLOCK_N
        rd_row = rr // BLOCK_N
        rn_row = pid_n * BLOCK_N + rr % BLOCK_N
        s, c, ts, tc, fd = _jet_encoding(X_ptr + b * stride_xb, F_ptr, rn, mn, rm, MP, D, DP, BLOCK_N)
        w1s = tl.load(W1S_ptr + b * MP * H + rm[:, None] * H + rh[None, :])
        w1c = tl.load(W1C_ptr + b * MP * H + rm[:, None] * H + rh[None, :])
        z = tile_dot(s, w1s, TF32) + tile_dot(c, w1c, TF32) + tl.load(BH_ptr + b * NH * H + rh)[None, :]
        a, t = _jet_act(z, tile_dot(ts, w1s, TF32) + tile_dot(tc, w1c, TF32), ACT, DP, BLOCK_N, H)
        for l in tl.static_range(1, NH):
            w, bias = hidden_layer(WH_ptr, BH_ptr, b, l, NH, H)
            _, _, a, t = _jet_hidden_fwd(a, t, w, bias, l, NH, ACT, TF32, DP, BLOCK_N, H)
        wo = tl.load(WO_ptr + b * H + rh)
        tl.store(FO_ptr + b * N + rn, tl.sum(a * wo[None, :], axis=1) + tl.load(BO_ptr + b), mask=mn)
        tl.store(GO_ptr + (b * N + rn_row) * D + rd_row, tl.sum(t * wo[None, :], axis=1),
                 mask=(rn_row < N) & (rd_row < D))

    @triton.jit
    def _fourier_mlp_jet_bwd_kernel(X_ptr, CF_ptr, CG_ptr, F_ptr, W1S_ptr, W1C_ptr, WH_ptr, BH_ptr, WO_ptr,
                                    BO_ptr, FO_ptr, GO_ptr, TERMS_ptr, GW1S_ptr, GW1C_ptr, GWH_ptr, GBH_ptr,
                                    GWO_ptr, GBO_ptr, DX_ptr, N, C, TILES, stride_xb, inv_n, eik_w, nrm_w,
                                    MP: tl.constexpr, H: tl.constexpr, NH: tl.constexpr, ACT: tl.constexpr,
                                    MODE: tl.constexpr, NORMALS: tl.constexpr, NEED_DX: tl.constexpr,
                                    TF32: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr,
                                    DP: tl.constexpr):
        """Gradients of model b over chunk c (TILES tiles of BLOCK_N points), jet recomputed.

        MODE 2: cf = CF [B, N], cg = CG [B, N, D]; f and g are stored (the ops' overflow rule reads them).
        MODE 3: CF holds the targets and CG the normals (NORMALS); cf = 2 (f - t) / N,
        cg = eik_w 2 (|g| - 1) / |g| g / N + nrm_w 2 (g - n) / N, and the chunk's sums of
        (f - t)^2, (|g| - 1)^2 and |g - n|^2 go to TERMS [B, C, 3].
        NEED_DX: dx = sum_j du_j F[:, j] with du = ch_sin cos u - ch_cos sin u
        - sum_d F_d (ct_sin,d sin u + ct_cos,d cos u) (D components).
        """
        b = tl.program_id(0).to(tl.int64)
        c = tl.program_id(1).to(tl.int64)
        rm = tl.arange(0, MP)
        rr = tl.arange(0, DP * BLOCK_N)
        rd_row = rr // BLOCK_N
        w1s, w1c, b1, w2, b2, w3, b3, w4, b4, wo, bo = model_params(W1S_ptr, W1C_ptr, WH_ptr, BH_ptr, WO_ptr, BO_ptr,
                                                                   b, MP, H, NH)
        g1s, g1c, g1b, g2w, g2b, g3w, g3b, g4w, g4b, gwo, gbo = zero_grads(MP, H, BLOCK_N)
        l_mse = tl.zeros([BLOCK_N], tl.float32)
        l_eik = tl.zeros([BLOCK_N], tl.float32)
        l_nrm = tl.zeros([DP * BLOCK_N], tl.float32)
        for it in range(TILES):
            base = (c * TILES + it) * BLOCK_N
            rn = base + tl.arange(0, BLOCK_N)
            mn = rn < N
            rn_row = base + rr % BLOCK_N
            mr = (rn_row < N) & (rd_row < D)
            s, co, ts, tc, fd = _jet_encoding(X_ptr + b * stride_xb, F_ptr, rn, mn, rm, MP, D, DP, BLOCK_N)
            z1 = tile_dot(s, w1s, TF32) + tile_dot(co, w1c, TF32) + b1[None, :]
            zd1 = tile_dot(ts, w1s, TF32) + tile_dot(tc, w1c, TF32)
            a1, t1 = _jet_act(z1, zd1, ACT, DP, BLOCK_N, H)
            z2, zd2, a2, t2 = _jet_hidden_fwd(a1, t1, w2, b2, 1, NH, ACT, TF32, DP, BLOCK_N, H)
            z3, zd3, a3, t3 = _jet_hidden_fwd(a2, t2, w3, b3, 2, NH, ACT, TF32, DP, BLOCK_N, H)
            z4, zd4, a4, t4 = _jet_hidden_fwd(a3, t3, w4, b4, 3, NH, ACT, TF32, DP, BLOCK_N, H)
            f = tl.sum(a4 * wo[None, :], axis=1) + bo
            g = tl.sum(t4 * wo[None, :], axis=1)
            if MODE == 2:
                tl.store(FO_ptr + b * N + rn, f, mask=mn)
                tl.store(GO_ptr + (b * N + rn_row) * D + rd_row, g, mask=mr)
                cf = tl.load(CF_ptr + b * N + rn, mask=mn, other=0.0)
                cg = tl.load(CG_ptr + (b * N + rn_row) * D + rd_row, mask=mr, other=0.0)
            else:
                e = tl.where(mn, f - tl.load(CF_ptr + b * N + rn, mask=mn, other=0.0), 0.0)
                l_mse += e * e
                cf = 2.0 * inv_n * e
                g2d = tl.reshape(tl.where(mr, g, 0.0), [DP, BLOCK_N])
                norm = tl.sqrt(tl.sum(g2d * g2d, axis=0))
                r = tl.where(mn, norm - 1.0, 0.0)
                l_eik += r * r
                coef = tl.where(norm > 0.0, r / tl.where(norm > 0.0, norm, 1.0), 0.0)  # d|g|/dg = g/|g|, 0 at 0
                cg = tl.reshape(2.0 * inv_n * eik_w * coef[None, :] * g2d, [DP * BLOCK_N])
                if NORMALS:
                    dn = tl.where(mr, g - tl.load(CG_ptr + (b * N + rn_row) * D + rd_row, mask=mr, other=0.0), 0.0)
                    l_nrm += dn * dn
                    cg += 2.0 * inv_n * nrm_w * dn
            gwo += tl.sum(a4 * cf[:, None], axis=0) + tl.sum(t4 * cg[:, None], axis=0)
            gbo += cf
            ch = cf[:, None] * wo[None, :]
            ct = cg[:, None] * wo[None, :]
            ch, ct, g4w, g4b = _jet_hidden_bwd(ch, ct, z4, zd4, a4, a3, t3, w4, g4w, g4b, 3, NH, ACT, TF32,
                                               DP, BLOCK_N, H)
            ch, ct, g3w, g3b = _jet_hidden_bwd(ch, ct, z3, zd3, a3, a2, t2, w3, g3w, g3b, 2, NH, ACT, TF32,
                                               DP, BLOCK_N, H)
            ch, ct, g2w, g2b = _jet_hidden_bwd(ch, ct, z2, zd2, a2, a1, t1, w2, g2w, g2b, 1, NH, ACT, TF32,
                                               DP, BLOCK_N, H)
            cz, czd = _jet_act_bwd(ch, ct, z1, zd1, a1, ACT, DP, BLOCK_N, H)
            g1s += tile_dot(tl.trans(s), cz, TF32) + tile_dot(tl.trans(ts), czd, TF32)
            g1c += tile_dot(tl.trans(co), cz, TF32) + tile_dot(tl.trans(tc), czd, TF32)
            g1b += tl.sum(cz, axis=0)
            if NEED_DX:
                w1st = tl.trans(w1s)
                w1ct = tl.trans(w1c)
                cts = tl.reshape(tile_dot(czd, w1st, TF32), [DP, BLOCK_N, MP])
                ctc = tl.reshape(tile_dot(czd, w1ct, TF32), [DP, BLOCK_N, MP])
                du = tile_dot(cz, w1st, TF32) * co - tile_dot(cz, w1ct, TF32) * s \
                    - tl.sum(fd[:, None, :] * (cts * s[None, :, :] + ctc * co[None, :, :]), axis=0)
                for i in tl.static_range(D):
                    tl.store(DX_ptr + (b * N + rn) * D + i, tl.sum(du * tl.load(F_ptr + i * MP + rm)[None, :], axis=1),
                             mask=mn)
        p = b * C + c  # partial slot
        if MODE == 3:
            tl.store(TERMS_ptr + p * 3, tl.sum(l_mse, axis=0))
            tl.store(TERMS_ptr + p * 3 + 1, tl.sum(l_eik, axis=0))
            tl.store(TERMS_ptr + p * 3 + 2, tl.sum(l_nrm, axis=0))
        store_grads(GW1S_ptr, GW1C_ptr, GWH_ptr, GBH_ptr, GWO_ptr, GBO_ptr, p, g1s, g1c, g1b, g2w, g2b, g3w, g3b, g4w,
                    g4b, gwo, gbo, MP, H, NH)


def _dp(D: int) -> int:
    return 2 if D <= 2 else 4


def fourier_mlp_jet(x, freq, phase, weights, biases, activation):
    """(f [B, N], g [B, N, D]) (see reference.fourier_mlp_jet)."""
    k = tri.pack_model(freq, phase, weights, biases)
    x = x.contiguous()
    B, N, D = k["B"], x.shape[-2], k["D"]
    f, g = x.new_empty(B, N), x.new_empty(B, N, D)
    tri.launch(_fourier_mlp_jet_fwd_kernel, (triton.cdiv(N, BLOCK_N), B),
        x, k["F"], k["w1s"], k["w1c"], k["wh"], k["bh"], k["wo"], k["bo"], f, g, N, tri.x_stride(x, N),
        name="jet forward", MP=k["MP"], H=k["H"], NH=k["NH"], ACT=tri.ACT_CODES[activation], TF32=tri.ALLOW_TF32,
        BLOCK_N=BLOCK_N, D=D, DP=_dp(D), num_warps=4 if k["H"] <= 32 else 8)
    return f, g


def _bwd(mode, aux_f, aux_g, x, freq, phase, weights, biases, activation, need_dx, eikonal=0.0, normal=0.0):
    k = tri.pack_model(freq, phase, weights, biases)
    x = x.contiguous()
    B, N, D, H = k["B"], x.shape[-2], k["D"], k["H"]
    C, per = tri.point_chunks(B, N, BLOCK_N)
    g1s, g1c, gwh, gbh, gwo, gbo = tri.gradient_partials(k, C, x)
    terms = x.new_zeros(B, C, 3)
    f, g = (x.new_empty(B, N), x.new_empty(B, N, D)) if mode == 2 else (x.new_zeros(1), x.new_zeros(1))
    dx = x.new_zeros(B, N, D) if need_dx else x.new_zeros(1)
    tri.launch(_fourier_mlp_jet_bwd_kernel, (B, C),
        x, aux_f.contiguous(), x.new_zeros(1) if aux_g is None else aux_g.contiguous(), k["F"], k["w1s"],
        k["w1c"], k["wh"], k["bh"], k["wo"], k["bo"], f, g, terms, g1s, g1c, gwh, gbh, gwo, gbo, dx,
        N, C, per, tri.x_stride(x, N), 1.0 / N, float(eikonal), float(normal),
        name="jet backward", MP=k["MP"], H=H, NH=k["NH"], ACT=tri.ACT_CODES[activation], MODE=mode,
        NORMALS=aux_g is not None, NEED_DX=need_dx, TF32=tri.ALLOW_TF32, BLOCK_N=BLOCK_N, D=D, DP=_dp(D),
        num_warps=4 if H <= 32 else 8)
    dw, db = tri.sum_partials(k, g1s, g1c, gwh, gbh, gwo, gbo)
    return terms.sum(1) / N, f, g, (dx if need_dx else None), dw, db


def fourier_mlp_jet_bwd(cf, cg, x, freq, phase, weights, biases, activation, need_dx):
    """Cotangents cf [B, N], cg [B, N, D] -> (dx [B, N, D] per model or None, dW list, db list, f, g):
    the gradients of sum(cf f) + sum(cg g), and the jet (f, g) they were taken at."""
    _, f, g, dx, dw, db = _bwd(2, cf, cg, x, freq, phase, weights, biases, activation, need_dx)
    return dx, dw, db, f, g


def eikonal_train_step(x, targets, freq, phase, weights, biases, activation, eikonal, normals, normal):
    """(terms [B, 3], dW list, db list) of the eikonal step (see reference.eikonal_train_step); the
    normal term is 0 without normals."""
    terms, _, _, _, dw, db = _bwd(3, targets, normals, x, freq, phase, weights, biases, activation, False,
                                  eikonal, normal)
    return terms, dw, db
