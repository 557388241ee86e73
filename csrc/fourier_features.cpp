// Fourier positional encoding on the CPU.
//   x: [N, 2], frequencies: [m, 2], phases: [m] -> out: [N, 2m]
//   out[n, 2j] = sin(w_j . x_n + b_j), out[n, 2j+1] = cos(w_j . x_n + b_j)
// Reference: symfast/ops/fourier_features/reference.py
#include <algorithm>
#include <cmath>

#include <vector>

#include "common.h"
#include "sincos.h"

namespace symfast {
namespace {

// x: [N, 2], frequencies: [m, 2], phases: [m]; returns (N, m).
std::pair<py::ssize_t, py::ssize_t> check_shapes(const py::array& x, const py::array& freq, const py::array& phase) {
  check_ndim(x, 2, "x");
  check_ndim(freq, 2, "frequencies");
  check_ndim(phase, 1, "phases");
  if (x.shape(1) != 2) throw std::invalid_argument("x must be [N, 2]");
  if (freq.shape(1) != 2) throw std::invalid_argument("frequencies must be [m, 2]");
  const py::ssize_t n = x.shape(0), m = freq.shape(0);
  if (phase.shape(0) != m) throw std::invalid_argument("phases must be [m] with m = len(frequencies)");
  return {n, m};
}

template <typename T>
carray<T> fourier_features_fwd(carray<T> x, carray<T> freq, carray<T> phase, int num_threads) {
  const auto [n, m] = check_shapes(x, freq, phase);
  carray<T> out({n, 2 * m});
  const T* xp = x.data();
  const T* wp = freq.data();
  const T* bp = phase.data();
  T* op = out.mutable_data();
  {
    py::gil_scoped_release release;
#pragma omp parallel for schedule(static) num_threads(clamp_threads(num_threads))
    for (py::ssize_t i = 0; i < n; ++i) {
      const T x0 = xp[2 * i], x1 = xp[2 * i + 1];
      T* row = op + i * 2 * m;
      for (py::ssize_t j = 0; j < m; ++j) {
        const T u = wp[2 * j] * x0 + wp[2 * j + 1] * x1 + bp[j];
        row[2 * j] = std::sin(u);
        row[2 * j + 1] = std::cos(u);
      }
    }
  }
  return out;
}

// float32: arguments for a block of points, then the shared vectorised sincos, then interleave.
template <>
carray<float> fourier_features_fwd<float>(carray<float> x, carray<float> freq, carray<float> phase,
                                          int num_threads) {
  const auto [n, m] = check_shapes(x, freq, phase);
  carray<float> out({n, 2 * m});
  const float* xp = x.data();
  const float* wp = freq.data();
  const float* bp = phase.data();
  float* op = out.mutable_data();
  constexpr py::ssize_t kBlock = 128;  // points per block: u, sin, cos stay in L1/L2
  const py::ssize_t nblocks = (n + kBlock - 1) / kBlock;
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads))
    {
      std::vector<float> u(kBlock * m), s(kBlock * m), c(kBlock * m);
#pragma omp for schedule(static)
      for (py::ssize_t blk = 0; blk < nblocks; ++blk) {
        const py::ssize_t i0 = blk * kBlock, cnt = std::min(kBlock, n - i0);
        float umax = 0.f;
        for (py::ssize_t i = 0; i < cnt; ++i) {
          const float x0 = xp[2 * (i0 + i)], x1 = xp[2 * (i0 + i) + 1];
          for (py::ssize_t j = 0; j < m; ++j) {
            u[i * m + j] = wp[2 * j] * x0 + wp[2 * j + 1] * x1 + bp[j];
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
  return out;
}

}  // namespace

// Bindings, called from module.cpp.
void bind_fourier_features(py::module_& m) {
  m.def("fourier_features_fwd_f32", &fourier_features_fwd<float>, py::arg("x"), py::arg("frequencies"),
        py::arg("phases"), py::arg("num_threads") = 1, "Fourier features, float32: [N,2] -> [N,2m]");
  m.def("fourier_features_fwd_f64", &fourier_features_fwd<double>, py::arg("x"), py::arg("frequencies"),
        py::arg("phases"), py::arg("num_threads") = 1, "Fourier features, float64: [N,2] -> [N,2m]");
}

}  // namespace symfast
