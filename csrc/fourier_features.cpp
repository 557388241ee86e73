// Fourier positional encoding on the CPU.
//   x: [N, D], frequencies: [m, D], phases: [m] -> out: [N, 2m]   (D = 2 or 3)
//   out[n, 2j] = sin(w_j . x_n + b_j), out[n, 2j+1] = cos(w_j . x_n + b_j)
// Reference: symfast/ops/fourier_features/reference.py
#include <algorithm>
#include <cmath>
#include <tuple>
#include <type_traits>
#include <vector>

#include "common.h"
#include "sincos.h"

namespace symfast {
namespace {

// x: [N, D], frequencies: [m, D], phases: [m] with D = 2 or 3; returns (N, m, D).
std::tuple<py::ssize_t, py::ssize_t, int> check_shapes(const py::array& x, const py::array& freq,
                                                       const py::array& phase) {
  check_ndim(x, 2, "x");
  check_ndim(freq, 2, "frequencies");
  check_ndim(phase, 1, "phases");
  const py::ssize_t D = freq.shape(1);
  if (D != 2 && D != 3) throw std::invalid_argument("frequencies must be [m, D] with D = 2 or 3");
  if (x.shape(1) != D) throw std::invalid_argument("x must be [N, D] with D = frequencies.shape[1]");
  const py::ssize_t n = x.shape(0), m = freq.shape(0);
  if (phase.shape(0) != m) throw std::invalid_argument("phases must be [m] with m = len(frequencies)");
  return {n, m, (int)D};
}

// w . x + b, summed in coordinate order (as the reference's x @ w^T + b).
template <int D, typename T>
inline T argument(const T* w, const T* x, T b) {
  T u = w[0] * x[0];
  for (int i = 1; i < D; ++i) u += w[i] * x[i];
  return u + b;
}

// float64 (and the generic path): libm per element.
template <int D, typename T>
void features_libm(const T* xp, const T* wp, const T* bp, T* op, py::ssize_t n, py::ssize_t m, int num_threads) {
#pragma omp parallel for schedule(static) num_threads(clamp_threads(num_threads))
  for (py::ssize_t i = 0; i < n; ++i) {
    T* row = op + i * 2 * m;
    for (py::ssize_t j = 0; j < m; ++j) {
      const T u = argument<D>(wp + D * j, xp + D * i, bp[j]);
      row[2 * j] = std::sin(u);
      row[2 * j + 1] = std::cos(u);
    }
  }
}

// float32: arguments for a block of points, then the shared vectorised sincos, then interleave.
template <int D>
void features_f32(const float* xp, const float* wp, const float* bp, float* op, py::ssize_t n, py::ssize_t m,
                  int num_threads) {
  constexpr py::ssize_t kBlock = 128;  // points per block: u, sin, cos stay in L1/L2
  const py::ssize_t nblocks = (n + kBlock - 1) / kBlock;
#pragma omp parallel num_threads(clamp_threads(num_threads))
  {
    std::vector<float> u(kBlock * m), s(kBlock * m), c(kBlock * m);
#pragma omp for schedule(static)
    for (py::ssize_t blk = 0; blk < nblocks; ++blk) {
      const py::ssize_t i0 = blk * kBlock, cnt = std::min(kBlock, n - i0);
      float umax = 0.f;
      for (py::ssize_t i = 0; i < cnt; ++i) {
        const float* xi = xp + D * (i0 + i);
        for (py::ssize_t j = 0; j < m; ++j) {
          u[i * m + j] = argument<D>(wp + D * j, xi, bp[j]);
          umax = std::max(umax, std::fabs(u[i * m + j]));
        }
      }
      if (umax < kSinCosPolyRange) {
        sincos_f32_dispatch(u.data(), s.data(), c.data(), static_cast<long>(cnt * m));
      } else {  // beyond the polynomial's reduction range (or NaN): libm, exact to 1 ulp
        for (py::ssize_t k = 0; k < cnt * m; ++k) {
          s[k] = std::sin(u[k]);
          c[k] = std::cos(u[k]);
        }
      }
      float* row = op + i0 * 2 * m;
      for (py::ssize_t k = 0; k < cnt * m; ++k) {
        row[2 * k] = s[k];
        row[2 * k + 1] = c[k];
      }
    }
  }
}

template <int D, typename T>
void features(const T* xp, const T* wp, const T* bp, T* op, py::ssize_t n, py::ssize_t m, int num_threads) {
  if constexpr (std::is_same_v<T, float>) features_f32<D>(xp, wp, bp, op, n, m, num_threads);
  else features_libm<D>(xp, wp, bp, op, n, m, num_threads);
}

template <typename T>
carray<T> fourier_features_fwd(carray<T> x, carray<T> freq, carray<T> phase, int num_threads) {
  const auto [n, m, D] = check_shapes(x, freq, phase);
  carray<T> out({n, 2 * m});
  const T* xp = x.data();
  const T* wp = freq.data();
  const T* bp = phase.data();
  T* op = out.mutable_data();
  {
    py::gil_scoped_release release;
    if (D == 3) features<3>(xp, wp, bp, op, n, m, num_threads);
    else features<2>(xp, wp, bp, op, n, m, num_threads);
  }
  return out;
}

}  // namespace

// Bindings, called from module.cpp.
void bind_fourier_features(py::module_& m) {
  def_f32_f64(m, "fourier_features_fwd", &fourier_features_fwd<float>, &fourier_features_fwd<double>,
              "Fourier features, {dtype}: [N,D] -> [N,2m], D = 2 or 3", py::arg("x"), py::arg("frequencies"),
              py::arg("phases"), py::arg("num_threads") = 1);
}

}  // namespace symfast
