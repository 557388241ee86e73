// Gram kernel body (csrc/gram.cpp), compiled once per instruction set by isa_instances.h
// (namespaces symfast::gram_isa::{avx512, avx2, generic}), VBYTES defined. No headers here.

typedef double v8d __attribute__((vector_size(64), aligned(8)));

// ---- gram: G = W W^T from dot products of W's rows, upper tiles only ----
// G[i, j] = <W_i, W_j> in float64 in one fixed order: lane l (of 8) sums the products at
// h = l (mod 8) in increasing h, then the lanes are added as ((l0 + l4) + (l2 + l6)) +
// ((l1 + l5) + (l3 + l7)). Every ISA path keeps this order (P vectors of 8 / P doubles
// hold the 8 lanes), so results depend neither on the thread count nor, between the FMA
// paths (AVX-512, AVX2), on the ISA. No transpose: rows are read in place (float64 with H
// a multiple of 8) or from a zero-padded float64 copy.
template <int P> struct Lanes;
template <> struct Lanes<1> { typedef v8d type; };
template <> struct Lanes<2> { typedef double type __attribute__((vector_size(32), aligned(8))); };
template <> struct Lanes<4> { typedef double type __attribute__((vector_size(16), aligned(8))); };

// out[k] = lane sum of acc[k], k < N (N accumulators of P vectors each), in the order above.
template <int N, int P, typename V>
SYMFAST_INLINE void lane_sums(const V (*acc)[P], double* out) {
  if constexpr (P == 1 && N % 8 == 0) {  // 8 accumulators at a time by shuffles
    for (int q = 0; q < N / 8; ++q) {
      const V* a = acc[8 * q];
      V b[4], c[2];
      for (int p = 0; p < 4; ++p)  // lanes 0-3: a[2p] l + l4, lanes 4-7: a[2p + 1]
        b[p] = __builtin_shufflevector(a[2 * p], a[2 * p + 1], 0, 1, 2, 3, 8, 9, 10, 11) +
               __builtin_shufflevector(a[2 * p], a[2 * p + 1], 4, 5, 6, 7, 12, 13, 14, 15);
      for (int p = 0; p < 2; ++p)  // lanes 0-1: (l0 + l4) + (l2 + l6), (l1 + l5) + (l3 + l7) of a[4p], 2-3: a[4p + 2],
        c[p] = __builtin_shufflevector(b[2 * p], b[2 * p + 1], 0, 1, 8, 9, 4, 5, 12, 13) +  // 4-5: a[4p + 1], 6-7: a[4p + 3]
               __builtin_shufflevector(b[2 * p], b[2 * p + 1], 2, 3, 10, 11, 6, 7, 14, 15);
      const V sum = __builtin_shufflevector(c[0], c[1], 0, 4, 2, 6, 8, 12, 10, 14) +
                    __builtin_shufflevector(c[0], c[1], 1, 5, 3, 7, 9, 13, 11, 15);
      __builtin_memcpy(out + 8 * q, &sum, sizeof(V));  // unaligned store (out: a caller's local array)
    }
  } else {
    for (int k = 0; k < N; ++k) {
      double s[4];  // s[l] = lane l + lane l + 4
      if constexpr (P == 1) {
        for (int l = 0; l < 4; ++l) s[l] = acc[k][0][l] + acc[k][0][l + 4];
      } else if constexpr (P == 2) {
        const V t = acc[k][0] + acc[k][1];
        for (int l = 0; l < 4; ++l) s[l] = t[l];
      } else {
        const V lo = acc[k][0] + acc[k][2], hi = acc[k][1] + acc[k][3];
        s[0] = lo[0], s[1] = lo[1], s[2] = hi[0], s[3] = hi[1];
      }
      out[k] = (s[0] + s[2]) + (s[1] + s[3]);
    }
  }
}

// Tile G[i0 : i0 + RI, j0 : j0 + RJ] of W [d, ldw] (nv blocks of 8 per row), entries on or
// above the diagonal written to g [d, d] with their mirror (exactly symmetric). Rows past d
// repeat row d - 1 and are not stored.
template <int RI, int RJ, int P, typename T>
SYMFAST_INLINE void gram_tile(const double* W, py::ssize_t ldw, py::ssize_t nv, py::ssize_t i0, py::ssize_t j0,
                              py::ssize_t d, T* g) {
  typedef typename Lanes<P>::type V;
  constexpr int L = 8 / P;
  const double* x[RI];
  const double* y[RJ];
  for (int r = 0; r < RI; ++r) x[r] = W + (i0 + r < d ? i0 + r : d - 1) * ldw;
  for (int s = 0; s < RJ; ++s) y[s] = W + (j0 + s < d ? j0 + s : d - 1) * ldw;
  V acc[RI * RJ][P];
  for (int k = 0; k < RI * RJ; ++k)
    for (int p = 0; p < P; ++p) acc[k][p] = V{};
  for (py::ssize_t v = 0; v < nv; ++v) {
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) {
      V a[RI];
      for (int r = 0; r < RI; ++r) __builtin_memcpy(&a[r], x[r] + 8 * v + L * p, sizeof(V));  // unaligned loads
      for (int s = 0; s < RJ; ++s) {
        V b;
        __builtin_memcpy(&b, y[s] + 8 * v + L * p, sizeof(V));
        for (int r = 0; r < RI; ++r) acc[r * RJ + s][p] += a[r] * b;
      }
    }
  }
  double c[RI * RJ];
  lane_sums<RI * RJ, P>(acc, c);
  if (j0 >= i0 + RI && j0 + RJ <= d) {  // whole tile above the diagonal: rows, then their mirror
    for (int r = 0; r < RI; ++r)
      for (int s = 0; s < RJ; ++s) g[(i0 + r) * d + j0 + s] = static_cast<T>(c[r * RJ + s]);
    for (int s = 0; s < RJ; ++s)
      for (int r = 0; r < RI; ++r) g[(j0 + s) * d + i0 + r] = static_cast<T>(c[r * RJ + s]);
    return;
  }
  for (int r = 0; r < RI && i0 + r < d; ++r)
    for (int s = 0; s < RJ && j0 + s < d; ++s) {
      const py::ssize_t i = i0 + r, j = j0 + s;
      if (j >= i) g[i * d + j] = g[j * d + i] = static_cast<T>(c[r * RJ + s]);
    }
}

template <typename T>
inline bool all_finite(const T* w, py::ssize_t n) {
  for (py::ssize_t k = 0; k < n; ++k)
    if (!std::isfinite(w[k])) return false;
  return true;
}

// One model's Gram: w [d, H] -> g [d, d]; pad: [d, roundup(H, 8)] float64 scratch; next: the
// weights of the model computed next (or null), prefetched a few lines per tile so that their
// memory latency hides behind this model's arithmetic.
// Returns 1 if w holds NaN or Inf, else 0. G[i, i] = |W_i|^2 is NaN/Inf iff row i holds
// NaN/Inf or its square sum overflows, so the weights are scanned only in that rare case; finite
// weights whose Gram overflows keep IEEE's Inf, as the reference's product does.
template <int RI, int RJ, int P, typename T>
SYMFAST_INLINE long long gram_one(const T* w, T* g, double* pad, py::ssize_t d, py::ssize_t H, const T* next) {
  const py::ssize_t Hp = ((H + 7) / 8) * 8, bytes = d * H * static_cast<py::ssize_t>(sizeof(T));
  const py::ssize_t ti = (d + RI - 1) / RI, pf_per_tile = bytes / 64 / (ti * (ti + 1) / 2 + 1) + 1;
  const char* pf = reinterpret_cast<const char*>(next);
  const char* pf_end = next ? pf + bytes : pf;
  const double* W = pad;
  if constexpr (std::is_same<T, double>::value) {
    if (Hp == H) W = w;
  }
  if (W == pad)
    for (py::ssize_t i = 0; i < d; ++i) {
      for (py::ssize_t h = 0; h < H; ++h) pad[i * Hp + h] = static_cast<double>(w[i * H + h]);
      for (py::ssize_t h = H; h < Hp; ++h) pad[i * Hp + h] = 0.0;
    }
  for (py::ssize_t i0 = 0; i0 < d; i0 += RI)
    for (py::ssize_t j0 = (i0 / RJ) * RJ; j0 < d; j0 += RJ) {
      for (py::ssize_t q = 0; q < pf_per_tile && pf < pf_end; ++q, pf += 64) __builtin_prefetch(pf);
      gram_tile<RI, RJ, P>(W, Hp, Hp / 8, i0, j0, d, g);
    }
  for (py::ssize_t i = 0; i < d; ++i)
    if (!std::isfinite(static_cast<double>(g[i * d + i]))) return all_finite(w, d * H) ? 0 : 1;
  return 0;
}

// This instance's register tiles (RI x RJ accumulators of P vectors, sized to its registers).
template <typename T>
long long gram_model(const T* w, T* g, double* pad, py::ssize_t d, py::ssize_t H, const T* next) {
  if constexpr (VBYTES == 64) return gram_one<4, 4, 1>(w, g, pad, d, H, next);  // 16 zmm accumulators of 32
  else if constexpr (VBYTES == 32) return gram_one<3, 2, 2>(w, g, pad, d, H, next);  // 12 ymm of 16
  else return gram_one<2, 2, 4>(w, g, pad, d, H, next);  // 16-byte vectors (SSE2, NEON): 16 of 16
}
