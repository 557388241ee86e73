// Gram observables and their readout scores on the CPU.
//   gram_fwd:        W: [M, d, H] -> G = W W^T: [M, d, d] (exactly symmetric), dot products of W's
//                    rows in register tiles, one instance per ISA picked at run time
//   blockperm_asym:  G: [M, d, d], perm: [E, m] int64, blocks: [E, m, 2, 2] float64
//                    -> ||rho_e^T G_m rho_e - G_m||_F: [M, E] float64, rho_e a permutation of
//                    2x2 blocks: (rho^T G rho)[perm[j], perm[k]] = B_j^T G[j, k] B_k, O(d^2) each
//   dense_asym:      G: [M, d, d], multipliers U: [nu, d, d] float64, a, b: [E] int64
//                    -> ||G U_a - (G U_b)^T||_F: [M, E] float64
//                    (= ||G rho - rho G|| = ||rho^T G rho - G|| for U_a = rho orthogonal, U_b = rho^T,
//                    G symmetric); products by a register-blocked kernel, reduced while in L1
// OpenMP over models; every (model, element) sum runs in a fixed order, so results do
// not depend on the thread count. Accumulation in float64 for both dtypes.
// Reference: symfast/ops/gram_scores/reference.py
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SYMFAST_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SYMFAST_CLONES
#endif
#define SYMFAST_INLINE inline __attribute__((always_inline))

namespace symfast {
namespace {

// ---- small dense products in float64: C[rows, 8 NV] = A[rows, K] (lda) @ B[K, 8 NV] ----
// Register blocking: 4 rows x NV vectors of 8 doubles in accumulators, one broadcast of A
// per row and k. Fixed summation order over k (deterministic). Compiled per ISA through
// the target_clones callers (the templates are always inlined into them).
typedef double v8d __attribute__((vector_size(64), aligned(8)));

template <int NV, int RB>
SYMFAST_INLINE void mm_rows(const double* A, py::ssize_t lda, py::ssize_t K, const double* B, double* C,
                            py::ssize_t ldb = 8 * NV, py::ssize_t ldc = 8 * NV) {
  v8d acc[RB][NV];
  for (int r = 0; r < RB; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = v8d{0, 0, 0, 0, 0, 0, 0, 0};
  for (py::ssize_t k = 0; k < K; ++k) {
    const v8d* b = reinterpret_cast<const v8d*>(B + k * ldb);
    for (int r = 0; r < RB; ++r) {
      const double a = A[r * lda + k];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int v = 0; v < NV; ++v) reinterpret_cast<v8d*>(C + r * ldc)[v] = acc[r][v];
}

template <int NV>
SYMFAST_INLINE void mm_nv(const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                          double* C) {
  py::ssize_t i = 0;
  for (; i + 4 <= rows; i += 4) mm_rows<NV, 4>(A + i * lda, lda, K, B, C + i * 8 * NV);
  for (; i < rows; ++i) mm_rows<NV, 1>(A + i * lda, lda, K, B, C + i * 8 * NV);
}

// Dispatch on the padded width (8 NV >= number of columns); NV <= 8 covers d <= 64.
SYMFAST_INLINE void mm(int nv, const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                       double* C) {
  switch (nv) {
    case 1: mm_nv<1>(A, lda, rows, K, B, C); break;
    case 2: mm_nv<2>(A, lda, rows, K, B, C); break;
    case 3: mm_nv<3>(A, lda, rows, K, B, C); break;
    case 4: mm_nv<4>(A, lda, rows, K, B, C); break;
    case 5: mm_nv<5>(A, lda, rows, K, B, C); break;
    case 6: mm_nv<6>(A, lda, rows, K, B, C); break;
    case 7: mm_nv<7>(A, lda, rows, K, B, C); break;
    default: mm_nv<8>(A, lda, rows, K, B, C); break;
  }
}

// Generic fallback for d > 64 (C row stride ldc >= cols, zero-padded B not needed).
inline void mm_generic(const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                       py::ssize_t ldb, py::ssize_t cols, double* C, py::ssize_t ldc) {
  for (py::ssize_t i = 0; i < rows; ++i) {
    double* c = C + i * ldc;
    for (py::ssize_t j = 0; j < cols; ++j) c[j] = 0.0;
    for (py::ssize_t k = 0; k < K; ++k) {
      const double a = A[i * lda + k];
      const double* b = B + k * ldb;
      for (py::ssize_t j = 0; j < cols; ++j) c[j] += a * b[j];
    }
  }
}

inline py::ssize_t padded(py::ssize_t d) { return d <= 64 ? ((d + 7) / 8) * 8 : d; }

// ---- gram: G = W W^T from dot products of W's rows, upper tiles only ----
// G[i, j] = <W_i, W_j> in float64 in one fixed order: lane l (of 8) sums the products at
// h = l (mod 8) in increasing h, then the lanes are added as ((l0 + l4) + (l2 + l6)) +
// ((l1 + l5) + (l3 + l7)). Every ISA path keeps this order (P vectors of 8 / P doubles
// hold the 8 lanes), so results depend neither on the thread count nor, between the FMA
// paths (AVX-512, AVX2), on the ISA. No transpose: rows are read in place (float64 with H
// a multiple of 8) or from a zero-padded float64 copy.
template <int P> struct Lanes;
template <> struct Lanes<1> { typedef v8d type; };
template <> struct Lanes<2> { typedef double type __attribute__((vector_size(32), aligned(8))); };
template <> struct Lanes<4> { typedef double type __attribute__((vector_size(16), aligned(8))); };

// out[k] = lane sum of acc[k], k < N (N accumulators of P vectors each), in the order above.
template <int N, int P, typename V>
SYMFAST_INLINE void lane_sums(const V (*acc)[P], double* out) {
  if constexpr (P == 1 && N % 8 == 0) {  // 8 accumulators at a time by shuffles
    for (int q = 0; q < N / 8; ++q) {
      const V* a = acc[8 * q];
      V b[4], c[2];
      for (int p = 0; p < 4; ++p)  // lanes 0-3: a[2p] l + l4, lanes 4-7: a[2p + 1]
        b[p] = __builtin_shufflevector(a[2 * p], a[2 * p + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(a[2 * p], a[2 * p + 1], 4, 5, 6, 7, 12, 13, 14, 15);
      for (int p = 0; p < 2; ++p)  // lanes 0-1: (l0 + l4) + (l2 + l6), (l1 + l5) + (l3 + l7) of a[4p], 2-3: a[4p + 2],
        c[p] = __builtin_shufflevector(b[2 * p], b[2 * p + 1], 0, 1, 8, 9, 4, 5, 12, 13) +  // 4-5: a[4p + 1], 6-7: a[4p + 3]
               __builtin_shufflevector(b[2 * p], b[2 * p + 1], 2, 3, 10, 11, 6, 7, 14, 15);
      *reinterpret_cast<V*>(out + 8 * q) = __builtin_shufflevector(c[0], c[1], 0, 4, 2, 6, 8, 12, 10, 14) +
                                           __builtin_shufflevector(c[0], c[1], 1, 5, 3, 7, 9, 13, 11, 15);
    }
  } else {
    for (int k = 0; k < N; ++k) {
      double s[4];  // s[l] = lane l + lane l + 4
      if constexpr (P == 1) {
        for (int l = 0; l < 4; ++l) s[l] = acc[k][0][l] + acc[k][0][l + 4];
      } else if constexpr (P == 2) {
        const V t = acc[k][0] + acc[k][1];
        for (int l = 0; l < 4; ++l) s[l] = t[l];
      } else {
        const V lo = acc[k][0] + acc[k][2], hi = acc[k][1] + acc[k][3];
        s[0] = lo[0], s[1] = lo[1], s[2] = hi[0], s[3] = hi[1];
      }
      out[k] = (s[0] + s[2]) + (s[1] + s[3]);
    }
  }
}

// Tile G[i0 : i0 + RI, j0 : j0 + RJ] of W [d, ldw] (nv blocks of 8 per row), entries on or
// above the diagonal written to g [d, d] with their mirror (exactly symmetric). Rows past d
// repeat row d - 1 and are not stored.
template <int RI, int RJ, int P, typename T>
SYMFAST_INLINE void gram_tile(const double* W, py::ssize_t ldw, py::ssize_t nv, py::ssize_t i0, py::ssize_t j0,
                              py::ssize_t d, T* g) {
  typedef typename Lanes<P>::type V;
  constexpr int L = 8 / P;
  const double* x[RI];
  const double* y[RJ];
  for (int r = 0; r < RI; ++r) x[r] = W + (i0 + r < d ? i0 + r : d - 1) * ldw;
  for (int s = 0; s < RJ; ++s) y[s] = W + (j0 + s < d ? j0 + s : d - 1) * ldw;
  V acc[RI * RJ][P];
  for (int k = 0; k < RI * RJ; ++k)
    for (int p = 0; p < P; ++p) acc[k][p] = V{};
  for (py::ssize_t v = 0; v < nv; ++v) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      V a[RI];
      for (int r = 0; r < RI; ++r) a[r] = *reinterpret_cast<const V*>(x[r] + 8 * v + L * p);
      for (int s = 0; s < RJ; ++s) {
        const V b = *reinterpret_cast<const V*>(y[s] + 8 * v + L * p);
        for (int r = 0; r < RI; ++r) acc[r * RJ + s][p] += a[r] * b;
      }
    }
  }
  double c[RI * RJ];
  lane_sums<RI * RJ, P>(acc, c);
  if (j0 >= i0 + RI && j0 + RJ <= d) {  // whole tile above the diagonal: rows, then their mirror
    for (int r = 0; r < RI; ++r)
      for (int s = 0; s < RJ; ++s) g[(i0 + r) * d + j0 + s] = static_cast<T>(c[r * RJ + s]);
    for (int s = 0; s < RJ; ++s)
      for (int r = 0; r < RI; ++r) g[(j0 + s) * d + i0 + r] = static_cast<T>(c[r * RJ + s]);
    return;
  }
  for (int r = 0; r < RI && i0 + r < d; ++r)
    for (int s = 0; s < RJ && j0 + s < d; ++s) {
      const py::ssize_t i = i0 + r, j = j0 + s;
      if (j >= i) g[i * d + j] = g[j * d + i] = static_cast<T>(c[r * RJ + s]);
    }
}

template <typename T>
bool all_finite(const T* w, py::ssize_t n) {
  for (py::ssize_t k = 0; k < n; ++k)
    if (!std::isfinite(w[k])) return false;
  return true;
}

// One model's Gram: w [d, H] -> g [d, d]; pad: [d, roundup(H, 8)] float64 scratch; next: the
// weights of the model computed next (or null), prefetched a few lines per tile so that their
// memory latency hides behind this model's arithmetic.
// Returns 1 if w holds NaN or Inf, else 0. G[i, i] = |W_i|^2 is NaN/Inf iff row i holds
// NaN/Inf or its square sum overflows, so the weights are scanned only in that rare case; finite
// weights whose Gram overflows keep IEEE's Inf, as the reference's product does.
template <int RI, int RJ, int P, typename T>
SYMFAST_INLINE long long gram_one(const T* w, T* g, double* pad, py::ssize_t d, py::ssize_t H, const T* next) {
  const py::ssize_t Hp = ((H + 7) / 8) * 8, bytes = d * H * static_cast<py::ssize_t>(sizeof(T));
  const py::ssize_t ti = (d + RI - 1) / RI, pf_per_tile = bytes / 64 / (ti * (ti + 1) / 2 + 1) + 1;
  const char* pf = reinterpret_cast<const char*>(next);
  const char* pf_end = next ? pf + bytes : pf;
  const double* W = pad;
  if constexpr (std::is_same<T, double>::value) {
    if (Hp == H) W = w;
  }
  if (W == pad)
    for (py::ssize_t i = 0; i < d; ++i) {
      for (py::ssize_t h = 0; h < H; ++h) pad[i * Hp + h] = static_cast<double>(w[i * H + h]);
      for (py::ssize_t h = H; h < Hp; ++h) pad[i * Hp + h] = 0.0;
    }
  for (py::ssize_t i0 = 0; i0 < d; i0 += RI)
    for (py::ssize_t j0 = (i0 / RJ) * RJ; j0 < d; j0 += RJ) {
      for (py::ssize_t q = 0; q < pf_per_tile && pf < pf_end; ++q, pf += 64) __builtin_prefetch(pf);
      gram_tile<RI, RJ, P>(W, Hp, Hp / 8, i0, j0, d, g);
    }
  for (py::ssize_t i = 0; i < d; ++i)
    if (!std::isfinite(static_cast<double>(g[i * d + i]))) return all_finite(w, d * H) ? 0 : 1;
  return 0;
}

// Per-ISA instances (register tiles sized to the vector registers); picked at run time.
template <typename T>
using GramOne = long long (*)(const T*, T*, double*, py::ssize_t, py::ssize_t, const T*);
template <typename T>
long long gram_one_generic(const T* w, T* g, double* pad, py::ssize_t d, py::ssize_t H, const T* next) {
  return gram_one<2, 2, 4>(w, g, pad, d, H, next);  // 16-byte vectors (SSE2, NEON): 16 accumulators
}
#ifdef SYMFAST_ISA_INSTANCES
template <typename T>
__attribute__((target("avx2,fma"))) long long gram_one_avx2(const T* w, T* g, double* pad, py::ssize_t d,
                                                            py::ssize_t H, const T* next) {
  return gram_one<3, 2, 2>(w, g, pad, d, H, next);  // 12 ymm accumulators of 16
}
// Compiled for AVX-512F alone; resolve_isa asks for F + VL + DQ (the rule fourier_mlp needs),
// which is stricter than this instance requires but never wrong (see common.h).
template <typename T>
__attribute__((target("avx512f"))) long long gram_one_avx512(const T* w, T* g, double* pad, py::ssize_t d,
                                                             py::ssize_t H, const T* next) {
  return gram_one<4, 4, 1>(w, g, pad, d, H, next);  // 16 zmm accumulators of 32
}
#endif

// isa: "auto" (the widest this CPU runs), or "avx512", "avx2", "generic" to force one (tests, benchmarks).
template <typename T>
GramOne<T> gram_kernel(const std::string& isa) {
  switch (resolve_isa(isa)) {
#ifdef SYMFAST_ISA_INSTANCES
    case Isa::Avx512: return gram_one_avx512<T>;
    case Isa::Avx2: return gram_one_avx2<T>;
#endif
    default: return gram_one_generic<T>;
  }
}

// Below this many multiply-adds (about 50 us on one core) one thread does the whole batch:
// waking the thread pool would cost a good part of what a second thread saves.
constexpr double GRAM_PARALLEL_MIN_FMAS = 1 << 20;

template <typename T>
carray<T> gram_fwd(carray<T> w, int num_threads, const std::string& isa) {
  check_ndim(w, 3, "weights");
  const py::ssize_t M = w.shape(0), d = w.shape(1), H = w.shape(2), Hp = ((H + 7) / 8) * 8;
  const GramOne<T> one = gram_kernel<T>(isa);
  carray<T> out({M, d, d});
  const T* wp = w.data();
  T* gp = out.mutable_data();
  const bool parallel = 0.5 * static_cast<double>(M) * d * d * H >= GRAM_PARALLEL_MIN_FMAS;
  long long bad = 0;
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads)) if (parallel) reduction(+ : bad)
    {
      std::vector<double> pad(static_cast<size_t>(d * Hp) + 1);
#pragma omp for schedule(static)
      for (py::ssize_t m = 0; m < M; ++m)
        bad += one(wp + m * d * H, gp + m * d * d, pad.data(), d, H, m + 1 < M ? wp + (m + 1) * d * H : nullptr);
    }
  }
  if (bad) throw std::invalid_argument("weights contains NaN or Inf");
  return out;
}

// Squared asymmetry of one padded Gram g [D, D] (D = 2 nb) under one block-permutation lift.
// Blocks (j, k) and (k, j) give transposed differences for symmetric G: j <= k, weight 2 off the diagonal.
SYMFAST_CLONES double blockperm_sq(const double* g, const int64_t* perm, const double* B, py::ssize_t nb) {
  const py::ssize_t D = 2 * nb;
  double acc = 0.0;
  for (py::ssize_t j = 0; j < nb; ++j) {
    const double* Bj = B + 4 * j;  // [[b00, b01], [b10, b11]]
    const double* gj0 = g + (2 * j) * D;
    const double* gj1 = gj0 + D;
    const double* tj0 = g + (2 * perm[j]) * D;
    const double* tj1 = tj0 + D;
    double part = 0.0;
    for (py::ssize_t k = j; k < nb; ++k) {
      const double* Bk = B + 4 * k;
      const double g00 = gj0[2 * k], g01 = gj0[2 * k + 1], g10 = gj1[2 * k], g11 = gj1[2 * k + 1];
      // Y = G_jk B_k
      const double y00 = g00 * Bk[0] + g01 * Bk[2], y01 = g00 * Bk[1] + g01 * Bk[3];
      const double y10 = g10 * Bk[0] + g11 * Bk[2], y11 = g10 * Bk[1] + g11 * Bk[3];
      // X = B_j^T Y minus the target block G[perm j, perm k]
      const py::ssize_t c = 2 * perm[k];
      const double x00 = Bj[0] * y00 + Bj[2] * y10 - tj0[c], x01 = Bj[0] * y01 + Bj[2] * y11 - tj0[c + 1];
      const double x10 = Bj[1] * y00 + Bj[3] * y10 - tj1[c], x11 = Bj[1] * y01 + Bj[3] * y11 - tj1[c + 1];
      const double s = x00 * x00 + x01 * x01 + x10 * x10 + x11 * x11;
      part += (k == j) ? s : 2.0 * s;
    }
    acc += part;
  }
  return acc;
}

template <typename T>
carray<double> blockperm_asym(carray<T> g, carray<int64_t> perm, carray<double> blocks, int num_threads) {
  check_ndim(g, 3, "phi");
  check_ndim(perm, 2, "perm");
  check_ndim(blocks, 4, "blocks");
  const py::ssize_t M = g.shape(0), d = g.shape(1), E = perm.shape(0), nb = perm.shape(1);
  if (g.shape(2) != d) throw std::invalid_argument("phi must be [M, d, d]");
  if (nb != (d + 1) / 2) throw std::invalid_argument("perm must be [E, ceil(d / 2)]");
  if (blocks.shape(0) != E || blocks.shape(1) != nb || blocks.shape(2) != 2 || blocks.shape(3) != 2)
    throw std::invalid_argument("blocks must be [E, m, 2, 2]");
  const int64_t* pp = perm.data();
  for (py::ssize_t i = 0; i < E * nb; ++i)
    if (pp[i] < 0 || pp[i] >= nb) throw std::invalid_argument("perm entries must be in [0, m)");
  carray<double> out({M, E});
  const T* gp = g.data();
  const double* bp = blocks.data();
  double* op = out.mutable_data();
  const py::ssize_t D = 2 * nb;
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads))
    {
      std::vector<double> pad(static_cast<size_t>(D * D), 0.0);  // odd d: zero row/column, fixed by every lift
#pragma omp for schedule(static)
      for (py::ssize_t m = 0; m < M; ++m) {
        const T* src = gp + m * d * d;
        for (py::ssize_t i = 0; i < d; ++i)
          for (py::ssize_t j = 0; j < d; ++j) pad[i * D + j] = static_cast<double>(src[i * d + j]);
        for (py::ssize_t e = 0; e < E; ++e)
          op[m * E + e] = std::sqrt(blockperm_sq(pad.data(), pp + e * nb, bp + e * nb * 4, nb));
      }
    }
  }
  return out;
}

// ---- dense orthogonal lifts, fused: s = ||G U_a - (G U_b)^T||_F per (model, element) ----
// g: one model [d, d] float64; up: multipliers zero-padded [U, d, D]; slot0/slot1: [d, D]
// products G U_u for the last two multipliers (elements sharing them are adjacent).
SYMFAST_CLONES void dense_model(const double* g, const double* up, py::ssize_t d, py::ssize_t D,
                                const int64_t* a, const int64_t* b, py::ssize_t E, double* slot0, double* slot1,
                                double* out) {
  int64_t key0 = -1, key1 = -1;  // multipliers whose products slot0 / slot1 hold
  const int nv = static_cast<int>(D / 8);
  for (py::ssize_t e = 0; e < E; ++e) {
    // x = G U_a in a slot, y = G U_b in the other (or the same one when a == b); no lambda,
    // so the products are compiled inside this target clone.
    if (a[e] != key0 && a[e] != key1) {
      double* dst = (b[e] == key0) ? slot1 : slot0;
      if (d <= 64) mm(nv, g, d, d, d, up + a[e] * d * D, dst); else mm_generic(g, d, d, d, up + a[e] * d * D, D, d, dst, D);
      (dst == slot0 ? key0 : key1) = a[e];
    }
    const double* x = (a[e] == key0) ? slot0 : slot1;  // x[i * D + j] = (G rho)[i, j]
    if (b[e] != key0 && b[e] != key1) {
      double* dst = (x == slot0) ? slot1 : slot0;
      if (d <= 64) mm(nv, g, d, d, d, up + b[e] * d * D, dst); else mm_generic(g, d, d, d, up + b[e] * d * D, D, d, dst, D);
      (dst == slot0 ? key0 : key1) = b[e];
    }
    const double* y = (b[e] == key0) ? slot0 : slot1;  // y[j * D + i] = (G rho^T)[j, i] = (rho G)[i, j]
    double acc = 0.0;
    for (py::ssize_t i = 0; i < d; ++i)
      for (py::ssize_t j = 0; j < d; ++j) {
        const double v = x[i * D + j] - y[j * D + i];
        acc += v * v;
      }
    out[e] = std::sqrt(acc);
  }
}

template <typename T>
carray<double> dense_asym(carray<T> g, carray<double> u, carray<int64_t> a, carray<int64_t> b, int num_threads) {
  check_ndim(g, 3, "phi");
  check_ndim(u, 3, "multipliers");
  check_ndim(a, 1, "a");
  check_ndim(b, 1, "b");
  const py::ssize_t M = g.shape(0), d = g.shape(1), U = u.shape(0), E = a.shape(0), D = padded(g.shape(1));
  if (g.shape(2) != d) throw std::invalid_argument("phi must be [M, d, d]");
  if (u.shape(1) != d || u.shape(2) != d) throw std::invalid_argument("multipliers must be [U, d, d]");
  if (b.shape(0) != E) throw std::invalid_argument("a and b must have the same length");
  const int64_t* ap = a.data();
  const int64_t* bp = b.data();
  for (py::ssize_t e = 0; e < E; ++e)
    if (ap[e] < 0 || ap[e] >= U || bp[e] < 0 || bp[e] >= U) throw std::invalid_argument("a, b must index [0, U)");
  carray<double> out({M, E});
  const T* gp = g.data();
  double* op = out.mutable_data();
  std::vector<double> up(static_cast<size_t>(U * d * D) + 1, 0.0);  // zero-padded columns
  const double* us = u.data();
  for (py::ssize_t n = 0; n < U; ++n)
    for (py::ssize_t i = 0; i < d; ++i)
      for (py::ssize_t j = 0; j < d; ++j) up[(n * d + i) * D + j] = us[(n * d + i) * d + j];
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads))
    {
      std::vector<double> gm(static_cast<size_t>(d * d) + 1), s0(static_cast<size_t>(d * D) + 1),
          s1(static_cast<size_t>(d * D) + 1);
#pragma omp for schedule(static)
      for (py::ssize_t m = 0; m < M; ++m) {
        for (py::ssize_t i = 0; i < d * d; ++i) gm[i] = static_cast<double>(gp[m * d * d + i]);
        dense_model(gm.data(), up.data(), d, D, ap, bp, E, s0.data(), s1.data(), op + m * E);
      }
    }
  }
  return out;
}

// ---- boundary check in one pass: (max |phi - phi^T|, max |phi|, count of non-finite entries) ----
template <typename T>
py::tuple sym_stats(carray<T> g, int num_threads) {
  check_ndim(g, 3, "phi");
  const py::ssize_t M = g.shape(0), d = g.shape(1);
  if (g.shape(2) != d) throw std::invalid_argument("phi must be [M, d, d]");
  const T* gp = g.data();
  double asym = 0.0, amax = 0.0;
  long long bad = 0;
  {
    py::gil_scoped_release release;
#pragma omp parallel for schedule(static) num_threads(clamp_threads(num_threads)) \
    reduction(max : asym, amax) reduction(+ : bad)
    for (py::ssize_t m = 0; m < M; ++m) {
      const T* x = gp + m * d * d;
      for (py::ssize_t i = 0; i < d; ++i)
        for (py::ssize_t j = 0; j < d; ++j) {
          const double v = static_cast<double>(x[i * d + j]);
          if (!std::isfinite(v)) {
            ++bad;
            continue;
          }
          amax = std::fmax(amax, std::fabs(v));
          if (j > i) asym = std::fmax(asym, std::fabs(v - static_cast<double>(x[j * d + i])));
        }
    }
  }
  return py::make_tuple(asym, amax, bad);
}

}  // namespace

// Bindings, called from module.cpp.
void bind_gram_scores(py::module_& m) {
  def_f32_f64(m, "gram_fwd", &gram_fwd<float>, &gram_fwd<double>, "Grams W W^T, {dtype}: [M, d, H] -> [M, d, d]",
              py::arg("weights").noconvert(), py::arg("num_threads") = 1, py::arg("isa") = "auto");
  def_f32_f64(m, "blockperm_asym", &blockperm_asym<float>, &blockperm_asym<double>,
              "||rho^T phi rho - phi||_F for block-permutation lifts, {dtype} phi -> [M, E] f64",
              py::arg("phi").noconvert(), py::arg("perm").noconvert(), py::arg("blocks").noconvert(),
              py::arg("num_threads") = 1);
  def_f32_f64(m, "sym_stats", &sym_stats<float>, &sym_stats<double>,
              "(max |phi - phi^T|, max |phi|, non-finite count) of {dtype} phi [M, d, d]",
              py::arg("phi").noconvert(), py::arg("num_threads") = 1);
  def_f32_f64(m, "dense_asym", &dense_asym<float>, &dense_asym<double>,
              "||phi U_a - (phi U_b)^T||_F, fused products, {dtype} phi -> [M, E] f64", py::arg("phi").noconvert(),
              py::arg("multipliers").noconvert(), py::arg("a").noconvert(), py::arg("b").noconvert(),
              py::arg("num_threads") = 1);
}

}  // namespace symfast
