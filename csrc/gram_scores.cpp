// Readout scores of Gram observables on the CPU (the Grams themselves: csrc/gram.cpp).
//   blockperm_asym:  G: [M, d, d], perm: [E, m] int64, blocks: [E, m, 2, 2] float64
//                    -> ||rho_e^T G_m rho_e - G_m||_F: [M, E] float64, rho_e a permutation of
//                    2x2 blocks: (rho^T G rho)[perm[j], perm[k]] = B_j^T G[j, k] B_k, O(d^2) each
//   dense_asym:      G: [M, d, d], multipliers U: [nu, d, d] float64, a, b: [E] int64
//                    -> ||G U_a - (G U_b)^T||_F: [M, E] float64
//                    (= ||G rho - rho G|| = ||rho^T G rho - G|| for U_a = rho orthogonal, U_b = rho^T,
//                    G symmetric); products by a register-blocked kernel, reduced while in L1
// OpenMP over models; every (model, element) sum runs in a fixed order, so results do
// not depend on the thread count. Accumulation in float64 for both dtypes. The products and
// sums (gram_scores_impl.h) are compiled per ISA and picked by resolve_isa (common.h): the
// AVX-512 and AVX2 instances give the same bits, the generic one agrees to rounding (no FMA).
// Reference: symfast/ops/gram_scores/reference.py
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"

namespace symfast {

// The kernel body, one instance per instruction set: gram_scores_isa::{avx512, avx2, generic}.
#define SYMFAST_KERNEL_NS gram_scores_isa
#define SYMFAST_KERNEL_BODY "gram_scores_impl.h"
#include "isa_instances.h"

namespace {

inline py::ssize_t padded(py::ssize_t d) { return d <= 64 ? ((d + 7) / 8) * 8 : d; }

template <typename T>
carray<double> blockperm_asym(carray<T> g, carray<int64_t> perm, carray<double> blocks, int num_threads,
                              const std::string& isa) {
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
  const Isa chosen = resolve_isa(isa);
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
          op[m * E + e] = std::sqrt(SYMFAST_ISA_CALL(chosen, gram_scores_isa,
                                                      blockperm_sq(pad.data(), pp + e * nb, bp + e * nb * 4, nb)));
      }
    }
  }
  return out;
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
  const Isa chosen = resolve_isa(isa);  // "auto": the widest this CPU runs; others force an instance (tests)
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
        SYMFAST_ISA_CALL(chosen, gram_scores_isa,
                         dense_model(gm.data(), up.data(), d, D, ap, bp, E, s0.data(), s1.data(), op + m * E));
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
              py::arg("num_threads") = 1, py::arg("isa") = "auto");
  def_f32_f64(m, "sym_stats", &sym_stats<float>, &sym_stats<double>,
              "(max |phi - phi^T|, max |phi|, non-finite count) of {dtype} phi [M, d, d]",
              py::arg("phi").noconvert(), py::arg("num_threads") = 1);
  def_f32_f64(m, "dense_asym", &dense_asym<float>, &dense_asym<double>,
              "||phi U_a - (phi U_b)^T||_F, fused products, {dtype} phi -> [M, E] f64", py::arg("phi").noconvert(),
              py::arg("multipliers").noconvert(), py::arg("a").noconvert(), py::arg("b").noconvert(),
              py::arg("num_threads") = 1, py::arg("isa") = "auto");
}

}  // namespace symfast
