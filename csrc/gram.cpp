// Grams of first-layer weights on the CPU.
//   gram_fwd: W: [M, d, H] -> G = W W^T: [M, d, d] (exactly symmetric), dot products of W's rows
//             in register tiles, float64 sums in one fixed order, one instance per ISA
//             (AVX-512, AVX2 + FMA, generic) picked at run time by resolve_isa (common.h).
// OpenMP over models above a size threshold; each model's sums run in a fixed order, so results
// do not depend on the thread count.
// Reference: symfast/ops/gram/reference.py
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "common.h"

namespace symfast {

// The kernel body, one instance per instruction set: gram_isa::{avx512, avx2, generic}.
#define SYMFAST_KERNEL_NS gram_isa
#define SYMFAST_KERNEL_BODY "gram_impl.h"
#include "isa_instances.h"

namespace {

// Below this many multiply-adds (about 50 us on one core) one thread does the whole batch:
// waking the thread pool would cost a good part of what a second thread saves.
constexpr double GRAM_PARALLEL_MIN_FMAS = 1 << 20;

template <typename T>
carray<T> gram_fwd(carray<T> w, int num_threads, const std::string& isa) {
  check_ndim(w, 3, "weights");
  const py::ssize_t M = w.shape(0), d = w.shape(1), H = w.shape(2), Hp = ((H + 7) / 8) * 8;
  const Isa which = resolve_isa(isa);  // "auto" (the widest this CPU runs) or one forced by name (tests)
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
        bad += SYMFAST_ISA_CALL(which, gram_isa, gram_model<T>(wp + m * d * H, gp + m * d * d, pad.data(), d, H,
                                                               m + 1 < M ? wp + (m + 1) * d * H : nullptr));
    }
  }
  if (bad) throw std::invalid_argument("weights contains NaN or Inf");
  return out;
}

}  // namespace

// Bindings, called from module.cpp.
void bind_gram(py::module_& m) {
  def_f32_f64(m, "gram_fwd", &gram_fwd<float>, &gram_fwd<double>, "Grams W W^T, {dtype}: [M, d, H] -> [M, d, d]",
              py::arg("weights").noconvert(), py::arg("num_threads") = 1, py::arg("isa") = "auto");
}

}  // namespace symfast
