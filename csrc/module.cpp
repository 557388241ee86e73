// symfast._C: the compiled CPU kernels, torch-free (called through symfast.ops).
// One bind_<op> per csrc/<op>.cpp, listed here explicitly.
#include <pybind11/pybind11.h>

#include "common.h"

namespace symfast {
namespace py = pybind11;
void bind_fourier_features(py::module_& m);
void bind_fourier_mlp(py::module_& m);
void bind_gram(py::module_& m);
void bind_gram_scores(py::module_& m);
void bind_matching(py::module_& m);
void bind_ordered_schur(py::module_& m);
void bind_rnn_rollout(py::module_& m);
void bind_rnn_train(py::module_& m);
}  // namespace symfast

PYBIND11_MODULE(_C, m) {
  m.doc() = "symfast CPU kernels (C++/OpenMP, torch-free; called through symfast.ops)";
#ifdef _OPENMP
  m.attr("has_openmp") = true;
#else
  m.attr("has_openmp") = false;
#endif
  m.def("isa", [] { return std::string(symfast::isa_name(symfast::best_isa())); },
        "Instruction set the kernels run by default: the CPU's widest, capped by SYMFAST_ISA");
  m.def("cpu_isa", [] { return std::string(symfast::isa_name(symfast::cpu_isa())); },
        "Widest instruction set this CPU and build run (generic, avx2 or avx512)");
  symfast::bind_fourier_features(m);
  symfast::bind_fourier_mlp(m);
  symfast::bind_gram(m);
  symfast::bind_gram_scores(m);
  symfast::bind_matching(m);
  symfast::bind_ordered_schur(m);
  symfast::bind_rnn_rollout(m);
  symfast::bind_rnn_train(m);
}
