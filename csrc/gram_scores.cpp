// Readout scores of Gram observables on the CPU (the Grams themselves: csrc/gram.cpp).
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
#include <vector>

#include "common.h"

#ifdef SYMFAST_ISA_INSTANCES
#define SYMFAST_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SYMFAST_CLONES
#endif

namespace symfast {
namespace {

// ---- small dense products in float64: C[rows, D] = A[rows, K] (lda) @ B[K, D], D = 8 nv8 ----
// Register blocking in the machine's own vector width (`lanes` doubles per register, from
// resolve_isa): RB rows x NV vectors of accumulators and one broadcast of A per row and k.
// Vectors wider than the registers are split by the compiler through the stack, which made
// 8-double vectors on AVX2 about 10x slower than in registers. Each output element sums over k
// in increasing order in every variant (deterministic; the blocking never changes a sum).
// Compiled per ISA through the target_clones callers (the templates are always inlined into them).
// C[RB rows, NV vectors of L doubles] from B's columns at B (row stride ld); C has row stride ld
// too. The vector type is declared here, not passed in: GCC drops the aligned(8) attribute of a
// typedef given as a template argument, and then stores to unaligned rows with aligned moves.
template <int L, int NV, int RB>
SYMFAST_INLINE void mm_rows(const double* A, py::ssize_t lda, py::ssize_t K, const double* B, py::ssize_t ld,
                            double* C) {
  typedef double V __attribute__((vector_size(8 * L), aligned(8)));
  V acc[RB][NV];
  for (int r = 0; r < RB; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (py::ssize_t k = 0; k < K; ++k) {
    const V* b = reinterpret_cast<const V*>(B + k * ld);
    for (int r = 0; r < RB; ++r) {
      const double a = A[r * lda + k];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int v = 0; v < NV; ++v) reinterpret_cast<V*>(C + r * ld)[v] = acc[r][v];
}

template <int L, int NV, int RB>
SYMFAST_INLINE void mm_block(const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                             py::ssize_t ld, double* C) {
  py::ssize_t i = 0;
  for (; i + RB <= rows; i += RB) mm_rows<L, NV, RB>(A + i * lda, lda, K, B, ld, C + i * ld);
  for (; i < rows; ++i) mm_rows<L, NV, 1>(A + i * lda, lda, K, B, ld, C + i * ld);
}

template <int NV8>
SYMFAST_INLINE void mm_wide(const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                            double* C) {
  mm_block<8, NV8, 4>(A, lda, rows, K, B, 8 * NV8, C);  // 4 x NV8 <= 32 zmm accumulators
}

// Dispatch on the register width (lanes: 8 AVX-512, 4 AVX2, 2 otherwise) and the padded width
// D = 8 nv8 (nv8 <= 8 covers d <= 64). Narrow registers take 16 or 8 columns at a time, 3 rows:
// 12 accumulators, which leaves room for the broadcast and the product in 16 registers.
SYMFAST_INLINE void mm(int lanes, int nv8, const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K,
                       const double* B, double* C) {
  const py::ssize_t D = 8 * static_cast<py::ssize_t>(nv8);
  if (lanes == 8) {
    switch (nv8) {
      case 1: mm_wide<1>(A, lda, rows, K, B, C); break;
      case 2: mm_wide<2>(A, lda, rows, K, B, C); break;
      case 3: mm_wide<3>(A, lda, rows, K, B, C); break;
      case 4: mm_wide<4>(A, lda, rows, K, B, C); break;
      case 5: mm_wide<5>(A, lda, rows, K, B, C); break;
      case 6: mm_wide<6>(A, lda, rows, K, B, C); break;
      case 7: mm_wide<7>(A, lda, rows, K, B, C); break;
      default: mm_wide<8>(A, lda, rows, K, B, C); break;
    }
    return;
  }
  py::ssize_t c = 0;
  if (lanes == 4) {
    for (; c + 16 <= D; c += 16) mm_block<4, 4, 3>(A, lda, rows, K, B + c, D, C + c);
    if (c < D) mm_block<4, 2, 3>(A, lda, rows, K, B + c, D, C + c);
    return;
  }
  for (; c < D; c += 8) mm_block<2, 4, 3>(A, lda, rows, K, B + c, D, C + c);
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
                                double* out, int lanes) {
  int64_t key0 = -1, key1 = -1;  // multipliers whose products slot0 / slot1 hold
  const int nv = static_cast<int>(D / 8);
  for (py::ssize_t e = 0; e < E; ++e) {
    // x = G U_a in a slot, y = G U_b in the other (or the same one when a == b); no lambda,
    // so the products are compiled inside this target clone.
    if (a[e] != key0 && a[e] != key1) {
      double* dst = (b[e] == key0) ? slot1 : slot0;
      if (d <= 64) mm(lanes, nv, g, d, d, d, up + a[e] * d * D, dst); else mm_generic(g, d, d, d, up + a[e] * d * D, D, d, dst, D);
      (dst == slot0 ? key0 : key1) = a[e];
    }
    const double* x = (a[e] == key0) ? slot0 : slot1;  // x[i * D + j] = (G rho)[i, j]
    if (b[e] != key0 && b[e] != key1) {
      double* dst = (x == slot0) ? slot1 : slot0;
      if (d <= 64) mm(lanes, nv, g, d, d, d, up + b[e] * d * D, dst); else mm_generic(g, d, d, d, up + b[e] * d * D, D, d, dst, D);
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
carray<double> dense_asym(carray<T> g, carray<double> u, carray<int64_t> a, carray<int64_t> b, int num_threads,
                          const std::string& isa) {
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
  const Isa chosen = resolve_isa(isa);  // "auto": the widest this CPU runs; others force a width (tests)
  const int lanes = chosen == Isa::Avx512 ? 8 : chosen == Isa::Avx2 ? 4 : 2;  // doubles per vector register
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
        dense_model(gm.data(), up.data(), d, D, ap, bp, E, s0.data(), s1.data(), op + m * E, lanes);
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
              py::arg("num_threads") = 1, py::arg("isa") = "auto");
}

}  // namespace symfast
