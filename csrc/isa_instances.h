// One instance of a kernel body per instruction set: the only place that names the ISA targets.
// Usage, inside `namespace symfast`, after the headers the body needs:
//   #define SYMFAST_KERNEL_NS gram_scores_isa          // instances: gram_scores_isa::{avx512, avx2, generic}
//   #define SYMFAST_KERNEL_BODY "gram_scores_impl.h"   // the body, written once
//   #include "isa_instances.h"
// and call an instance with SYMFAST_ISA_CALL(resolve_isa(...), gram_scores_isa, fn<T>(args)) (common.h).
// Each instance sees `constexpr Isa ISA` and `constexpr int VBYTES` (vector width in bytes: 64
// AVX-512, 32 AVX2, 16 generic: SSE2 on x86-64, NEON on aarch64), then simd.h (vector type,
// micro-GEMM, tanh), then the body, all compiled for that target. Both x86 SIMD targets have
// fused multiply-adds; the generic one (x86-64's baseline) has none, so a body whose sums run in
// the same order in every instance gives the same bits on AVX-512 and AVX2, and the generic
// instance rounds each a * b + c twice. No include guard: included once per kernel source.
#ifndef SYMFAST_KERNEL_NS
#error "define SYMFAST_KERNEL_NS and SYMFAST_KERNEL_BODY before including isa_instances.h"
#endif

#ifdef SYMFAST_ISA_INSTANCES
#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,avx512dq,avx2,fma")
namespace SYMFAST_KERNEL_NS {
namespace avx512 {
constexpr Isa ISA = Isa::Avx512;
constexpr int VBYTES = 64;
#include "simd.h"
#include SYMFAST_KERNEL_BODY
}  // namespace avx512
}  // namespace SYMFAST_KERNEL_NS
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,fma")
namespace SYMFAST_KERNEL_NS {
namespace avx2 {
constexpr Isa ISA = Isa::Avx2;
constexpr int VBYTES = 32;
#include "simd.h"
#include SYMFAST_KERNEL_BODY
}  // namespace avx2
}  // namespace SYMFAST_KERNEL_NS
#pragma GCC pop_options
#endif

namespace SYMFAST_KERNEL_NS {
namespace generic {
constexpr Isa ISA = Isa::Generic;
constexpr int VBYTES = 16;
#include "simd.h"
#include SYMFAST_KERNEL_BODY
}  // namespace generic
}  // namespace SYMFAST_KERNEL_NS

#undef SYMFAST_KERNEL_NS
#undef SYMFAST_KERNEL_BODY
