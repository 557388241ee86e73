// Vector helpers of the per-ISA kernel instances, compiled once per instruction set: included by
// isa_instances.h inside each instance's namespace, with VBYTES (vector width in bytes) defined
// and under that instance's `#pragma GCC target`. No include guard and no headers here.

// Vector of T filling one register of this instance.
template <typename T>
struct Vec {
  typedef T v __attribute__((vector_size(VBYTES), aligned(sizeof(T))));  // unaligned-safe
  static constexpr int W = VBYTES / (int)sizeof(T);
};

// n rounded up to a multiple of w.
inline long pad_to(long n, long w) { return (n + w - 1) / w * w; }
