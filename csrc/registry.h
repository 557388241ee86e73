// Self-registration of pybind11 bindings: each csrc/<op>.cpp defines
//   static symfast::Registrar reg("op", [](py::module_& m) { m.def(...); });
// and module.cpp calls every registered function when symfast._C is imported.
#pragma once
#include <pybind11/pybind11.h>
#include <functional>
#include <vector>

namespace symfast {
namespace py = pybind11;
using BindFn = std::function<void(py::module_&)>;

inline std::vector<std::pair<const char*, BindFn>>& registry() {
  static std::vector<std::pair<const char*, BindFn>> fns;
  return fns;
}

struct Registrar {
  Registrar(const char* name, BindFn fn) { registry().emplace_back(name, std::move(fn)); }
};
}  // namespace symfast
