// Shared helpers for the CPU kernels: buffer checks and thread counts.
// Kernels take raw buffers through py::array_t (no torch headers), validated
// in Python at the API boundary; these checks are the last line of defence.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdexcept>
#include <string>

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
}  // namespace symfast
