// Fourier positional encoding on the CPU.
//   x: [N, 2], frequencies: [m, 2], phases: [m] -> out: [N, 2m]
//   out[n, 2j] = sin(w_j . x_n + b_j), out[n, 2j+1] = cos(w_j . x_n + b_j)
// Reference: symfast/ops/fourier_features/reference.py
#include <cmath>

#include "common.h"
#include "registry.h"

namespace symfast {
namespace {

template <typename T>
carray<T> fourier_features_fwd(carray<T> x, carray<T> freq, carray<T> phase, int num_threads) {
  check_ndim(x, 2, "x");
  check_ndim(freq, 2, "frequencies");
  check_ndim(phase, 1, "phases");
  if (x.shape(1) != 2) throw std::invalid_argument("x must be [N, 2]");
  if (freq.shape(1) != 2) throw std::invalid_argument("frequencies must be [m, 2]");
  const py::ssize_t n = x.shape(0), m = freq.shape(0);
  if (phase.shape(0) != m) throw std::invalid_argument("phases must be [m] with m = len(frequencies)");
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

Registrar reg("fourier_features", [](py::module_& m) {
  m.def("fourier_features_fwd_f32", &fourier_features_fwd<float>, py::arg("x"), py::arg("frequencies"),
        py::arg("phases"), py::arg("num_threads") = 1, "Fourier features, float32: [N,2] -> [N,2m]");
  m.def("fourier_features_fwd_f64", &fourier_features_fwd<double>, py::arg("x"), py::arg("frequencies"),
        py::arg("phases"), py::arg("num_threads") = 1, "Fourier features, float64: [N,2] -> [N,2m]");
});

}  // namespace
}  // namespace symfast
