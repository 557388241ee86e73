// The products of the fused matching observable (matching.cpp), one instance per instruction set
// (isa_instances.h): gram[i, j] = sum_t a[i, t] wt[t, j] for a: [H, k], wt: [k, H] (rows contiguous
// over j, so the inner loop vectorises over j). Sums run over t in the same order in every
// instance and matching.cpp is compiled without multiply-add contraction (CMakeLists.txt), so
// every instance gives the same bits.
// Included by isa_instances.h inside symfast::matching_isa::<isa>; no include guard.

inline void gram_rows(const double* a, const double* wt, double* gram, int64_t H, int64_t k) {
  for (int64_t i = 0; i < H; ++i) {
    double* gi = gram + i * H;
    for (int64_t j = 0; j < H; ++j) gi[j] = 0.0;
    for (int64_t t = 0; t < k; ++t) {
      const double x = a[i * k + t];
      const double* wrow = wt + t * H;
      for (int64_t j = 0; j < H; ++j) gi[j] += x * wrow[j];
    }
  }
}
