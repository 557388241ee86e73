// Fused batched Fourier-PE + MLP kernel body, compiled once per instruction set.
//
// fourier_mlp.cpp includes this file inside `namespace symfast::fmlp_<isa>` with VBYTES
// (vector width in bytes: 16 SSE2, 32 AVX2, 64 AVX-512) and MR (rows per register
// block) defined, under a matching `#pragma GCC target`. No headers are included here.
//
// Layout, per model b and per tile of TILE points (point-major, padded widths):
//   h0  [TILE, dp]  = [sin(u) | cos(u) | 0-pad],  u = x @ freq^T + phase   (m = d/2)
//   z_l [TILE, Hp]  = a_{l-1} @ W_l + b_l,  a_l = act(z_l)  (hidden layers)
//   y   [TILE]      = a_L . w_out + b_out
// and the backward of each layer over the same tile, in cache:
//   dz_l = da_l * act'(z_l);  dW_l += a_{l-1}^T dz_l;  db_l += sum_t dz_l;  da_{l-1} = dz_l W_l^T
// W_1's rows are permuted into the [sin | cos] order when packed and back when written.
// Every product is one register-blocked micro-kernel C[MR, 2 vectors] += A(i, p) * Bm[p, :].

template <typename T>
struct Vec {
  typedef T v __attribute__((vector_size(VBYTES), aligned(sizeof(T))));  // unaligned-safe
  static constexpr int W = VBYTES / (int)sizeof(T);
};

constexpr int NV = 2;      // vectors per register block (columns)
constexpr int TILE = 96;   // points per tile: a multiple of every MR used (4, 6, 12)

inline long pad_to(long n, long w) { return (n + w - 1) / w * w; }

// C[i, jv] (i < R, jv < NC vectors) = init + sum_p A[i*ars + p*aps] * Bm[p*ldb + jv*W ...]
// init: C itself (INIT_ACC), zero (INIT_ZERO) or the bias row (INIT_BIAS); RELU stores max(., 0).
enum Init { INIT_ACC = 0, INIT_ZERO = 1, INIT_BIAS = 2 };

template <typename T, int R, int NC, int INIT, bool RELU>
inline void micro(int P, const T* A, long ars, long aps, const T* Bm, long ldb, T* C, long ldc, const T* bias) {
  using V = typename Vec<T>::v;
  constexpr int W = Vec<T>::W;
  V acc[R][NC];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NC; ++j) {
      if constexpr (INIT == INIT_ACC) acc[i][j] = *(const V*)(C + i * ldc + j * W);
      else if constexpr (INIT == INIT_BIAS) acc[i][j] = *(const V*)(bias + j * W);
      else acc[i][j] = V{};
    }
  for (int p = 0; p < P; ++p) {
    V bv[NC];
    for (int j = 0; j < NC; ++j) bv[j] = *(const V*)(Bm + p * ldb + j * W);
    const T* ap = A + p * aps;
    for (int i = 0; i < R; ++i) {
      const T a = ap[i * ars];
      for (int j = 0; j < NC; ++j) acc[i][j] += a * bv[j];
    }
  }
  for (int i = 0; i < R; ++i) {
    T* c = C + i * ldc;
    for (int j = 0; j < NC; ++j) *(V*)(c + j * W) = acc[i][j];
    if constexpr (RELU) {  // max(., 0) on the block just stored (in L1); a vector-extension
#pragma omp simd          // compare/select compiles to slow code for AVX-512 with GCC 12
      for (int k = 0; k < NC * W; ++k) c[k] = c[k] > T(0) ? c[k] : T(0);
    }
  }
}

template <typename T, int R, int INIT, bool RELU>
inline void micro_rows(int P, const T* A, long ars, long aps, const T* Bm, long ldb, T* C, long ldc, long ncols,
                       const T* bias) {
  constexpr int W = Vec<T>::W;
  long j = 0;
  for (; j + NV * W <= ncols; j += NV * W)
    micro<T, R, NV, INIT, RELU>(P, A, ars, aps, Bm + j, ldb, C + j, ldc, bias + j);
  for (; j < ncols; j += W) micro<T, R, 1, INIT, RELU>(P, A, ars, aps, Bm + j, ldb, C + j, ldc, bias + j);
}

template <typename T, int R, int INIT, bool RELU>
inline void micro_tail(int r, int P, const T* A, long ars, long aps, const T* Bm, long ldb, T* C, long ldc,
                       long ncols, const T* bias) {
  if constexpr (R > 0) {
    if (r == R) return micro_rows<T, R, INIT, RELU>(P, A, ars, aps, Bm, ldb, C, ldc, ncols, bias);
    return micro_tail<T, R - 1, INIT, RELU>(r, P, A, ars, aps, Bm, ldb, C, ldc, ncols, bias);
  }
}

// C[M, ncols] (=|+=) A(M x P) @ Bm[P, ncols] (+ bias); ncols a multiple of the vector width.
template <typename T, int INIT = INIT_ACC, bool RELU = false>
void gemm(long M, long ncols, int P, const T* A, long ars, long aps, const T* Bm, long ldb, T* C, long ldc,
          const T* bias = nullptr) {
  long i = 0;
  for (; i + MR <= M; i += MR)
    micro_rows<T, MR, INIT, RELU>(P, A + i * ars, ars, aps, Bm, ldb, C + i * ldc, ldc, ncols, bias);
  if (i < M)
    micro_tail<T, MR - 1, INIT, RELU>((int)(M - i), P, A + i * ars, ars, aps, Bm, ldb, C + i * ldc, ldc, ncols,
                                      bias);
}

// ---- elementwise math (vectorisable scalar code; fp64 uses libm for check-grade accuracy) ----
#define SF_INLINE inline __attribute__((always_inline))
SF_INLINE float exp_poly(float x) {  // Cephes expf, ~1 ulp on [-87, 88]
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  const float n = __builtin_rintf(x * 1.44269504088896341f);
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

// sin and cos with Cody-Waite reduction by pi/2 (accurate for |u| < ~1e4).
SF_INLINE void sincos_poly(float u, float& s, float& c) {
  const float q = __builtin_rintf(u * 0.636619772367581343f);
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
SF_INLINE void sincos_poly(double u, double& s, double& c) { s = std::sin(u); c = std::cos(u); }

// Array form of sincos_poly (compiled for this instruction set; used by the accuracy test).
inline void sincos_array(const float* u, float* s, float* c, long n) {
#pragma omp simd
  for (long i = 0; i < n; ++i) sincos_poly(u[i], s[i], c[i]);
}

enum Act { RELU = 0, TANH = 1, SILU = 2, SINE = 3 };

SF_INLINE float tanh_f(float z) {  // branch-free so that it vectorises on AVX2 too
  const float az = __builtin_fabsf(z);
  const float e = exp_poly(-2.0f * az);
  const float z2 = z * z;
  const float small = az * (1.0f + z2 * (-0.333333333f + z2 * 0.133333333f));
  const float t = az < 0.04f ? small : (1.0f - e) / (1.0f + e);
  return __builtin_copysignf(t, z);
}
SF_INLINE float sigmoid_f(float z) { return 1.0f / (1.0f + exp_poly(-z)); }
SF_INLINE double tanh_f(double z) { return std::tanh(z); }
SF_INLINE double sigmoid_f(double z) { return 1.0 / (1.0 + std::exp(-z)); }
#undef SF_INLINE

template <typename T>
void activate(int act, const T* __restrict z, T* __restrict a, long n) {
  switch (act) {
    case RELU:
#pragma omp simd
      for (long i = 0; i < n; ++i) a[i] = z[i] > T(0) ? z[i] : T(0);
      break;
    case TANH:
#pragma omp simd
      for (long i = 0; i < n; ++i) a[i] = tanh_f(z[i]);
      break;
    case SILU:
#pragma omp simd
      for (long i = 0; i < n; ++i) a[i] = z[i] * sigmoid_f(z[i]);
      break;
    default: {
#pragma omp simd
      for (long i = 0; i < n; ++i) {
        T s, c;
        sincos_poly(z[i], s, c);
        a[i] = s;
      }
    }
  }
}

// g[i] *= act'(z[i]) given z and a = act(z).
template <typename T>
void activate_bwd(int act, const T* __restrict z, const T* __restrict a, T* __restrict g, long n) {
  switch (act) {
    case RELU:  // a > 0 iff z > 0 (z is not stored for relu)
#pragma omp simd
      for (long i = 0; i < n; ++i) g[i] = a[i] > T(0) ? g[i] : T(0);
      break;
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
#pragma omp simd
      for (long i = 0; i < n; ++i) {
        T s, c;
        sincos_poly(z[i], s, c);
        g[i] *= c;
      }
    }
  }
}

// ---- the per-thread tile engine ----
template <typename T>
struct Engine {
  static constexpr int W = Vec<T>::W;
  const Problem<T>& pb;
  int L;                      // number of linear layers (hidden + output)
  long m, d, dp;              // frequencies, features, padded features
  std::vector<long> fin, fout, foutp;  // per layer fan-in, fan-out, padded fan-out
  Buf<T> wpk, wtpk, bpk, gw, gb, h0, dh0, x0, x1;  // packed weights, W^T, biases; grads; features
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
      ws += fin[l] * foutp[l];
      wts += fout[l] * finp;
      bs += foutp[l];
    }
    wpk.resize(ws);
    wtpk.resize(wts);
    bpk.resize(bs);
    gw.resize(ws);
    gb.resize(bs);
    h0.resize(TILE * dp);
    x0.resize(TILE);
    x1.resize(TILE);
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
  void features(const T* x, long cnt) {
    const T* fr = pb.freq;
    const T* ph = pb.phase;
    for (long t = 0; t < TILE; ++t) {
      x0.p[t] = t < cnt ? x[2 * t] : T(0);
      x1.p[t] = t < cnt ? x[2 * t + 1] : T(0);
    }
    for (long j = 0; j < m; ++j) {
      const T f0 = fr[2 * j], f1 = fr[2 * j + 1], b = ph[j];
      T* rs = h0.p + j * TILE;
      T* rc = h0.p + (m + j) * TILE;
      const T* xa = x0.p;
      const T* xb = x1.p;
#pragma omp simd aligned(rs, rc : 16)
      for (long t = 0; t < TILE; ++t) {
        const T u = f0 * xa[t] + f1 * xb[t] + b;
        T s, c;
        sincos_poly(u, s, c);
        rs[t] = s;
        rc[t] = c;
      }
    }
  }

  // z_l, a_l = act(z_l) from the previous activations A(t, k) = in[t * ars + k * aps].
  void layer_fwd(long ars, long aps, const T* in, int l) {
    const T* bias = bpk.p + bofs[l];
    if (pb.act == RELU) {  // a = max(z, 0) in the epilogue; the backward only needs a > 0
      gemm<T, INIT_BIAS, true>(TILE, foutp[l], (int)fin[l], in, ars, aps, wpk.p + wofs[l], foutp[l], a[l].p,
                               foutp[l], bias);
    } else {
      gemm<T, INIT_BIAS, false>(TILE, foutp[l], (int)fin[l], in, ars, aps, wpk.p + wofs[l], foutp[l], z[l].p,
                                foutp[l], bias);
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
    const T* wo = wpk.p + wofs[L - 1];  // [H] (fan_out 1, unpadded)
    const T bo = bpk.p[bofs[L - 1]];
    const long H = fin[L - 1];
    for (long t = 0; t < TILE; ++t) {
      T s = T(0);
      const T* r = in + t * ld;
#pragma omp simd reduction(+ : s)
      for (long j = 0; j < H; ++j) s += r[j] * wo[j];
      yt[t] = s + bo;
    }
  }

  // Backward over one tile from g[TILE] = dLoss/dy (zero on padded rows).
  void backward(const T* g, T* dxt, const T* x, long cnt) {
    const int Lh = L - 1;
    const T* aL = a[Lh - 1].p;  // at least one hidden layer (checked by the binding)
    const long ldL = foutp[Lh - 1];
    const long H = fin[L - 1];
    const T* wo = wpk.p + wofs[L - 1];  // [H] (fan_out 1, unpadded)
    T* gwo = gw.p + wofs[L - 1];
    T gbo = T(0);
    // output layer: dw_out += a_L^T g, db_out += sum g, da_L = g w_out^T
    T* daL = da[Lh - 1].p;
    for (long t = 0; t < TILE; ++t) {
      const T gt = g[t];
      gbo += gt;
      const T* r = aL + t * ldL;
      T* dr = daL + t * ldL;
#pragma omp simd
      for (long j = 0; j < H; ++j) {
        gwo[j] += gt * r[j];
        dr[j] = gt * wo[j];
      }
      for (long j = H; j < ldL; ++j) dr[j] = T(0);
    }
    gb.p[bofs[L - 1]] += gbo;
    for (int l = Lh - 1; l >= 0; --l) {
      const long Hp = foutp[l];
      T* dz = da[l].p;  // becomes dz in place
      activate_bwd<T>(pb.act, z[l].p, a[l].p, dz, TILE * Hp);
      T* gbl = gb.p + bofs[l];
      for (long t = 0; t < TILE; ++t) {
        const T* r = dz + t * Hp;
#pragma omp simd
        for (long j = 0; j < Hp; ++j) gbl[j] += r[j];
      }
      const T* prev = l > 0 ? a[l - 1].p : h0.p;
      const long ldp = l > 0 ? foutp[l - 1] : dp;
      // dW_l[K, Hp] += prev^T[K, TILE] @ dz[TILE, Hp]
      if (l > 0)
        gemm<T>(fin[l], Hp, TILE, prev, 1, ldp, dz, Hp, gw.p + wofs[l], Hp);
      else  // prev = hT[k, t]
        gemm<T>(fin[l], Hp, TILE, prev, TILE, 1, dz, Hp, gw.p + wofs[l], Hp);
      if (l > 0 || dxt) {
        T* dprev = l > 0 ? da[l - 1].p : dh0.p;
        // dprev[TILE, ldp] = dz[TILE, fout] @ W_l^T[fout, ldp]
        gemm<T, INIT_ZERO>(TILE, ldp, (int)fout[l], dz, Hp, 1, wtpk.p + wtofs[l], ldp, dprev, ldp);
      }
    }
    if (dxt) {
      const T* fr = pb.freq;
      for (long t = 0; t < cnt; ++t) {
        const T* hs = h0.p + t;  // hT: stride TILE
        const T* gh = dh0.p + t * dp;
        T g0 = T(0), g1 = T(0);
#pragma omp simd reduction(+ : g0, g1)
        for (long j = 0; j < m; ++j) {
          const T du = gh[j] * hs[(m + j) * TILE] - gh[m + j] * hs[j * TILE];  // d/du of sin, cos
          g0 += du * fr[2 * j];
          g1 += du * fr[2 * j + 1];
        }
        dxt[2 * t] = g0;
        dxt[2 * t + 1] = g1;
      }
    }
    (void)x;
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

// Runs one problem: units = (model, chunk of points); each unit is processed by one thread
// in a fixed tile order, so results do not depend on the thread count.
template <typename T>
void run(const Problem<T>& pb, int nthreads) {
  const long B = pb.B, N = pb.N;
  const bool grads = pb.mode != 0;
  const long chunk = grads ? pb.chunk : 4 * TILE;
  const long C = (N + chunk - 1) / chunk;
  const long units = B * C;
  const int L = (int)pb.w.size();
  // Partial gradients per (model, chunk) when a model spans several chunks.
  std::vector<std::vector<T>> pw, pbias;
  std::vector<double> ploss(grads ? units : 0, 0.0);
  if (grads && C > 1) {
    for (int l = 0; l < L; ++l) {
      pw.emplace_back((size_t)units * pb.fan_in[l] * pb.fan_out[l]);
      pbias.emplace_back((size_t)units * pb.fan_out[l]);
    }
  }
#pragma omp parallel num_threads(nthreads)
  {
    Engine<T> eng(pb);
    std::vector<T> yt(TILE), gt(TILE);
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
      double loss = 0.0;
      const T* xb = pb.x + (pb.x_shared ? 0 : b * N * 2);
      for (long t0 = n0; t0 < n1; t0 += TILE) {
        const long cnt = std::min<long>(TILE, n1 - t0);
        eng.features(xb + t0 * 2, cnt);
        eng.forward(yt.data());
        if (pb.y) std::copy(yt.data(), yt.data() + cnt, pb.y + b * N + t0);
        if (!grads) continue;
        const T* tg = pb.aux + b * N + t0;
        for (long t = 0; t < TILE; ++t) gt[t] = T(0);
        if (pb.mode == 1) {
          const T scale = T(2) / T(N);
          for (long t = 0; t < cnt; ++t) {
            const T e = yt[t] - tg[t];
            loss += double(e) * double(e);
            gt[t] = scale * e;
          }
        } else {
          for (long t = 0; t < cnt; ++t) gt[t] = tg[t];
        }
        eng.backward(gt.data(), pb.dx ? pb.dx + (b * N + t0) * 2 : nullptr, xb + t0 * 2, cnt);
      }
      if (!grads) continue;
      ploss[u] = loss;
      if (C == 1) {
        eng.write_grads(pb.dw.data(), pb.db.data(), b);
      } else {
        for (int l = 0; l < L; ++l) {
          dwp[l] = pw[l].data() + c * pb.fan_in[l] * pb.fan_out[l];
          dbp[l] = pbias[l].data() + c * pb.fan_out[l];
        }
        eng.write_grads(dwp.data(), dbp.data(), b * C);  // slot u = b*C + c
      }
    }
  }
  if (!grads) return;
  // Reduce per-model partials in chunk order (deterministic).
#pragma omp parallel for schedule(static) num_threads(nthreads)
  for (long b = 0; b < B; ++b) {
    double s = 0.0;
    for (long c = 0; c < C; ++c) s += ploss[b * C + c];
    if (pb.loss) pb.loss[b] = T(s / double(N));
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
