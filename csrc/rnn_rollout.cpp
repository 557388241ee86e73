// Fused tanh-RNN rollouts of many recurrent matrices over the same inputs (CPU).
//   W: [A, H, H], ux: [B, T, H] (= x_t U^T, shared by all variants), V: [O, H],
//   h0: [B, H] -> y: [A, B, T, O] and optionally hs: [A, B, T, H]
//   h_t = tanh(W_a h_{t-1} + ux_t),  y_t = V h_t
// The whole time loop runs in one call. OpenMP over (variant, batch tile); inside
// a tile the recurrent matvec is a register-blocked [ROWS x H] x [H x H] product
// on W_a^T (kept in L1, padded to a multiple of 16), vectorised by the compiler
// and picked at run time by resolve_isa (one instance per ISA: rnn_rollout_impl.h).
// Every (a, b) sequence is computed by one thread in a fixed order, so results
// do not depend on the thread count.
// Reference: symfast/ops/rnn_rollout/reference.py (PyTorch loop).
#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common.h"
#include "tanh_fast.h"

namespace symfast {
namespace {

constexpr int ROWS = 4;   // batch rows sharing each load of W^T
constexpr int CW = 32;    // output columns per accumulator chunk (8 zmm accumulators with ROWS = 4)
constexpr int TILE = 16;  // batch rows per task

}  // namespace

// The recurrent step, one instance per instruction set: rollout::{avx512, avx2, generic}.
#define SYMFAST_KERNEL_NS rollout
#define SYMFAST_KERNEL_BODY "rnn_rollout_impl.h"
#include "isa_instances.h"

namespace {

// A size as the loops' int: sizes arrive as 64-bit, and one above 2^31 - 1 - 32 (the padded width) would
// be truncated by a cast; refused instead, naming the size.
int checked_size(py::ssize_t n, const char* what) {
  if (n < 0 || n > (py::ssize_t)INT_MAX - CW)
    throw std::invalid_argument(std::string("rnn_rollout: ") + what + " = " + std::to_string(n) +
                                " exceeds the kernel's 32-bit sizes (at most " + std::to_string(INT_MAX - CW) + ")");
  return (int)n;
}

template <typename T>
py::tuple rnn_rollout(carray<T> W, carray<T> ux, carray<T> V, carray<T> h0, bool return_hidden, int num_threads) {
  check_ndim(W, 3, "W");
  check_ndim(ux, 3, "ux");
  check_ndim(V, 2, "V");
  check_ndim(h0, 2, "h0");
  const int A = checked_size(W.shape(0), "A (W.shape[0])"), H = checked_size(W.shape(1), "H (W.shape[1])");
  const int B = checked_size(ux.shape(0), "B (ux.shape[0])"), Tn = checked_size(ux.shape(1), "T (ux.shape[1])");
  const int O = checked_size(V.shape(0), "O (V.shape[0])");
  if (W.shape(2) != H) throw std::invalid_argument("W must be [A, H, H]");
  if (ux.shape(2) != H) throw std::invalid_argument("ux must be [B, T, H]");
  if (V.shape(1) != H) throw std::invalid_argument("V must be [O, H]");
  if (h0.shape(0) != B || h0.shape(1) != H) throw std::invalid_argument("h0 must be [B, H]");
  const int Hp = (H + CW - 1) / CW * CW;
  carray<T> Y({A, B, Tn, O});
  carray<T> Hs(return_hidden ? std::vector<py::ssize_t>{A, B, Tn, H} : std::vector<py::ssize_t>{0});
  const T *wp = W.data(), *up = ux.data(), *vp = V.data(), *h0p = h0.data();
  T* yp = Y.mutable_data();
  T* hsp = return_hidden ? Hs.mutable_data() : nullptr;
  const int ntile = (B + TILE - 1) / TILE;
  if ((int64_t)A * ntile > INT_MAX) throw std::invalid_argument("rnn_rollout: A x ceil(B / 16) tasks exceed 2^31 - 1");
  const Isa which = resolve_isa("auto");
  {
    py::gil_scoped_release release;
#pragma omp parallel num_threads(clamp_threads(num_threads))
    {
      std::vector<T> WT((size_t)H * Hp), h((size_t)(TILE + ROWS) * Hp), hn((size_t)(TILE + ROWS) * Hp);
      std::vector<const T*> urow(TILE + ROWS);
      std::vector<T> zeros(Hp, T(0));
      int cur_a = -1;
#pragma omp for schedule(static)
      for (int task = 0; task < A * ntile; ++task) {
        const int a = task / ntile, b0 = (task % ntile) * TILE, nb = std::min(TILE, B - b0);
        if (a != cur_a) {  // W_a^T, padded columns zero
          std::fill(WT.begin(), WT.end(), T(0));
          const T* Wa = wp + (size_t)a * H * H;
          for (int i = 0; i < H; ++i)
            for (int j = 0; j < H; ++j) WT[(size_t)j * Hp + i] = Wa[(size_t)i * H + j];
          cur_a = a;
        }
        std::fill(h.begin(), h.end(), T(0));
        for (int r = 0; r < nb; ++r) std::memcpy(&h[(size_t)r * Hp], h0p + (size_t)(b0 + r) * H, H * sizeof(T));
        for (int r = nb; r < TILE + ROWS; ++r) urow[r] = zeros.data();
        for (int t = 0; t < Tn; ++t) {
          for (int r = 0; r < nb; ++r) urow[r] = up + ((size_t)(b0 + r) * Tn + t) * H;
          SYMFAST_ISA_CALL(which, rollout, step_rows<T>(WT.data(), h.data(), hn.data(), urow.data(), nb, Hp, H));
          std::swap(h, hn);
          for (int r = 0; r < nb; ++r) {
            const T* hr = &h[(size_t)r * Hp];
            T* yr = yp + (((size_t)a * B + b0 + r) * Tn + t) * O;
            for (int o = 0; o < O; ++o) {
              const T* vo = vp + (size_t)o * H;
              T s = 0;
#pragma omp simd reduction(+ : s)
              for (int j = 0; j < H; ++j) s += vo[j] * hr[j];
              yr[o] = s;
            }
            if (hsp) std::memcpy(hsp + (((size_t)a * B + b0 + r) * Tn + t) * H, hr, H * sizeof(T));
          }
        }
      }
    }
  }
  return py::make_tuple(Y, Hs);
}

}  // namespace

// Bindings, called from module.cpp.
void bind_rnn_rollout(py::module_& m) {
  def_f32_f64(m, "rnn_rollout", &rnn_rollout<float>, &rnn_rollout<double>,
              "Fused tanh-RNN rollouts on {dtype} arrays (float32: rational tanh, float64: std::tanh): "
              "W[A,H,H], ux[B,T,H], V[O,H], h0[B,H] -> (y[A,B,T,O], hs)",
              py::arg("W").noconvert(), py::arg("ux").noconvert(), py::arg("V").noconvert(), py::arg("h0").noconvert(),
              py::arg("return_hidden") = false, py::arg("num_threads") = 1);
}

}  // namespace symfast
