// Second-order engine of the fused Fourier-PE + MLP kernel: f(x) and its input gradient
// g = grad_x f(x) in one pass, and the weight (and input) gradients of a loss on both: the
// double backward an eikonal or normal loss needs. Included at the end of fourier_mlp_impl.h,
// inside the same per-ISA instance (Engine, gemm, activations come from there). No headers here.
//
// Forward-mode tangents ride along the primal as extra rows. Per tile, every layer's activations
// are one stacked block of R = (1 + D) * TILE rows: rows [0, TILE) the primal a_l, rows
// [(1 + d) * TILE, (2 + d) * TILE) its tangent along x_d. So each layer is one micro-GEMM with
// (1 + D)x the rows (the bias on the primal rows only):
//   z = a W + b,  zd = ad W;   a' = act(z),  ad' = act'(z) zd.
// The encoding's tangent is analytic: d sin(u_j)/dx_d = cos(u_j) F[j, d], d cos(u_j)/dx_d = -sin(u_j) F[j, d].
// The output layer gives f = a_L . w + b and g_d = ad_L,d . w. The reverse pass, from cotangents
// cf of f and cg of g:
//   cz = act'(z) ca + act''(z) sum_d cad_d zd_d,   czd_d = act'(z) cad_d,
//   dW += [a; ad]^T [cz; czd] (one GEMM over R rows),  db += sum cz,  [ca; cad]_prev = [cz; czd] W^T,
// and at the encoding dx from both the features' and their tangents' cotangents.
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
      Base::bpk, Base::gw, Base::gb, Base::h0, Base::frt, Base::wofs, Base::wtofs, Base::bofs;
  static constexpr long R = (1 + D) * TILE;  // stacked rows: primal, then one block per input coordinate
  Buf<T> h0j, dh0j, outr, curv;  // features + tangents [dp, R] (points contiguous); their cotangents [R, dp];
                                 // output layer [R]; curvature term [TILE, Hp]
  std::vector<Buf<T>> zj, aj, daj, s1, s2;   // per hidden layer: [R, Hp] z, a, cotangents; [TILE, Hp] act', act''

  explicit JetEngine(const Problem<T>& p) : Base(p) {
    h0j.resize(dp * R);
    dh0j.resize(R * dp);
    outr.resize(R);
    long widest = 0;
    for (int l = 0; l + 1 < L; ++l) widest = std::max(widest, foutp[l]);
    curv.resize(TILE * widest);
    for (int l = 0; l + 1 < L; ++l) {
      zj.emplace_back(R * foutp[l]);
      aj.emplace_back(R * foutp[l]);
      daj.emplace_back(R * foutp[l]);
      s1.emplace_back(TILE * foutp[l]);
      s2.emplace_back(TILE * foutp[l]);
    }
  }

  // The tile's features (Engine::features, in h0) and their tangents, stacked into h0j; returns
  // true if a coordinate is NaN or Inf. Padded feature rows (2m..dp) stay zero from allocation.
  bool features(const T* x, long cnt) {
    const bool bad = Base::features(x, cnt);
    for (long j = 0; j < m; ++j) {
      const T* s = h0.p + j * TILE;
      const T* c = h0.p + (m + j) * TILE;
      T* rs = h0j.p + j * R;
      T* rc = h0j.p + (m + j) * R;
      std::copy(s, s + TILE, rs);
      std::copy(c, c + TILE, rc);
      for (int d = 0; d < D; ++d) {
        const T f = pb.freq[D * j + d];
        T* ts = rs + (1 + d) * TILE;
        T* tc = rc + (1 + d) * TILE;
#pragma omp simd
        for (long t = 0; t < TILE; ++t) {
          ts[t] = c[t] * f;
          tc[t] = -s[t] * f;
        }
      }
    }
    return bad;
  }

  // Forward over one tile: f[TILE] and g[TILE * D] (point-major).
  void forward(T* f, T* g) {
    const T* in = h0j.p;
    long ars = 1, aps = R, ld = dp;  // layer 0 reads the transposed features
    for (int l = 0; l + 1 < L; ++l) {
      const long Hp = foutp[l];
      const T* w = wpk.p + wofs[l];
      gemm<T, INIT_BIAS>(TILE, Hp, (int)fin[l], in, ars, aps, w, Hp, zj[l].p, Hp, {bpk.p + bofs[l]});
      gemm<T, INIT_ZERO>(D * TILE, Hp, (int)fin[l], in + TILE * ars, ars, aps, w, Hp, zj[l].p + TILE * Hp, Hp);
      activate_jet<T>(pb.act, zj[l].p, aj[l].p, s1[l].p, s2[l].p, TILE * Hp);
      const T* sp = s1[l].p;
      for (int d = 0; d < D; ++d) {
        const T* zd = zj[l].p + (1 + d) * TILE * Hp;
        T* ad = aj[l].p + (1 + d) * TILE * Hp;
#pragma omp simd
        for (long i = 0; i < TILE * Hp; ++i) ad[i] = sp[i] * zd[i];
      }
      in = aj[l].p;
      ars = Hp;
      aps = 1;
      ld = Hp;
    }
    using V = typename Vec<T>::v;
    constexpr int W = Vec<T>::W;
    const T* wo = wpk.p + wofs[L - 1];
    const long nv = ld / W;
    for (long r = 0; r < R; ++r) {
      const V* row = (const V*)(in + r * ld);
      V acc = row[0] * *(const V*)wo;
      for (long jv = 1; jv < nv; ++jv) acc += row[jv] * *(const V*)(wo + jv * W);
      T s = T(0);
      for (int k = 0; k < W; ++k) s += acc[k];
      outr.p[r] = s;
    }
    const T bo = bpk.p[bofs[L - 1]];
    for (long t = 0; t < TILE; ++t) {
      f[t] = outr.p[t] + bo;
      for (int d = 0; d < D; ++d) g[t * D + d] = outr.p[(1 + d) * TILE + t];
    }
  }

  // Backward over one tile from cf[TILE] (cotangent of f) and cg[TILE * D] (of g), both zero on
  // padded rows; dx of the first cnt points into dxt [cnt, D] when dxt is given.
  void backward(const T* cf, const T* cg, T* dxt, long cnt) {
    const int Lh = L - 1;
    for (long t = 0; t < TILE; ++t) {
      outr.p[t] = cf[t];
      for (int d = 0; d < D; ++d) outr.p[(1 + d) * TILE + t] = cg[t * D + d];
    }
    {  // output layer: dw_out += [a; ad]^T c, db_out += sum cf, [ca; cad] = c w_out^T
      const long ld = foutp[Lh - 1];
      const T* aL = aj[Lh - 1].p;
      const T* wo = wpk.p + wofs[L - 1];
      T* gwo = gw.p + wofs[L - 1];
      T* daL = daj[Lh - 1].p;
      T gbo = T(0);
      for (long t = 0; t < TILE; ++t) gbo += cf[t];
      gb.p[bofs[L - 1]] += gbo;
      for (long r = 0; r < R; ++r) {
        const T c = outr.p[r];
        const T* ar = aL + r * ld;
        T* dr = daL + r * ld;
#pragma omp simd
        for (long j = 0; j < ld; ++j) {
          gwo[j] += c * ar[j];
          dr[j] = c * wo[j];
        }
      }
    }
    for (int l = Lh - 1; l >= 0; --l) {
      const long Hp = foutp[l], TH = TILE * Hp;
      T* c = daj[l].p;  // [ca; cad] becomes [cz; czd] in place
      const T* sp1 = s1[l].p;
      const T* sp2 = s2[l].p;
      if (pb.act == RELU) {  // act'' = 0
#pragma omp simd
        for (long i = 0; i < TH; ++i) c[i] *= sp1[i];
      } else {
        T* k = curv.p;  // sum_d cad_d zd_d, read before the tangent rows are scaled
        const T* c1 = c + TH;
        const T* z1 = zj[l].p + TH;
#pragma omp simd
        for (long i = 0; i < TH; ++i) k[i] = c1[i] * z1[i];
        for (int d = 1; d < D; ++d) {
          const T* cd = c + (1 + d) * TH;
          const T* zd = zj[l].p + (1 + d) * TH;
#pragma omp simd
          for (long i = 0; i < TH; ++i) k[i] += cd[i] * zd[i];
        }
#pragma omp simd
        for (long i = 0; i < TH; ++i) c[i] = sp1[i] * c[i] + sp2[i] * k[i];
      }
      for (int d = 0; d < D; ++d) {
        T* cd = c + (1 + d) * TH;
#pragma omp simd
        for (long i = 0; i < TH; ++i) cd[i] *= sp1[i];
      }
      T* gbl = gb.p + bofs[l];
      for (long t = 0; t < TILE; ++t) {
        const T* r = c + t * Hp;
#pragma omp simd
        for (long j = 0; j < Hp; ++j) gbl[j] += r[j];
      }
      const long ldp = l > 0 ? foutp[l - 1] : dp;
      if (l > 0)  // dW_l[fin, Hp] += A^T[fin, R] @ C[R, Hp]
        gemm<T>(fin[l], Hp, (int)R, aj[l - 1].p, 1, ldp, c, Hp, gw.p + wofs[l], Hp);
      else
        gemm<T>(fin[l], Hp, (int)R, h0j.p, R, 1, c, Hp, gw.p + wofs[l], Hp);
      if (l > 0 || dxt)
        gemm<T, INIT_ZERO>(R, ldp, (int)fout[l], c, Hp, 1, wtpk.p + wtofs[l], ldp,
                           l > 0 ? daj[l - 1].p : dh0j.p, ldp);
    }
    if (!dxt) return;
    for (long t = 0; t < cnt; ++t) {
      T acc[D] = {};
      const T* gh = dh0j.p + t * dp;
      for (long j = 0; j < m; ++j) {
        const T s = h0.p[j * TILE + t], co = h0.p[(m + j) * TILE + t];
        T du = gh[j] * co - gh[m + j] * s;  // d/du of (sin u, cos u)
        for (int d = 0; d < D; ++d) {  // d/du of their tangents (cos u, -sin u) * F[j, d]
          const T* ghd = dh0j.p + ((1 + d) * TILE + t) * dp;
          du -= frt.p[d * m + j] * (ghd[j] * s + ghd[m + j] * co);
        }
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
  const int L = (int)pb.w.size();
  constexpr int NTERMS = 3;
  std::vector<std::vector<T>> pw, pbias;
  std::vector<double> ploss(step ? units * NTERMS : 0, 0.0);
  if (grads && C > 1) {
    for (int l = 0; l < L; ++l) {
      pw.emplace_back((size_t)units * pb.fan_in[l] * pb.fan_out[l]);
      pbias.emplace_back((size_t)units * pb.fan_out[l]);
    }
  }
  int flags = 0;
#pragma omp parallel num_threads(nthreads) reduction(| : flags)
  {
    JetEngine<T, D> eng(pb);
    std::vector<T> ft(TILE), gt(TILE * D), cf(TILE), cg(TILE * D);
    std::vector<T*> dwp(L), dbp(L);
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
      if (C == 1) {
        eng.write_grads(pb.dw.data(), pb.db.data(), b);
      } else {
        for (int l = 0; l < L; ++l) {
          dwp[l] = pw[l].data() + c * pb.fan_in[l] * pb.fan_out[l];
          dbp[l] = pbias[l].data() + c * pb.fan_out[l];
        }
        eng.write_grads(dwp.data(), dbp.data(), b * C);
      }
    }
  }
  if (!grads) return flags;
  reduce_partials(pb, ploss, step ? NTERMS : 0, pw, pbias, C, nthreads);
  return flags;
}
