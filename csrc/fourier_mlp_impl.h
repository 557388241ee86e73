// Fused batched Fourier-PE + MLP kernel body, compiled once per instruction set.
//
// fourier_mlp.cpp stamps it out per instruction set through isa_instances.h (namespaces
// symfast::fmlp::{avx512, avx2, generic}), after simd.h: Vec, pad_to and the register-blocked
// micro-GEMM `gemm` with its bias and ReLU epilogues come from there. No headers here.
//
// Layout, per model b and per tile of TILE points (point-major, padded widths):
//   h0  [TILE, dp]  = [sin(u) | cos(u) | 0-pad],  u = x @ freq^T + phase   (m = d/2, x [TILE, D])
//   z_l [TILE, Hp]  = a_{l-1} @ W_l + b_l,  a_l = act(z_l)  (hidden layers)
//   y   [TILE]      = a_L . w_out + b_out
// and the backward of each layer over the same tile, in cache:
//   dz_l = da_l * act'(z_l);  dW_l += a_{l-1}^T dz_l;  db_l += sum_t dz_l;  da_{l-1} = dz_l W_l^T
// W_1's rows are permuted into the [sin | cos] order when packed and back when written.
// Every product is one register-blocked micro-kernel C[MR, NV vectors] += A(i, p) * Bm[p, :].

// Points per tile: a multiple of every MR used (4, 6); 48 keeps more of a tile's buffers in L1
// than 96 (measured ~1.3% faster at workload W).
constexpr int TILE = 48;

// ---- elementwise math (vectorisable scalar code; fp64 uses libm for check-grade accuracy) ----
SYMFAST_INLINE float exp_poly(float x) {  // Cephes expf, ~1 ulp on [-87, 88]
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  // n from a NaN-free copy: casting NaN to int is undefined behaviour (UBSan); NaN still propagates through r
  const float n = __builtin_rintf((x == x ? x : 0.0f) * 1.44269504088896341f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r2 + r + 1.0f;
  const int bits = ((int)n + 127) << 23;
  return p * __builtin_bit_cast(float, bits);
}

// sin and cos with Cody-Waite reduction by pi/2 (accurate for |u| < ~1e4; callers check
// |u| < kSinCosPolyRange with `sincos_in_range` and redo out-of-range rows with libm).
SYMFAST_INLINE void sincos_poly(float u, float& s, float& c) {
  // q from a bounded copy: (int)q of a NaN or |u| > ~3e9 is undefined behaviour (callers redo rows beyond
  // kSinCosPolyRange with libm; below 1e9 q is exact as before)
  const float q = __builtin_rintf((__builtin_fabsf(u) < 1e9f ? u : 0.0f) * 0.636619772367581343f);
  float r = u - q * 1.5703125f;
  r = r - q * 4.837512969970703125e-4f;
  r = r - q * 7.54978995489188216e-8f;
  const float r2 = r * r;
  const float sp = r + r * r2 * (-1.6666654611E-1f + r2 * (8.3321608736E-3f + r2 * -1.9515295891E-4f));
  const float cp = 1.0f - 0.5f * r2 + r2 * r2 * (4.166664568298827E-2f + r2 * (-1.388731625493765E-3f +
                                                                              r2 * 2.443315711809948E-5f));
  const int qi = (int)q;
  const bool swap = qi & 1;
  const float ss = swap ? cp : sp, cc = swap ? sp : cp;
  s = (qi & 2) ? -ss : ss;
  c = ((qi + 1) & 2) ? -cc : cc;
}
SYMFAST_INLINE void sincos_poly(double u, double& s, double& c) { s = std::sin(u); c = std::cos(u); }

// 1 when u is beyond the polynomial's range or NaN (the comparison is false for NaN).
SYMFAST_INLINE int sincos_out_of_range(float u) { return !(__builtin_fabsf(u) < kSinCosPolyRange); }
SYMFAST_INLINE int sincos_out_of_range(double) { return 0; }  // float64 uses libm throughout

// Array form of sincos_poly (compiled for this instruction set; used by the accuracy test).
inline void sincos_array(const float* u, float* s, float* c, long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) sincos_poly(u[i], s[i], c[i]);
}

enum Act { RELU = 0, TANH = 1, SILU = 2, SINE = 3 };

SYMFAST_INLINE float tanh_f(float z) {  // branch-free so that it vectorises on AVX2 too
  const float az = __builtin_fabsf(z);
  const float e = exp_poly(-2.0f * az);
  const float z2 = z * z;
  const float small = az * (1.0f + z2 * (-0.333333333f + z2 * 0.133333333f));
  const float t = az < 0.04f ? small : (1.0f - e) / (1.0f + e);
  return __builtin_copysignf(t, z);
}
SYMFAST_INLINE float sigmoid_f(float z) { return 1.0f / (1.0f + exp_poly(-z)); }
SYMFAST_INLINE double tanh_f(double z) { return std::tanh(z); }
SYMFAST_INLINE double sigmoid_f(double z) { return 1.0 / (1.0 + std::exp(-z)); }

template <typename T>
void activate(int act, const T* __restrict z, T* __restrict a, long n) {
  switch (act) {  // ReLU never gets here: the GEMM epilogues apply it
    case TANH:
#pragma omp simd
      for (long i = 0; i < n; ++i) a[i] = tanh_f(z[i]);
      break;
    case SILU:
#pragma omp simd
      for (long i = 0; i < n; ++i) a[i] = z[i] * sigmoid_f(z[i]);
      break;
    default: {
      int far = 0;
#pragma omp simd reduction(| : far)
      for (long i = 0; i < n; ++i) {
        T s, c;
        sincos_poly(z[i], s, c);
        a[i] = s;
        far |= sincos_out_of_range(z[i]);
      }
      if (far)  // pre-activations beyond the polynomial's range: libm for this row
        for (long i = 0; i < n; ++i) a[i] = std::sin(z[i]);
    }
  }
}

// g[i] *= act'(z[i]) given z and a = act(z).
template <typename T>
void activate_bwd(int act, const T* __restrict z, const T* __restrict a, T* __restrict g, long n) {
  switch (act) {  // ReLU never gets here: the GEMM epilogues apply it
    case TANH:
#pragma omp simd
      for (long i = 0; i < n; ++i) g[i] *= T(1) - a[i] * a[i];
      break;
    case SILU:
#pragma omp simd
      for (long i = 0; i < n; ++i) {
        const T s = sigmoid_f(z[i]);
        g[i] *= s * (T(1) + z[i] * (T(1) - s));
      }
      break;
    default: {
      int far = 0;
#pragma omp simd reduction(| : far)
      for (long i = 0; i < n; ++i) far |= sincos_out_of_range(z[i]);
      if (far) {  // beyond the polynomial's range: libm for this row
        for (long i = 0; i < n; ++i) g[i] *= std::cos(z[i]);
      } else {
#pragma omp simd
        for (long i = 0; i < n; ++i) {
          T s, c;
          sincos_poly(z[i], s, c);
          g[i] *= c;
        }
      }
    }
  }
}

// ---- the per-thread tile engine ----
// D: input dimension (2 or 3), a template parameter so the feature and dx loops unroll over it.
template <typename T, int D>
struct Engine {
  static constexpr int W = Vec<T>::W;
  const Problem<T>& pb;
  int L;                      // number of linear layers (hidden + output)
  long m, d, dp;              // frequencies, features, padded features
  std::vector<long> fin, fout, foutp;  // per layer fan-in, fan-out, padded fan-out
  Buf<T> wpk, wtpk, bpk, gw, gb, h0, dh0;  // packed weights, W^T, biases; grads; features
  Buf<T> xt, frt;             // the tile's coordinates xt[i, t] and frequencies frt[i, j], coordinate-major
  std::vector<Buf<T>> z, a, da;   // per hidden layer
  std::vector<long> wofs, wtofs, bofs;  // offsets into the packed buffers
  long packed_b = -1;

  explicit Engine(const Problem<T>& p) : pb(p) {
    L = (int)p.w.size();
    m = p.m;
    d = 2 * m;
    dp = pad_to(d, W);
    long ws = 0, wts = 0, bs = 0;
    for (int l = 0; l < L; ++l) {
      fin.push_back(p.fan_in[l]);
      fout.push_back(p.fan_out[l]);
      foutp.push_back(l + 1 < L ? pad_to(p.fan_out[l], W) : 1);  // output layer: a column
      const long finp = l == 0 ? dp : foutp[l - 1];
      wofs.push_back(ws);
      wtofs.push_back(wts);
      bofs.push_back(bs);
      ws += l + 1 < L ? fin[l] * foutp[l] : pad_to(fin[l], W);  // output column padded to whole vectors
      wts += fout[l] * finp;
      bs += foutp[l];
    }
    wpk.resize(ws);
    wtpk.resize(wts);
    bpk.resize(bs);
    gw.resize(ws);
    gb.resize(bs);
    h0.resize(TILE * dp);
    xt.resize(D * TILE);
    frt.resize(D * m);
    for (long j = 0; j < m; ++j)
      for (int i = 0; i < D; ++i) frt.p[i * m + j] = p.freq[D * j + i];
    dh0.resize(TILE * dp);
    for (int l = 0; l + 1 < L; ++l) {
      z.emplace_back(TILE * foutp[l]);
      a.emplace_back(TILE * foutp[l]);
      da.emplace_back(TILE * foutp[l]);
    }
  }

  // Original row index of packed W_1 row k ([sin | cos] order).
  long w1_row(long k) const { return k < m ? 2 * k : 2 * (k - m) + 1; }

  void pack(long b) {
    if (b == packed_b) return;
    packed_b = b;
    wpk.zero();
    wtpk.zero();
    bpk.zero();
    for (int l = 0; l < L; ++l) {
      const T* w = pb.w[l] + b * fin[l] * fout[l];
      const long finp = l == 0 ? dp : foutp[l - 1];
      T* wp = wpk.p + wofs[l];
      T* wt = wtpk.p + wtofs[l];
      for (long k = 0; k < fin[l]; ++k) {
        const long src = l == 0 ? w1_row(k) : k;
        for (long j = 0; j < fout[l]; ++j) {
          wp[k * foutp[l] + j] = w[src * fout[l] + j];
          wt[j * finp + k] = w[src * fout[l] + j];
        }
      }
      const T* bb = pb.b[l] + b * fout[l];
      for (long j = 0; j < fout[l]; ++j) bpk.p[bofs[l] + j] = bb[j];
    }
  }

  // hT[k, t]: features transposed ([sin | cos] rows, points contiguous) so the sin/cos
  // loop vectorises over points with no remainder.
  // Returns true if a coordinate is NaN or Inf (v - v is 0 exactly for finite v).
  // u = sum_i f[i] x_i[t] + b, summed in coordinate order (as the reference's x @ freq^T).
  static inline __attribute__((always_inline)) T arg(const T* f, const T* xs, long t, T b) {
    T u = f[0] * xs[t];
#pragma GCC unroll 3
    for (int i = 1; i < D; ++i) u += f[i] * xs[i * TILE + t];
    return u + b;
  }

  bool features(const T* x, long cnt) {
    const T* fr = pb.freq;
    const T* ph = pb.phase;
    T* xs = xt.p;
    for (long t = 0; t < TILE; ++t)
      for (int i = 0; i < D; ++i) xs[i * TILE + t] = t < cnt ? x[D * t + i] : T(0);
    int bad = 0;
#pragma omp simd reduction(| : bad)
    for (long k = 0; k < D * TILE; ++k) bad |= xs[k] - xs[k] != T(0);
    for (long j = 0; j < m; ++j) {
      T f[D];
      for (int i = 0; i < D; ++i) f[i] = fr[D * j + i];
      const T b = ph[j];
      T* rs = h0.p + j * TILE;
      T* rc = h0.p + (m + j) * TILE;
      int far = 0;
#pragma omp simd aligned(rs, rc : 16) reduction(| : far)
      for (long t = 0; t < TILE; ++t) {
        const T u = arg(f, xs, t, b);
        T s, c;
        sincos_poly(u, s, c);
        rs[t] = s;
        rc[t] = c;
        far |= sincos_out_of_range(u);
      }
      if (far) {  // arguments beyond the polynomial's range: libm, as fourier_features does
        for (long t = 0; t < TILE; ++t) {
          const T u = arg(f, xs, t, b);
          rs[t] = std::sin(u);
          rc[t] = std::cos(u);
        }
      }
    }
    return bad != 0;
  }

  // z_l, a_l = act(z_l) from the previous activations A(t, k) = in[t * ars + k * aps].
  void layer_fwd(long ars, long aps, const T* in, int l) {
    const T* bias = bpk.p + bofs[l];
    if (pb.act == RELU) {  // a = max(z, 0) in the epilogue; the backward only needs a > 0
      gemm<T, INIT_BIAS, EPI_RELU>(TILE, foutp[l], (int)fin[l], in, ars, aps, wpk.p + wofs[l], foutp[l], a[l].p,
                                   foutp[l], {bias});
    } else {
      gemm<T, INIT_BIAS>(TILE, foutp[l], (int)fin[l], in, ars, aps, wpk.p + wofs[l], foutp[l], z[l].p,
                         foutp[l], {bias});
      activate<T>(pb.act, z[l].p, a[l].p, TILE * foutp[l]);
    }
  }

  // Forward over one tile; fills yt[TILE].
  void forward(T* yt) {
    const T* in = h0.p;  // layer 0 reads hT[k, t]: A(t, k) at t + k * TILE
    long ld = dp;
    for (int l = 0; l + 1 < L; ++l) {
      if (l == 0) layer_fwd(1, TILE, in, l);  // layer 0 reads hT[k, t]
      else layer_fwd(ld, 1, in, l);
      in = a[l].p;
      ld = foutp[l];
    }
    // output layer y = a_L . w_out + b_out: one vector of products per point, then its lanes summed
    using V = typename Vec<T>::v;
    const T* wo = wpk.p + wofs[L - 1];  // [ld] (zero beyond fan-in)
    const T bo = bpk.p[bofs[L - 1]];
    const long nv = ld / W;
    for (long t = 0; t < TILE; ++t) {
      const V* r = (const V*)(in + t * ld);
      V acc = r[0] * *(const V*)wo;
      for (long jv = 1; jv < nv; ++jv) acc += r[jv] * *(const V*)(wo + jv * W);
      T s = T(0);
      for (int k = 0; k < W; ++k) s += acc[k];
      yt[t] = s + bo;
    }
  }

  // Backward over one tile from g[TILE] = dLoss/dy (zero on padded rows); dx of the first cnt
  // points into dxt [cnt, D] when dxt is given.
  void backward(const T* g, T* dxt, long cnt) {
    const int Lh = L - 1;
    const T* aL = a[Lh - 1].p;  // at least one hidden layer (checked by the binding)
    const long ldL = foutp[Lh - 1];
    const T* wo = wpk.p + wofs[L - 1];  // [ldL] (zero beyond the fan-in)
    T* gwo = gw.p + wofs[L - 1];
    const bool relu = pb.act == RELU;
    T* daL = da[Lh - 1].p;
    // output layer: dw_out += a_L^T g, db_out += sum g, da_L = g w_out^T; for ReLU also
    // dz_L = da_L where a_L > 0 and its bias gradient, all in one pass per column vector.
    {
      using V = typename Vec<T>::v;
      T gbo = T(0);
      for (long t = 0; t < TILE; ++t) gbo += g[t];
      gb.p[bofs[L - 1]] += gbo;
      T* gbL = gb.p + bofs[Lh - 1];
      for (long j = 0; j < ldL; j += W) {
        const V wv = *(const V*)(wo + j);
        V gwacc = V{}, gbacc = V{};
        for (long t = 0; t < TILE; ++t) {
          const V r = *(const V*)(aL + t * ldL + j);
          const T gt = g[t];
          gwacc += gt * r;
          V d = gt * wv;
          if (relu) {
            d = where_positive(r, d);
            gbacc += d;
          }
          *(V*)(daL + t * ldL + j) = d;
        }
        *(V*)(gwo + j) += gwacc;
        if (relu) *(V*)(gbL + j) += gbacc;
      }
    }
    for (int l = Lh - 1; l >= 0; --l) {
      const long Hp = foutp[l];
      T* dz = da[l].p;  // becomes dz in place (for ReLU it already is, bias gradient included)
      if (!relu) {
        activate_bwd<T>(pb.act, z[l].p, a[l].p, dz, TILE * Hp);
        T* gbl = gb.p + bofs[l];
        for (long t = 0; t < TILE; ++t) {
          const T* r = dz + t * Hp;
#pragma omp simd
          for (long j = 0; j < Hp; ++j) gbl[j] += r[j];
        }
      }
      const T* prev = l > 0 ? a[l - 1].p : h0.p;
      const long ldp = l > 0 ? foutp[l - 1] : dp;
      // dW_l[K, Hp] += prev^T[K, TILE] @ dz[TILE, Hp]
      if (l > 0)
        gemm<T>(fin[l], Hp, TILE, prev, 1, ldp, dz, Hp, gw.p + wofs[l], Hp);
      else  // prev = hT[k, t]
        gemm<T>(fin[l], Hp, TILE, prev, TILE, 1, dz, Hp, gw.p + wofs[l], Hp);
      // dprev[TILE, ldp] = dz[TILE, fout] @ W_l^T[fout, ldp]; through the previous ReLU in the epilogue
      if (l > 0 && relu)
        gemm<T, INIT_ZERO, EPI_MASK>(TILE, ldp, (int)fout[l], dz, Hp, 1, wtpk.p + wtofs[l], ldp, da[l - 1].p, ldp,
                                     {nullptr, a[l - 1].p, gb.p + bofs[l - 1]});
      else if (l > 0 || dxt)
        gemm<T, INIT_ZERO>(TILE, ldp, (int)fout[l], dz, Hp, 1, wtpk.p + wtofs[l], ldp, l > 0 ? da[l - 1].p : dh0.p,
                           ldp);
    }
    if (dxt) {  // dx_i = sum_j du_j f_j[i]
      const T* f0 = frt.p;
      const T* f1 = frt.p + m;
      const T* f2 = frt.p + (D > 2 ? 2 * m : 0);
      for (long t = 0; t < cnt; ++t) {
        const T* hs = h0.p + t;  // hT: stride TILE
        const T* gh = dh0.p + t * dp;
        T g0 = T(0), g1 = T(0), g2 = T(0);
#pragma omp simd reduction(+ : g0, g1, g2)
        for (long j = 0; j < m; ++j) {
          const T du = gh[j] * hs[(m + j) * TILE] - gh[m + j] * hs[j * TILE];  // d/du of sin, cos
          g0 += du * f0[j];
          g1 += du * f1[j];
          if constexpr (D > 2) g2 += du * f2[j];
        }
        dxt[D * t] = g0;
        dxt[D * t + 1] = g1;
        if constexpr (D > 2) dxt[D * t + 2] = g2;
      }
    }
  }

  // Write the accumulated gradients (unpacked, fan-in first) to dst (weights) / dstb (biases).
  void write_grads(T* const* dw, T* const* db, long b) const {
    for (int l = 0; l < L; ++l) {
      T* o = dw[l] + b * fin[l] * fout[l];
      const T* s = gw.p + wofs[l];
      for (long k = 0; k < fin[l]; ++k) {
        const long dst = l == 0 ? w1_row(k) : k;
        for (long j = 0; j < fout[l]; ++j) o[dst * fout[l] + j] = s[k * foutp[l] + j];
      }
      for (long j = 0; j < fout[l]; ++j) db[l][b * fout[l] + j] = gb.p[bofs[l] + j];
    }
  }
};

// Where each (model, chunk of points) unit's gradients go: straight into the outputs when a model is
// one chunk (C == 1), else into per-unit partials that `reduce_partials` sums in chunk order
// (deterministic for any thread count). Shared by the plain and the jet training steps.
template <typename T>
struct GradPartials {
  const Problem<T>& pb;
  long C;
  std::vector<std::vector<T>> w, b;  // [units * fan_in * fan_out], [units * fan_out] per layer (C > 1)
  GradPartials(const Problem<T>& p, long units, long chunks, bool grads) : pb(p), C(chunks) {
    if (!grads || C == 1) return;
    for (size_t l = 0; l < pb.w.size(); ++l) {
      w.emplace_back((size_t)units * pb.fan_in[l] * pb.fan_out[l]);
      b.emplace_back((size_t)units * pb.fan_out[l]);
    }
  }
  // Writes the engine's accumulated gradients of unit (model mb, chunk c).
  template <class Eng>
  void write(const Eng& eng, long mb, long c) {
    if (C == 1) return eng.write_grads(pb.dw.data(), pb.db.data(), mb);
    std::vector<T*> dw(w.size()), db(b.size());
    for (size_t l = 0; l < w.size(); ++l) {
      dw[l] = w[l].data() + c * pb.fan_in[l] * pb.fan_out[l];
      db[l] = b[l].data() + c * pb.fan_out[l];
    }
    eng.write_grads(dw.data(), db.data(), mb * C);  // slot u = mb * C + c
  }
};

// Sums per-(model, chunk) partials in chunk order (deterministic) into the outputs: the loss terms
// (nterms per unit, sums of squares; divided by N) and, when a model spans several chunks (C > 1),
// the weight and bias gradients. Shared by the plain and the jet training steps.
template <typename T>
void reduce_partials(const Problem<T>& pb, const std::vector<double>& ploss, int nterms, const GradPartials<T>& parts,
                     int nthreads) {
  const long C = parts.C;
  const auto& pw = parts.w;
  const auto& pbias = parts.b;
  const long B = pb.B, N = pb.N;
  const int L = (int)pb.w.size();
#pragma omp parallel for schedule(static) num_threads(nthreads)
  for (long b = 0; b < B; ++b) {
    for (int k = 0; k < nterms; ++k) {
      double s = 0.0;
      for (long c = 0; c < C; ++c) s += ploss[(b * C + c) * nterms + k];
      if (pb.loss) pb.loss[b * nterms + k] = T(s / double(N));
    }
    if (C == 1) continue;
    for (int l = 0; l < L; ++l) {
      const long nw = pb.fan_in[l] * pb.fan_out[l], nb = pb.fan_out[l];
      for (long i = 0; i < nw; ++i) {
        T acc = T(0);
        for (long c = 0; c < C; ++c) acc += pw[l][(b * C + c) * nw + i];
        pb.dw[l][b * nw + i] = acc;
      }
      for (long i = 0; i < nb; ++i) {
        T acc = T(0);
        for (long c = 0; c < C; ++c) acc += pbias[l][(b * C + c) * nb + i];
        pb.db[l][b * nb + i] = acc;
      }
    }
  }
}

// Runs one problem with D-dimensional points: units = (model, chunk of points); each unit is processed by one thread
// in a fixed tile order, so results do not depend on the thread count.
// Returns NONFINITE_* flags for inputs holding NaN or Inf (the outputs are then meaningless).
enum { NONFINITE_X = 1, NONFINITE_AUX = 2 };
template <typename T, int D>
int run(const Problem<T>& pb, int nthreads) {
  const long B = pb.B, N = pb.N;
  const bool grads = pb.mode != FourierMlpMode::Forward;
  const long chunk = grads ? pb.chunk : 4 * TILE;
  const long C = (N + chunk - 1) / chunk;
  const long units = B * C;
  GradPartials<T> parts(pb, units, C, grads);
  std::vector<double> ploss(grads ? units : 0, 0.0);
  int flags = 0;
#pragma omp parallel num_threads(nthreads) reduction(| : flags)
  {
    Engine<T, D> eng(pb);
    std::vector<T> yt(TILE), gt(TILE);
#pragma omp for schedule(dynamic, 1)
    for (long u = 0; u < units; ++u) {
      const long b = u / C, c = u % C;
      const long n0 = c * chunk, n1 = std::min(N, n0 + chunk);
      eng.pack(b);
      if (grads) {
        eng.gw.zero();
        eng.gb.zero();
      }
      double loss = 0.0;
      const T* xb = pb.x + (pb.x_shared ? 0 : b * N * D);
      for (long t0 = n0; t0 < n1; t0 += TILE) {
        const long cnt = std::min<long>(TILE, n1 - t0);
        if (eng.features(xb + t0 * D, cnt)) flags |= NONFINITE_X;
        eng.forward(yt.data());
        if (pb.y) std::copy(yt.data(), yt.data() + cnt, pb.y + b * N + t0);
        if (!grads) continue;
        const T* tg = pb.aux + b * N + t0;
        int bad = 0;  // targets / cotangent NaN or Inf
#pragma omp simd reduction(| : bad)
        for (long t = 0; t < cnt; ++t) bad |= tg[t] - tg[t] != T(0);
        if (bad) flags |= NONFINITE_AUX;
        T* gp = gt.data();
        const T* yp = yt.data();
        for (long t = cnt; t < TILE; ++t) gp[t] = T(0);
        if (pb.mode == FourierMlpMode::TrainStep) {
          const T scale = T(2) / T(N);
          double tl = 0.0;
#pragma omp simd reduction(+ : tl)
          for (long t = 0; t < cnt; ++t) {
            const T e = yp[t] - tg[t];
            tl += double(e) * double(e);
            gp[t] = scale * e;
          }
          loss += tl;
        } else {
          std::copy(tg, tg + cnt, gp);
        }
        eng.backward(gt.data(), pb.dx ? pb.dx + (b * N + t0) * D : nullptr, cnt);
      }
      if (!grads) continue;
      ploss[u] = loss;
      parts.write(eng, b, c);
    }
  }
  if (!grads) return flags;
  reduce_partials(pb, ploss, 1, parts, nthreads);
  return flags;
}

#include "fourier_mlp_jet_impl.h"  // the second-order (input-gradient) engine, same instance
