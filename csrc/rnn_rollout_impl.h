// Recurrent step of the fused rollout (csrc/rnn_rollout.cpp), compiled once per instruction set
// by isa_instances.h (namespaces symfast::rollout::{avx512, avx2, generic}); ROWS, CW come from
// rnn_rollout.cpp, tanh_fast from tanh_fast.h. No headers here.

// In place over a padded row; a separate branch-free loop so it vectorises.
inline void tanh_row(float* x, int n) {
#pragma omp simd
  for (int k = 0; k < n; ++k) x[k] = tanh_fast(x[k]);
}
inline void tanh_row(double* x, int n) {
  for (int k = 0; k < n; ++k) x[k] = std::tanh(x[k]);
}

// One time step for ROWS rows: hn[r, i] = act(sum_j h[r, j] WT[j, i] + u[r, i]).
template <typename T>
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
