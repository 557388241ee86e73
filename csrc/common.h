// Shared helpers for the CPU kernels: buffer checks, thread counts, the instruction-set
// resolver and the float32/float64 binding helper.
// Kernels take raw buffers through py::array_t (no torch headers), validated
// in Python at the API boundary; these checks are the last line of defence.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cstdlib>
#include <stdexcept>
#include <string>

// Per-ISA kernel instances (isa_instances.h: one copy of a kernel body per `#pragma GCC target`,
// picked at run time by `resolve_isa`) exist on GCC x86-64 builds only; clang and aarch64 build the
// portable instance alone.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define SYMFAST_ISA_INSTANCES 1
#endif
// Small helpers of register-blocked kernels, inlined into each per-ISA caller.
#define SYMFAST_INLINE inline __attribute__((always_inline))


namespace symfast {
namespace py = pybind11;

template <typename T>
using carray = py::array_t<T, py::array::c_style>;  // no forcecast: dtype must match

// Throws ValueError (pybind maps std::invalid_argument) when ndim differs.
inline void check_ndim(const py::array& a, int ndim, const char* name) {
  if (a.ndim() != ndim)
    throw std::invalid_argument(std::string(name) + " must have " + std::to_string(ndim) +
                                " dims, got " + std::to_string(a.ndim()));
}

// The caller passes torch.get_num_threads(): never oversubscribe torch's pool.
inline int clamp_threads(int n) { return n < 1 ? 1 : n; }

// ---- instruction sets: every kernel with per-ISA instances (isa_instances.h) is picked by these ----
//   Avx512: AVX-512 F + VL + DQ with AVX2 + FMA (the instances are compiled for
//           avx512f,avx512vl,avx512dq,avx2,fma; every AVX-512 CPU but the Xeon Phi has all three).
//   Avx2:   AVX2 + FMA.
//   Generic: the portable baseline (SSE2 on x86-64, NEON on aarch64).
enum class Isa { Generic, Avx2, Avx512 };

inline const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Avx512: return "avx512";
    case Isa::Avx2: return "avx2";
    default: return "generic";
  }
}

// The widest instruction set this CPU and build run.
inline Isa cpu_isa() {
#ifdef SYMFAST_ISA_INSTANCES
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return Isa::Generic;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return Isa::Avx512;
  return Isa::Avx2;
#else
  return Isa::Generic;
#endif
}

// What "auto" runs: the CPU's widest, capped by the environment variable SYMFAST_ISA (generic,
// avx2, avx512 or auto; read once per process), so a test run or a user can force a narrower path
// on a machine that has a wider one. An unknown name, or one wider than the CPU runs, is refused
// at the first kernel call (ValueError naming the variable), never silently ignored.
struct IsaCap {
  Isa isa;
  std::string error;  // non-empty: SYMFAST_ISA is invalid here
};

inline IsaCap read_isa_cap() {
  const Isa cpu = cpu_isa();
  const char* env = std::getenv("SYMFAST_ISA");
  const std::string want = env ? env : "auto";
  if (want.empty() || want == "auto") return {cpu, ""};
  Isa asked;
  if (want == "generic") asked = Isa::Generic;
  else if (want == "avx2") asked = Isa::Avx2;
  else if (want == "avx512") asked = Isa::Avx512;
  else return {cpu, "SYMFAST_ISA must be auto, generic, avx2 or avx512, got '" + want + "'"};
  if (static_cast<int>(asked) > static_cast<int>(cpu))
    return {cpu, "SYMFAST_ISA=" + want + " but this CPU and build run at most " + isa_name(cpu)};
  return {asked, ""};
}

inline Isa best_isa() {
  static const IsaCap cap = read_isa_cap();
  if (!cap.error.empty()) throw std::invalid_argument(cap.error);
  return cap.isa;
}

// request: "auto" (the widest this CPU runs) or "generic", "avx2", "avx512" to force one (tests,
// benchmarks). ValueError for any other name, and for a forced ISA this CPU or build cannot run.
inline Isa resolve_isa(const std::string& request) {
  if (request == "auto") return best_isa();
  const Isa best = cpu_isa();
  if (request == "generic") return Isa::Generic;
  if (request != "avx2" && request != "avx512")
    throw std::invalid_argument("isa must be auto, generic, avx2 or avx512, got " + request);
#ifndef SYMFAST_ISA_INSTANCES
  throw std::invalid_argument("this build has only isa generic (per-ISA instances need GCC on x86-64)");
#endif
  if (request == "avx2" && best == Isa::Generic)
    throw std::invalid_argument("this CPU does not support isa avx2 (AVX2 and FMA)");
  if (request == "avx512" && best != Isa::Avx512)
    throw std::invalid_argument("this CPU does not support isa avx512 (AVX-512 F, VL and DQ)");
  return request == "avx512" ? Isa::Avx512 : Isa::Avx2;
}

// Calls one kernel instance: SYMFAST_ISA_CALL(isa, ns, fn<T>(args)) runs ns::avx512::fn<T>(args),
// ns::avx2::... or ns::generic::... for `isa` (from resolve_isa); ns names the instances stamped
// out by isa_instances.h.
#ifdef SYMFAST_ISA_INSTANCES
#define SYMFAST_ISA_CALL(isa, ns, ...)                                                       \
  ((isa) == ::symfast::Isa::Avx512 ? ns::avx512::__VA_ARGS__                                 \
   : (isa) == ::symfast::Isa::Avx2 ? ns::avx2::__VA_ARGS__                                   \
                                   : ns::generic::__VA_ARGS__)
#else
#define SYMFAST_ISA_CALL(isa, ns, ...) ((void)(isa), ns::generic::__VA_ARGS__)
#endif

// ---- bindings ----
// Binds a kernel's float32 and float64 instances as `<name>_f32` and `<name>_f64` with the same
// arguments; "{dtype}" in doc becomes "float32" / "float64". Usage:
//   def_f32_f64(m, "gram_fwd", &gram_fwd<float>, &gram_fwd<double>, "Grams of {dtype} W", py::arg("weights"));
inline std::string with_dtype(std::string doc, const char* dtype) {
  for (size_t at = doc.find("{dtype}"); at != std::string::npos; at = doc.find("{dtype}", at))
    doc.replace(at, 7, dtype);
  return doc;
}

template <typename F32, typename F64, typename... Extra>
void def_f32_f64(py::module_& m, const std::string& name, F32 f32, F64 f64, const std::string& doc,
                 const Extra&... extra) {
  m.def((name + "_f32").c_str(), f32, extra..., with_dtype(doc, "float32").c_str());
  m.def((name + "_f64").c_str(), f64, extra..., with_dtype(doc, "float64").c_str());
}
}  // namespace symfast
