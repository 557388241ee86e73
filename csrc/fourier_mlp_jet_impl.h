// Second-order engine of the fused Fourier-PE + MLP kernel: f(x) and its input gradient
// g = grad_x f(x) in one pass, and the weight (and input) gradients of a loss on both: the
// double backward an eikonal or normal loss needs. Included at the end of fourier_mlp_impl.h,
// inside the same per-ISA instance (Engine, gemm, activations come from there). No headers here.
//
// Reverse over reverse, as autograd's double backward, per tile of TILE points (every buffer
// [TILE, width], point-major):
//   forward   z_l = h_{l-1} W_l + b_l, h_l = act(z_l), f = h_L . w + b
//   g         one reverse pass: r_L = w, q_l = r_l * act'(z_l), r_{l-1} = q_l W_l^T; at the encoding
//             (phi = sin/cos of u = x F^T + p) g_d = sum_j (r0_sin cos u_j - r0_cos sin u_j) F[j, d]
// and for cotangents cf of f and cg of g:
//   (1) the adjoint of that reverse pass, from the features up: rb_0 = d(cg . g)/d r_0, then per
//       layer dW_l += rb_{l-1}^T q_l, qb = rb_{l-1} W_l, rb_l = qb * act'(z_l) and the adjoint
//       qb * r_l * act''(z_l) that z_l receives (zero for ReLU); dw += sum rb_L at the top;
//   (2) the ordinary backward of f with those adjoints added at each z_l.
// Per hidden layer that is 5 GEMMs of TILE rows (6 with dx) where forward-mode tangents would
// take 3 (1 + D): about 0.7x the FLOPs at D = 2 (two hidden layers of 64, 48 features).
// Reference: symfast/ops/fourier_mlp/reference.py (fourier_mlp_jet, eikonal_train_step).

// a = act(z), s1 = act'(z), s2 = act''(z).
template <typename T>
void activate_jet(int act, const T* __restrict z, T* __restrict a, T* __restrict s1, T* __restrict s2, long n) {
  switch (act) {
    case RELU:
#pragma omp simd
      for (long i = 0; i < n; ++i) {
        a[i] = z[i] < T(0) ? T(0) : z[i];  // NaN stays NaN (the comparison is false)
        s1[i] = z[i] > T(0) ? T(1) : T(0);
        s2[i] = T(0);
      }
      break;
    case TANH:
#pragma omp simd
      for (long i = 0; i < n; ++i) {
        const T t = tanh_f(z[i]);
        a[i] = t;
        s1[i] = T(1) - t * t;
        s2[i] = T(-2) * t * s1[i];
      }
      break;
    case SILU:
#pragma omp simd
      for (long i = 0; i < n; ++i) {
        const T s = sigmoid_f(z[i]);
        a[i] = z[i] * s;
        s1[i] = s * (T(1) + z[i] * (T(1) - s));
        s2[i] = s * (T(1) - s) * (T(2) + z[i] * (T(1) - T(2) * s));
      }
      break;
    default: {
      int far = 0;
#pragma omp simd reduction(| : far)
      for (long i = 0; i < n; ++i) {
        T s, c;
        sincos_poly(z[i], s, c);
        a[i] = s;
        s1[i] = c;
        s2[i] = -s;
        far |= sincos_out_of_range(z[i]);
      }
      if (far)  // pre-activations beyond the polynomial's range: libm for this block
        for (long i = 0; i < n; ++i) {
          a[i] = std::sin(z[i]);
          s1[i] = std::cos(z[i]);
          s2[i] = -a[i];
        }
    }
  }
}

template <typename T, int D>
struct JetEngine : Engine<T, D> {
  using Base = Engine<T, D>;
  using Base::pb, Base::L, Base::m, Base::dp, Base::fin, Base::fout, Base::foutp, Base::wpk, Base::wtpk,
      Base::bpk, Base::gw, Base::gb, Base::h0, Base::dh0, Base::frt, Base::wofs, Base::wtofs, Base::bofs,
      Base::z, Base::a, Base::da;
  Buf<T> r0, rb0, qb, rbA, rbB;              // [TILE, dp] df/dphi and its adjoint; [TILE, widest] scratch
  std::vector<Buf<T>> s1, s2, q, r, zb;      // per hidden layer [TILE, Hp]: act', act'', df/dz, df/dh, z adjoint

  explicit JetEngine(const Problem<T>& p) : Base(p) {
    long widest = 0;
    for (int l = 0; l + 1 < L; ++l) {
      widest = std::max(widest, foutp[l]);
      for (auto* v : {&s1, &s2, &q, &r, &zb}) v->emplace_back(TILE * foutp[l]);
    }
    r0.resize(TILE * dp);
    rb0.resize(TILE * dp);
    for (auto* b : {&qb, &rbA, &rbB}) b->resize(TILE * widest);
  }

  // Forward over one tile: f[TILE] and g[TILE * D] (point-major); keeps what the backward reads.
  void forward(T* f, T* g) {
    const int Lh = L - 1;
    const T* in = h0.p;
    long ars = 1, aps = TILE;  // layer 0 reads the transposed features
    for (int l = 0; l < Lh; ++l) {
      const long Hp = foutp[l];
      gemm<T, INIT_BIAS>(TILE, Hp, (int)fin[l], in, ars, aps, wpk.p + wofs[l], Hp, z[l].p, Hp, {bpk.p + bofs[l]});
      activate_jet<T>(pb.act, z[l].p, a[l].p, s1[l].p, s2[l].p, TILE * Hp);
      in = a[l].p;
      ars = Hp;
      aps = 1;
    }
    using V = typename Vec<T>::v;
    constexpr int W = Vec<T>::W;
    const long ld = foutp[Lh - 1];
    const T* wo = wpk.p + wofs[L - 1];
    const T bo = bpk.p[bofs[L - 1]];
    for (long t = 0; t < TILE; ++t) {
      const V* row = (const V*)(in + t * ld);
      V acc = row[0] * *(const V*)wo;
      for (long jv = 1; jv < ld / W; ++jv) acc += row[jv] * *(const V*)(wo + jv * W);
      T s = T(0);
      for (int k = 0; k < W; ++k) s += acc[k];
      f[t] = s + bo;
    }
    // the input gradient by one reverse pass: q_l = r_l * act'(z_l), r_{l-1} = q_l W_l^T, r_top = w_out
    for (long t = 0; t < TILE; ++t) {
      const T* sp = s1[Lh - 1].p + t * ld;
      T* qp = q[Lh - 1].p + t * ld;
#pragma omp simd
      for (long j = 0; j < ld; ++j) qp[j] = wo[j] * sp[j];
    }
    for (int l = Lh - 1; l >= 0; --l) {
      const long Hp = foutp[l], ldp = l > 0 ? foutp[l - 1] : dp;
      T* dst = l > 0 ? r[l - 1].p : r0.p;
      gemm<T, INIT_ZERO>(TILE, ldp, (int)fout[l], q[l].p, Hp, 1, wtpk.p + wtofs[l], ldp, dst, ldp);
      if (l > 0) {
        const T* sp = s1[l - 1].p;
        T* qp = q[l - 1].p;
#pragma omp simd
        for (long i = 0; i < TILE * ldp; ++i) qp[i] = dst[i] * sp[i];
      }
    }
    for (long t = 0; t < TILE; ++t) {  // g_d = sum_j (r0_sin c_j - r0_cos s_j) F[j, d]
      T acc[D] = {};
      const T* rp = r0.p + t * dp;
      for (long j = 0; j < m; ++j) {
        const T du = rp[j] * h0.p[(m + j) * TILE + t] - rp[m + j] * h0.p[j * TILE + t];
        for (int d = 0; d < D; ++d) acc[d] += du * frt.p[d * m + j];
      }
      for (int d = 0; d < D; ++d) g[t * D + d] = acc[d];
    }
  }

  // Backward over one tile from cf[TILE] (cotangent of f) and cg[TILE * D] (of g), both zero on
  // padded rows; dx of the first cnt points into dxt [cnt, D] when dxt is given.
  void backward(const T* cf, const T* cg, T* dxt, long cnt) {
    const int Lh = L - 1;
    const bool relu = pb.act == RELU;
    const long ld = foutp[Lh - 1];
    const T* wo = wpk.p + wofs[L - 1];
    T* gwo = gw.p + wofs[L - 1];
    // (1) the adjoint of the reverse pass, from the features up: rb0 = d(cg . g)/d r0
    for (long t = 0; t < TILE; ++t) {
      T* rb = rb0.p + t * dp;
      for (long j = 0; j < m; ++j) {
        T v = T(0);
        for (int d = 0; d < D; ++d) v += cg[t * D + d] * frt.p[d * m + j];
        rb[j] = h0.p[(m + j) * TILE + t] * v;
        rb[m + j] = -h0.p[j * TILE + t] * v;
      }
    }
    const T* rbp = rb0.p;
    long ldp = dp;
    for (int l = 0; l < Lh; ++l) {
      const long Hp = foutp[l], TH = TILE * Hp;
      gemm<T>(fin[l], Hp, TILE, rbp, 1, ldp, q[l].p, Hp, gw.p + wofs[l], Hp);                    // dW_l += rb^T q_l
      gemm<T, INIT_ZERO>(TILE, Hp, (int)fin[l], rbp, ldp, 1, wpk.p + wofs[l], Hp, qb.p, Hp);  // qb = rb W_l
      T* rbl = (l % 2 ? rbA : rbB).p;
      const T* sp1 = s1[l].p;
#pragma omp simd
      for (long i = 0; i < TH; ++i) rbl[i] = qb.p[i] * sp1[i];
      if (!relu) {  // q_l = r_l act'(z_l) also moves with z_l: its adjoint qb r_l act''(z_l)
        const T* sp2 = s2[l].p;
        T* zbl = zb[l].p;
        if (l < Lh - 1) {
          const T* rl = r[l].p;
#pragma omp simd
          for (long i = 0; i < TH; ++i) zbl[i] = qb.p[i] * rl[i] * sp2[i];
        } else {  // r at the top is w_out for every point
          for (long t = 0; t < TILE; ++t)
#pragma omp simd
            for (long j = 0; j < Hp; ++j) zbl[t * Hp + j] = qb.p[t * Hp + j] * wo[j] * sp2[t * Hp + j];
        }
      }
      rbp = rbl;
      ldp = Hp;
    }
    // (2) the ordinary backward of f, with the adjoints above added at each z
    T gbo = T(0);
    for (long t = 0; t < TILE; ++t) gbo += cf[t];
    gb.p[bofs[L - 1]] += gbo;
    {
      const T* aL = a[Lh - 1].p;
      T* daL = da[Lh - 1].p;
      for (long t = 0; t < TILE; ++t) {
        const T c = cf[t];
        const T* ar = aL + t * ld;
        const T* rb = rbp + t * ld;
        T* dr = daL + t * ld;
#pragma omp simd
        for (long j = 0; j < ld; ++j) {
          gwo[j] += c * ar[j] + rb[j];  // rb: the adjoint of r_top = w_out
          dr[j] = c * wo[j];
        }
      }
    }
    for (int l = Lh - 1; l >= 0; --l) {
      const long Hp = foutp[l], TH = TILE * Hp;
      T* c = da[l].p;  // dh_l becomes dz_l in place
      const T* sp1 = s1[l].p;
      if (relu) {
#pragma omp simd
        for (long i = 0; i < TH; ++i) c[i] *= sp1[i];
      } else {
        const T* zbl = zb[l].p;
#pragma omp simd
        for (long i = 0; i < TH; ++i) c[i] = c[i] * sp1[i] + zbl[i];
      }
      T* gbl = gb.p + bofs[l];
      for (long t = 0; t < TILE; ++t) {
        const T* row = c + t * Hp;
#pragma omp simd
        for (long j = 0; j < Hp; ++j) gbl[j] += row[j];
      }
      const long lp = l > 0 ? foutp[l - 1] : dp;
      if (l > 0)
        gemm<T>(fin[l], Hp, TILE, a[l - 1].p, 1, lp, c, Hp, gw.p + wofs[l], Hp);
      else
        gemm<T>(fin[l], Hp, TILE, h0.p, TILE, 1, c, Hp, gw.p + wofs[l], Hp);
      if (l > 0 || dxt)
        gemm<T, INIT_ZERO>(TILE, lp, (int)fout[l], c, Hp, 1, wtpk.p + wtofs[l], lp, l > 0 ? da[l - 1].p : dh0.p, lp);
    }
    if (!dxt) return;
    // (3) dx: through the features (dh0), and through g's own dependence on x (cos/-sin of u)
    for (long t = 0; t < cnt; ++t) {
      T acc[D] = {};
      const T* gh = dh0.p + t * dp;
      const T* rp = r0.p + t * dp;
      for (long j = 0; j < m; ++j) {
        const T s = h0.p[j * TILE + t], co = h0.p[(m + j) * TILE + t];
        T v = T(0);
        for (int d = 0; d < D; ++d) v += cg[t * D + d] * frt.p[d * m + j];
        const T du = gh[j] * co - gh[m + j] * s - v * (rp[j] * s + rp[m + j] * co);
        for (int i = 0; i < D; ++i) acc[i] += du * frt.p[i * m + j];
      }
      for (int i = 0; i < D; ++i) dxt[D * t + i] = acc[i];
    }
  }
};

// Runs one second-order problem (modes Jet, JetBackward, JetTrainStep) with D-dimensional points,
// over the same (model, chunk) units and in the same fixed order as `run`.
//   Jet:          y [B, N], gy [B, N, D]
//   JetBackward:  cotangents aux [B, N] (of y) and aux_g [B, N, D] (of gy) -> dW, db (and dx)
//   JetTrainStep: targets aux [B, N] (and target normals aux_g [B, N, D], optional) -> loss terms
//                 [B, 3] (means over points: (f - target)^2, (|g| - 1)^2, |g - normal|^2) and
//                 dW, db of sum_b (mse + eikonal * eik + normal * nrm)
template <typename T, int D>
int run_jet(const Problem<T>& pb, int nthreads) {
  const long B = pb.B, N = pb.N;
  const bool grads = pb.mode != FourierMlpMode::Jet;
  const bool step = pb.mode == FourierMlpMode::JetTrainStep;
  const long chunk = grads ? pb.chunk : 4 * TILE;
  const long C = (N + chunk - 1) / chunk;
  const long units = B * C;
  constexpr int NTERMS = 3;
  GradPartials<T> parts(pb, units, C, grads);
  std::vector<double> ploss(step ? units * NTERMS : 0, 0.0);
  int flags = 0;
#pragma omp parallel num_threads(nthreads) reduction(| : flags)
  {
    JetEngine<T, D> eng(pb);
    std::vector<T> ft(TILE), gt(TILE * D), cf(TILE), cg(TILE * D);
#pragma omp for schedule(dynamic, 1)
    for (long u = 0; u < units; ++u) {
      const long b = u / C, c = u % C;
      const long n0 = c * chunk, n1 = std::min(N, n0 + chunk);
      eng.pack(b);
      if (grads) {
        eng.gw.zero();
        eng.gb.zero();
      }
      double terms[NTERMS] = {0.0, 0.0, 0.0};
      const T* xb = pb.x + (pb.x_shared ? 0 : b * N * D);
      const T inv_n = T(1) / T(N);
      for (long t0 = n0; t0 < n1; t0 += TILE) {
        const long cnt = std::min<long>(TILE, n1 - t0);
        if (eng.features(xb + t0 * D, cnt)) flags |= NONFINITE_X;
        eng.forward(ft.data(), gt.data());
        if (pb.y) std::copy(ft.data(), ft.data() + cnt, pb.y + b * N + t0);
        if (pb.gy) std::copy(gt.data(), gt.data() + cnt * D, pb.gy + (b * N + t0) * D);
        if (!grads) continue;
        const T* a1 = pb.aux + b * N + t0;
        const T* a2 = pb.aux_g ? pb.aux_g + (b * N + t0) * D : nullptr;
        int bad = 0;
        for (long t = 0; t < cnt; ++t) bad |= a1[t] - a1[t] != T(0);
        if (a2)
          for (long t = 0; t < cnt * D; ++t) bad |= a2[t] - a2[t] != T(0);
        if (bad) flags |= NONFINITE_AUX;
        std::fill(cf.begin(), cf.end(), T(0));
        std::fill(cg.begin(), cg.end(), T(0));
        if (step) {
          for (long t = 0; t < cnt; ++t) {
            const T e = ft[t] - a1[t];
            terms[0] += double(e) * double(e);
            cf[t] = T(2) * inv_n * e;
            const T* g = gt.data() + t * D;
            T sq = T(0);
            for (int d = 0; d < D; ++d) sq += g[d] * g[d];
            const T nrm = std::sqrt(sq), r = nrm - T(1);
            terms[1] += double(r) * double(r);
            // d|g|/dg = g / |g|, taken as 0 at g = 0 (as torch's norm backward)
            const T k = nrm > T(0) ? pb.eikonal * T(2) * inv_n * r / nrm : T(0);
            for (int d = 0; d < D; ++d) cg[t * D + d] = k * g[d];
            if (a2) {
              for (int d = 0; d < D; ++d) {
                const T e2 = g[d] - a2[t * D + d];
                terms[2] += double(e2) * double(e2);
                cg[t * D + d] += pb.normal * T(2) * inv_n * e2;
              }
            }
          }
        } else {
          std::copy(a1, a1 + cnt, cf.data());
          if (a2) std::copy(a2, a2 + cnt * D, cg.data());
        }
        eng.backward(cf.data(), cg.data(), pb.dx ? pb.dx + (b * N + t0) * D : nullptr, cnt);
      }
      if (!grads) continue;
      if (step)
        for (int k = 0; k < NTERMS; ++k) ploss[u * NTERMS + k] = terms[k];
      parts.write(eng, b, c);
    }
  }
  if (!grads) return flags;
  reduce_partials(pb, ploss, step ? NTERMS : 0, parts, nthreads);
  return flags;
}
