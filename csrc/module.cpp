// symfast._C: the compiled CPU kernels. Bindings self-register (registry.h).
#include "registry.h"

PYBIND11_MODULE(_C, m) {
  m.doc() = "symfast CPU kernels (C++/OpenMP, torch-free; called through symfast.ops)";
#ifdef _OPENMP
  m.attr("has_openmp") = true;
#else
  m.attr("has_openmp") = false;
#endif
  for (auto& [name, fn] : symfast::registry()) fn(m);
}
