// Fused tanh-RNN rollouts of many recurrent matrices over the same inputs (CPU).
//   W: [A, H, H], ux: [B, T, H] (= x_t U^T, shared by all variants), V: [O, H],
//   h0: [B, H] -> y: [A, B, T, O] and optionally hs: [A, B, T, H]
//   h_t = tanh(W_a h_{t-1} + ux_t),  y_t = V h_t
// The whole time loop runs in one call. OpenMP over (variant, batch tile); inside
// a tile the recurrent matvec is a register-blocked [ROWS x H] x [H x H] product
// on W_a^T (kept in L1, padded to a multiple of 16), vectorised by the compiler
// and dispatched at run time (target_clones: avx512f / avx2 / default).
// Every (a, b) sequence is computed by one thread in a fixed order, so results
// do not depend on the thread count.
// Reference: symfast/ops/rnn_rollout/reference.py (PyTorch loop).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common.h"

namespace symfast {
namespace {

constexpr int ROWS = 4;   // batch rows sharing each load of W^T
constexpr int CW = 32;    // output columns per accumulator chunk (8 zmm accumulators with ROWS = 4)
constexpr int TILE = 16;  // batch rows per task

// tanh for float32: odd rational minimax approximation on [-7.9, 7.9] (the
// coefficients Eigen uses for its vectorised tanh); max error a few ulp, and
// vectorisable (std::tanh is not). Clamped beyond, where tanh = +-1 in float.
static inline float tanh_fast(float x) {
  const float c = 7.90531110763549805f;
  x = std::min(c, std::max(-c, x));
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  const float r = p / q;
  return std::fabs(x) < 0.0004f ? x : r;
}
static inline double tanh_fast(double x) { return std::tanh(x); }

// In place over a padded row; a separate branch-free loop so it vectorises.
static inline void tanh_row(float* x, int n) {
#pragma omp simd
  for (int k = 0; k < n; ++k) x[k] = tanh_fast(x[k]);
}
static inline void tanh_row(double* x, int n) {
  for (int k = 0; k < n; ++k) x[k] = std::tanh(x[k]);
}

// One time step for ROWS rows: hn[r, i] = act(sum_j h[r, j] WT[j, i] + u[r, i]).
template <typename T>
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)  // GCC x86-64 only (aarch64, clang: plain)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void step_rows(const T* __restrict WT, const T* __restrict h, T* __restrict hn, const T* const* u, int nrows,
               int Hp, int H) {
  for (int r0 = 0; r0 < nrows; r0 += ROWS) {
    const int nr = std::min(ROWS, nrows - r0);
    for (int i0 = 0; i0 < Hp; i0 += CW) {
      T acc[ROWS][CW];
      for (int r = 0; r < ROWS; ++r)
        for (int k = 0; k < CW; ++k) acc[r][k] = 0;
      for (int j = 0; j < H; ++j) {
        const T* w = WT + (size_t)j * Hp + i0;
#pragma GCC unroll 4
        for (int r = 0; r < ROWS; ++r) {
          const T hv = h[(size_t)(r0 + r) * Hp + j];
#pragma omp simd
          for (int k = 0; k < CW; ++k) acc[r][k] += hv * w[k];
        }
      }
      for (int r = 0; r < nr; ++r) {
        T* out = hn + (size_t)(r0 + r) * Hp + i0;
        for (int k = 0; k < CW; ++k) out[k] = acc[r][k];
        const T* ur = u[r0 + r] + i0;
        const int kmax = std::min(CW, H - i0);  // padded columns stay 0 (W^T is zero there)
        for (int k = 0; k < kmax; ++k) out[k] += ur[k];
      }
    }
    for (int r = 0; r < nr; ++r) tanh_row(hn + (size_t)(r0 + r) * Hp, Hp);
  }
}

template <typename T>
py::tuple rnn_rollout(carray<T> W, carray<T> ux, carray<T> V, carray<T> h0, bool return_hidden, int num_threads) {
  check_ndim(W, 3, "W");
  check_ndim(ux, 3, "ux");
  check_ndim(V, 2, "V");
  check_ndim(h0, 2, "h0");
  const int A = (int)W.shape(0), H = (int)W.shape(1), B = (int)ux.shape(0), Tn = (int)ux.shape(1);
  const int O = (int)V.shape(0);
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
          step_rows<T>(WT.data(), h.data(), hn.data(), urow.data(), nb, Hp, H);
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
