// Gram observables and their readout scores on the CPU.
//   gram_fwd:        W: [M, d, H] -> G = W W^T: [M, d, d] (exactly symmetric)
//   blockperm_asym:  G: [M, d, d], perm: [E, m] int64, blocks: [E, m, 2, 2] float64
//                    -> ||rho_e^T G_m rho_e - G_m||_F: [M, E] float64, rho_e a permutation of
//                    2x2 blocks: (rho^T G rho)[perm[j], perm[k]] = B_j^T G[j, k] B_k, O(d^2) each
//   pair_diff_norm:  P: [M, d, U, d] (P[m, :, u, :] = G_m U_u), a, b: [E] int64
//                    -> ||P[m, :, a_e, :] - P[m, :, b_e, :]^T||_F: [M, E] float64
//                    (= ||G rho - rho G|| = ||rho^T G rho - G|| with U_a = rho, U_b = rho^T)
// OpenMP over models; every (model, element) sum runs in a fixed order, so results do
// not depend on the thread count. Accumulation in float64 for both dtypes.
// Reference: symfast/ops/gram_scores/reference.py
#include <cmath>
#include <cstdint>
#include <vector>

#include "common.h"
#include "registry.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SYMFAST_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define SYMFAST_CLONES
#endif
#define SYMFAST_INLINE inline __attribute__((always_inline))

namespace symfast {
namespace {

// One model's Gram: wt is W^T [H, d]; row i of G = sum_h W[i, h] * W^T[h, :] (contiguous, vectorises).
template <typename T>
SYMFAST_INLINE void gram_one(const T* w, T* g, double* wt, double* row, py::ssize_t d, py::ssize_t H) {
  for (py::ssize_t i = 0; i < d; ++i)
    for (py::ssize_t h = 0; h < H; ++h) wt[h * d + i] = static_cast<double>(w[i * H + h]);
  for (py::ssize_t i = 0; i < d; ++i) {
    for (py::ssize_t j = i; j < d; ++j) row[j] = 0.0;
    for (py::ssize_t h = 0; h < H; ++h) {
      const double wi = wt[h * d + i];
      const double* src = wt + h * d;
      for (py::ssize_t j = i; j < d; ++j) row[j] += wi * src[j];
    }
    for (py::ssize_t j = i; j < d; ++j) g[i * d + j] = g[j * d + i] = static_cast<T>(row[j]);
  }
}

SYMFAST_CLONES void gram_one_f32(const float* w, float* g, double* wt, double* row, py::ssize_t d, py::ssize_t H) {
  gram_one<float>(w, g, wt, row, d, H);
}
SYMFAST_CLONES void gram_one_f64(const double* w, double* g, double* wt, double* row, py::ssize_t d, py::ssize_t H) {
  gram_one<double>(w, g, wt, row, d, H);
}
inline void gram_one_t(const float* w, float* g, double* wt, double* row, py::ssize_t d, py::ssize_t H) {
  gram_one_f32(w, g, wt, row, d, H);
}
inline void gram_one_t(const double* w, double* g, double* wt, double* row, py::ssize_t d, py::ssize_t H) {
  gram_one_f64(w, g, wt, row, d, H);
}

template <typename T>
carray<T> gram_fwd(carray<T> w, int num_threads) {
  check_ndim(w, 3, "weights");
  const py::ssize_t M = w.shape(0), d = w.shape(1), H = w.shape(2);
  carray<T> out({M, d, d});
  const T* wp = w.data();
  T* gp = out.mutable_data();
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads))
    {
      std::vector<double> wt(static_cast<size_t>(H * d) + 1), row(static_cast<size_t>(d) + 1);
#pragma omp for schedule(static)
      for (py::ssize_t m = 0; m < M; ++m) gram_one_t(wp + m * d * H, gp + m * d * d, wt.data(), row.data(), d, H);
    }
  }
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

template <typename T>
carray<double> pair_diff_norm(carray<T> p, carray<int64_t> a, carray<int64_t> b, int num_threads) {
  check_ndim(p, 4, "products");
  check_ndim(a, 1, "a");
  check_ndim(b, 1, "b");
  const py::ssize_t M = p.shape(0), d = p.shape(1), U = p.shape(2), E = a.shape(0);
  if (p.shape(3) != d) throw std::invalid_argument("products must be [M, d, U, d]");
  if (b.shape(0) != E) throw std::invalid_argument("a and b must have the same length");
  const int64_t* ap = a.data();
  const int64_t* bp = b.data();
  for (py::ssize_t e = 0; e < E; ++e)
    if (ap[e] < 0 || ap[e] >= U || bp[e] < 0 || bp[e] >= U) throw std::invalid_argument("a, b must index [0, U)");
  carray<double> out({M, E});
  const T* pp = p.data();
  double* op = out.mutable_data();
  const py::ssize_t row = U * d;  // stride of i in P[m, i, u, j]
  {
    py::gil_scoped_release release;
#pragma omp parallel for schedule(static) num_threads(clamp_threads(num_threads))
    for (py::ssize_t m = 0; m < M; ++m) {
      const T* pm = pp + m * d * row;
      for (py::ssize_t e = 0; e < E; ++e) {
        const T* x = pm + ap[e] * d;  // x[i * row + j] = (G rho)[i, j]
        const T* y = pm + bp[e] * d;  // y[j * row + i] = (G rho^T)[j, i] = (rho G)[i, j]
        double acc = 0.0;
        for (py::ssize_t i = 0; i < d; ++i)
          for (py::ssize_t j = 0; j < d; ++j) {
            const double v = static_cast<double>(x[i * row + j]) - static_cast<double>(y[j * row + i]);
            acc += v * v;
          }
        op[m * E + e] = std::sqrt(acc);
      }
    }
  }
  return out;
}

Registrar reg("gram_scores", [](py::module_& m) {
  m.def("gram_fwd_f32", &gram_fwd<float>, py::arg("weights"), py::arg("num_threads") = 1,
        "Grams W W^T, float32: [M, d, H] -> [M, d, d]");
  m.def("gram_fwd_f64", &gram_fwd<double>, py::arg("weights"), py::arg("num_threads") = 1,
        "Grams W W^T, float64: [M, d, H] -> [M, d, d]");
  m.def("blockperm_asym_f32", &blockperm_asym<float>, py::arg("phi"), py::arg("perm"), py::arg("blocks"),
        py::arg("num_threads") = 1, "||rho^T phi rho - phi||_F for block-permutation lifts, float32 phi -> [M, E] f64");
  m.def("blockperm_asym_f64", &blockperm_asym<double>, py::arg("phi"), py::arg("perm"), py::arg("blocks"),
        py::arg("num_threads") = 1, "||rho^T phi rho - phi||_F for block-permutation lifts, float64 phi -> [M, E] f64");
  m.def("pair_diff_norm_f32", &pair_diff_norm<float>, py::arg("products"), py::arg("a"), py::arg("b"),
        py::arg("num_threads") = 1, "||P[:, :, a] - P[:, :, b]^T||_F, float32: [M, d, U, d] -> [M, E] f64");
  m.def("pair_diff_norm_f64", &pair_diff_norm<double>, py::arg("products"), py::arg("a"), py::arg("b"),
        py::arg("num_threads") = 1, "||P[:, :, a] - P[:, :, b]^T||_F, float64: [M, d, U, d] -> [M, E] f64");
});

}  // namespace
}  // namespace symfast
