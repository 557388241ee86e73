// Readout-score kernel body (csrc/gram_scores.cpp), compiled once per instruction set by
// isa_instances.h (VBYTES defined; no headers here). Every product and every sum runs in the
// same order in every instance: the AVX-512 and AVX2 instances (fused multiply-adds) give the
// same bits, the generic one (no FMA) agrees to rounding.

// ---- small dense products in float64: C[rows, D] = A[rows, K] (lda) @ B[K, D], D = 8 nv8 ----
// Register blocking in the instance's own vector width (LANES doubles per register): RB rows x NV vectors of accumulators and one broadcast of A per row and k.
// Vectors wider than the registers are split by the compiler through the stack, which made
// 8-double vectors on AVX2 about 10x slower than in registers. Each output element sums over k
// in increasing order in every variant (deterministic; the blocking never changes a sum).
// C[RB rows, NV vectors of L doubles] from B's columns at B (row stride ld); C has row stride ld
// too. Rows need not be vector-aligned: vectors move through fixed-size memcpy, which compiles to
// unaligned moves. (A dereference through V* let GCC emit aligned moves, vmovapd, which faulted on
// unaligned rows in the AVX-512 instance; a local typedef's aligned(8) does not survive being a
// template argument, so no helper template can take V either.)
template <int L, int NV, int RB>
SYMFAST_INLINE void mm_rows(const double* A, py::ssize_t lda, py::ssize_t K, const double* B, py::ssize_t ld,
                            double* C) {
  typedef double V __attribute__((vector_size(8 * L)));
  V acc[RB][NV];
  for (int r = 0; r < RB; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = V{};
  for (py::ssize_t k = 0; k < K; ++k) {
    V b[NV];
    for (int v = 0; v < NV; ++v) __builtin_memcpy(&b[v], B + k * ld + v * L, sizeof(V));
    for (int r = 0; r < RB; ++r) {
      const double a = A[r * lda + k];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int v = 0; v < NV; ++v) __builtin_memcpy(C + r * ld + v * L, &acc[r][v], sizeof(V));
}

template <int L, int NV, int RB>
SYMFAST_INLINE void mm_block(const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                             py::ssize_t ld, double* C) {
  py::ssize_t i = 0;
  for (; i + RB <= rows; i += RB) mm_rows<L, NV, RB>(A + i * lda, lda, K, B, ld, C + i * ld);
  for (; i < rows; ++i) mm_rows<L, NV, 1>(A + i * lda, lda, K, B, ld, C + i * ld);
}

template <int NV8>
SYMFAST_INLINE void mm_wide(const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                            double* C) {
  mm_block<8, NV8, 4>(A, lda, rows, K, B, 8 * NV8, C);  // 4 x NV8 <= 32 zmm accumulators
}

constexpr int LANES = VBYTES / 8;  // doubles per vector register: 8 AVX-512, 4 AVX2, 2 generic

// Dispatch on the padded width D = 8 nv8 (nv8 <= 8 covers d <= 64). AVX-512 takes whole rows of
// 8-double vectors, 4 rows at a time; narrow registers take 16 or 8 columns at a time, 3 rows:
// 12 accumulators, which leaves room for the broadcast and the product in 16 registers.
SYMFAST_INLINE void mm(int nv8, const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                       double* C) {
  const py::ssize_t D = 8 * static_cast<py::ssize_t>(nv8);
  if constexpr (LANES == 8) {
    switch (nv8) {
      case 1: mm_wide<1>(A, lda, rows, K, B, C); break;
      case 2: mm_wide<2>(A, lda, rows, K, B, C); break;
      case 3: mm_wide<3>(A, lda, rows, K, B, C); break;
      case 4: mm_wide<4>(A, lda, rows, K, B, C); break;
      case 5: mm_wide<5>(A, lda, rows, K, B, C); break;
      case 6: mm_wide<6>(A, lda, rows, K, B, C); break;
      case 7: mm_wide<7>(A, lda, rows, K, B, C); break;
      default: mm_wide<8>(A, lda, rows, K, B, C); break;
    }
  } else {
    py::ssize_t c = 0;
    if constexpr (LANES == 4) {
      for (; c + 16 <= D; c += 16) mm_block<4, 4, 3>(A, lda, rows, K, B + c, D, C + c);
      if (c < D) mm_block<4, 2, 3>(A, lda, rows, K, B + c, D, C + c);
    } else {
      for (; c < D; c += 8) mm_block<2, 4, 3>(A, lda, rows, K, B + c, D, C + c);
    }
  }
}

// Generic fallback for d > 64 (C row stride ldc >= cols, zero-padded B not needed).
inline void mm_generic(const double* A, py::ssize_t lda, py::ssize_t rows, py::ssize_t K, const double* B,
                       py::ssize_t ldb, py::ssize_t cols, double* C, py::ssize_t ldc) {
  for (py::ssize_t i = 0; i < rows; ++i) {
    double* c = C + i * ldc;
    for (py::ssize_t j = 0; j < cols; ++j) c[j] = 0.0;
    for (py::ssize_t k = 0; k < K; ++k) {
      const double a = A[i * lda + k];
      const double* b = B + k * ldb;
      for (py::ssize_t j = 0; j < cols; ++j) c[j] += a * b[j];
    }
  }
}

// Squared asymmetry of one padded Gram g [D, D] (D = 2 nb) under one block-permutation lift.
// Blocks (j, k) and (k, j) give transposed differences for symmetric G: j <= k, weight 2 off the diagonal.
double blockperm_sq(const double* g, const int64_t* perm, const double* B, py::ssize_t nb) {
  const py::ssize_t D = 2 * nb;
  double acc = 0.0;
  for (py::ssize_t j = 0; j < nb; ++j) {
    const double* Bj = B + 4 * j;  // [[b00, b01], [b10, b11]]
    const double* gj0 = g + (2 * j) * D;
    const double* gj1 = gj0 + D;
    const double* tj0 = g + (2 * perm[j]) * D;
    const double* tj1 = tj0 + D;
    double part = 0.0;
    for (py::ssize_t k = j; k < nb; ++k) {
      const double* Bk = B + 4 * k;
      const double g00 = gj0[2 * k], g01 = gj0[2 * k + 1], g10 = gj1[2 * k], g11 = gj1[2 * k + 1];
      // Y = G_jk B_k
      const double y00 = g00 * Bk[0] + g01 * Bk[2], y01 = g00 * Bk[1] + g01 * Bk[3];
      const double y10 = g10 * Bk[0] + g11 * Bk[2], y11 = g10 * Bk[1] + g11 * Bk[3];
      // X = B_j^T Y minus the target block G[perm j, perm k]
      const py::ssize_t c = 2 * perm[k];
      const double x00 = Bj[0] * y00 + Bj[2] * y10 - tj0[c], x01 = Bj[0] * y01 + Bj[2] * y11 - tj0[c + 1];
      const double x10 = Bj[1] * y00 + Bj[3] * y10 - tj1[c], x11 = Bj[1] * y01 + Bj[3] * y11 - tj1[c + 1];
      const double s = x00 * x00 + x01 * x01 + x10 * x10 + x11 * x11;
      part += (k == j) ? s : 2.0 * s;
    }
    acc += part;
  }
  return acc;
}


// ---- dense orthogonal lifts, fused: s = ||G U_a - (G U_b)^T||_F per (model, element) ----
// g: one model [d, d] float64; up: multipliers zero-padded [U, d, D]; slot0/slot1: [d, D]
// products G U_u for the last two multipliers (elements sharing them are adjacent).
void dense_model(const double* g, const double* up, py::ssize_t d, py::ssize_t D,
                 const int64_t* a, const int64_t* b, py::ssize_t E, double* slot0, double* slot1, double* out) {
  int64_t key0 = -1, key1 = -1;  // multipliers whose products slot0 / slot1 hold
  const int nv = static_cast<int>(D / 8);
  for (py::ssize_t e = 0; e < E; ++e) {
    // x = G U_a in a slot, y = G U_b in the other (or the same one when a == b)
    if (a[e] != key0 && a[e] != key1) {
      double* dst = (b[e] == key0) ? slot1 : slot0;
      if (d <= 64) mm(nv, g, d, d, d, up + a[e] * d * D, dst); else mm_generic(g, d, d, d, up + a[e] * d * D, D, d, dst, D);
      (dst == slot0 ? key0 : key1) = a[e];
    }
    const double* x = (a[e] == key0) ? slot0 : slot1;  // x[i * D + j] = (G rho)[i, j]
    if (b[e] != key0 && b[e] != key1) {
      double* dst = (x == slot0) ? slot1 : slot0;
      if (d <= 64) mm(nv, g, d, d, d, up + b[e] * d * D, dst); else mm_generic(g, d, d, d, up + b[e] * d * D, D, d, dst, D);
      (dst == slot0 ? key0 : key1) = b[e];
    }
    const double* y = (b[e] == key0) ? slot0 : slot1;  // y[j * D + i] = (G rho^T)[j, i] = (rho G)[i, j]
    double acc = 0.0;
    for (py::ssize_t i = 0; i < d; ++i)
      for (py::ssize_t j = 0; j < d; ++j) {
        const double v = x[i * D + j] - y[j * D + i];
        acc += v * v;
      }
    out[e] = std::sqrt(acc);
  }
}
