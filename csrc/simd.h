// Vector helpers of the per-ISA kernel instances, compiled once per instruction set: included by
// isa_instances.h inside each instance's namespace, with VBYTES (vector width in bytes) defined
// and under that instance's `#pragma GCC target`. No include guard and no headers here (the
// including source brings <cstdint> and <type_traits>).

// Vector of T filling one register of this instance.
template <typename T>
struct Vec {
  typedef T v __attribute__((vector_size(VBYTES), aligned(sizeof(T))));  // unaligned-safe
  static constexpr int W = VBYTES / (int)sizeof(T);
};

// n rounded up to a multiple of w.
inline long pad_to(long n, long w) { return (n + w - 1) / w * w; }

// ---- register-blocked micro-GEMM (fourier_mlp, rnn_train) ----
// Register block: MR rows x NV vectors of accumulators (AVX-512: 6 x 4 of its 32 vector
// registers; AVX2: 6 x 2 of 16; the generic SSE2/NEON instance: 4 x 2).
constexpr int MR = VBYTES == 16 ? 4 : 6;
constexpr int NV = VBYTES == 64 ? 4 : 2;

// Epilogue of a register block, applied before it leaves the registers:
//   EPI_NONE   store the block;
//   EPI_RELU   store max(., 0);
//   EPI_MASK   backward through a ReLU: store the block where mask (= the layer's ReLU output,
//              same layout as C) is > 0, else 0, and add its column sums to gbias.
// init: C itself (INIT_ACC), zero (INIT_ZERO) or the bias row (INIT_BIAS, added last).
enum Init { INIT_ACC = 0, INIT_ZERO = 1, INIT_BIAS = 2 };
enum Epi { EPI_NONE = 0, EPI_RELU = 1, EPI_MASK = 2 };

template <typename T>
struct Extra {
  const T* bias = nullptr;   // INIT_BIAS: row added to every output row
  const T* mask = nullptr;   // EPI_MASK: ReLU output, ld = ldc
  T* gbias = nullptr;        // EPI_MASK: column sums accumulate here
  Extra at(long j) const { return {bias ? bias + j : nullptr, mask ? mask + j : nullptr, gbias ? gbias + j : nullptr}; }
};

// Integer view of a vector, for sign-bit arithmetic.
template <typename T>
struct IVec {
  typedef std::conditional_t<sizeof(T) == 4, int32_t, int64_t> I;
  typedef I v __attribute__((vector_size(VBYTES)));
};

// Lane-wise ReLU helpers on the sign bit (integer ops: a vector-extension compare/select
// compiles to slow code for AVX-512 with GCC 12; x86 max/compare intrinsics measured no faster).
template <typename V>
SYMFAST_INLINE V relu_vec(V v) {  // max(v, 0)
  using VI = typename IVec<std::remove_reference_t<decltype(v[0])>>::v;
  const VI vi = (VI)v;
  return (V)(vi & ~(vi >> (8 * (int)sizeof(v[0]) - 1)));
}

template <typename V>
SYMFAST_INLINE V where_positive(V m, V v) {  // v where m > 0 else 0; m >= 0
  using VI = typename IVec<std::remove_reference_t<decltype(v[0])>>::v;
  return (V)((VI)v & (-(VI)m >> (8 * (int)sizeof(v[0]) - 1)));  // -m's sign bit is set iff m > 0
}

// C[i, jv] (i < R, jv < NC vectors) = init + sum_p A[i*ars + p*aps] * Bm[p*ldb + jv*W ...]
template <typename T, int R, int NC, int INIT, int EPI>
SYMFAST_INLINE void micro(int P, const T* A, long ars, long aps, const T* Bm, long ldb, T* C, long ldc, Extra<T> ex) {
  using V = typename Vec<T>::v;
  constexpr int W = Vec<T>::W;
  V acc[R][NC];  // kept in registers: every loop over R and NC is fully unrolled (else GCC spills)
  #pragma GCC unroll 32
  for (int i = 0; i < R; ++i)
    #pragma GCC unroll 32
    for (int j = 0; j < NC; ++j) {
      acc[i][j] = V{};  // C or the bias is added in the epilogue: loads ahead of the FMA chains cost ~4%
    }
  for (int p = 0; p < P; ++p) {
    V bv[NC];
    #pragma GCC unroll 32
    for (int j = 0; j < NC; ++j) bv[j] = *(const V*)(Bm + p * ldb + j * W);
    const T* ap = A + p * aps;
    #pragma GCC unroll 32
    for (int i = 0; i < R; ++i) {
      const T a = ap[i * ars];
      #pragma GCC unroll 32
      for (int j = 0; j < NC; ++j) acc[i][j] += a * bv[j];
    }
  }
  if constexpr (EPI == EPI_MASK) {
    V colsum[NC] = {};
    #pragma GCC unroll 32
    for (int i = 0; i < R; ++i)
      #pragma GCC unroll 32
      for (int j = 0; j < NC; ++j) {
        acc[i][j] = where_positive(*(const V*)(ex.mask + i * ldc + j * W), acc[i][j]);
        colsum[j] += acc[i][j];
      }
    #pragma GCC unroll 32
    for (int j = 0; j < NC; ++j) *(V*)(ex.gbias + j * W) += colsum[j];
  }
  #pragma GCC unroll 32
  for (int i = 0; i < R; ++i)
    #pragma GCC unroll 32
    for (int j = 0; j < NC; ++j) {
      V v = acc[i][j];
      if constexpr (INIT == INIT_BIAS) v += *(const V*)(ex.bias + j * W);
      if constexpr (INIT == INIT_ACC) v += *(const V*)(C + i * ldc + j * W);
      if constexpr (EPI == EPI_RELU) v = relu_vec(v);
      *(V*)(C + i * ldc + j * W) = v;
    }
}

template <typename T, int R, int INIT, int EPI>
inline void micro_rows(int P, const T* A, long ars, long aps, const T* Bm, long ldb, T* C, long ldc, long ncols,
                       Extra<T> ex) {
  constexpr int W = Vec<T>::W;
  long j = 0;
  for (; j + NV * W <= ncols; j += NV * W)
    micro<T, R, NV, INIT, EPI>(P, A, ars, aps, Bm + j, ldb, C + j, ldc, ex.at(j));
  if constexpr (NV > 2)
    for (; j + 2 * W <= ncols; j += 2 * W) micro<T, R, 2, INIT, EPI>(P, A, ars, aps, Bm + j, ldb, C + j, ldc, ex.at(j));
  for (; j < ncols; j += W) micro<T, R, 1, INIT, EPI>(P, A, ars, aps, Bm + j, ldb, C + j, ldc, ex.at(j));
}

template <typename T, int R, int INIT, int EPI>
inline void micro_tail(int r, int P, const T* A, long ars, long aps, const T* Bm, long ldb, T* C, long ldc,
                       long ncols, Extra<T> ex) {
  if constexpr (R > 0) {
    if (r == R) return micro_rows<T, R, INIT, EPI>(P, A, ars, aps, Bm, ldb, C, ldc, ncols, ex);
    return micro_tail<T, R - 1, INIT, EPI>(r, P, A, ars, aps, Bm, ldb, C, ldc, ncols, ex);
  }
}

// C[M, ncols] (=|+=) A(M x P) @ Bm[P, ncols] (+ bias, epilogue); ncols a multiple of the vector width.
template <typename T, int INIT = INIT_ACC, int EPI = EPI_NONE>
void gemm(long M, long ncols, int P, const T* A, long ars, long aps, const T* Bm, long ldb, T* C, long ldc,
          Extra<T> ex = {}) {
  long i = 0;
  for (; i + MR <= M; i += MR) {
    Extra<T> e = ex;
    if (e.mask) e.mask += i * ldc;
    micro_rows<T, MR, INIT, EPI>(P, A + i * ars, ars, aps, Bm, ldb, C + i * ldc, ldc, ncols, e);
  }
  if (i < M) {
    if (ex.mask) ex.mask += i * ldc;
    micro_tail<T, MR - 1, INIT, EPI>((int)(M - i), P, A + i * ars, ars, aps, Bm, ldb, C + i * ldc, ldc, ncols, ex);
  }
}

