// Fused training step of B bias-free tanh RNNs at once (CPU): forward, masked MSE, BPTT.
//   W: [B, Hm, Hm], U: [B, Hm, I], V: [B, O, Hm], x: [B, S, T, I], targets: [B, S, T, O],
//   mask: [B, S, T, O] or [B, S, T, 1] or None (ones), h0: [B, S, Hm] or None (zeros),
//   widths: [B] int64 or None (model b uses its first widths[b] units; the rest of its
//   padded tensors is ignored and gets exactly zero gradient)
//   mode (RnnTrainMode, exported as _C.RnnTrainMode): loss: loss [B];
//        gradients: loss [B], dW, dU, dV (and dx [B, S, T, I], dh0 [B, S, Hm] when given)
//   h_t = tanh(W h_{t-1} + U x_t),  y_t = V h_t,  loss_b = sum m (y - target)^2 / max(sum m, 1)
// Reference: symfast/ops/rnn_train/reference.py. The kernel body (rnn_train_impl.h) is
// compiled for AVX-512, AVX2+FMA and baseline x86-64 and picked at run time.
// Every array is checked here (dtype, C-contiguity, shapes against each other, widths),
// so a direct call cannot make the kernel read or write outside the buffers it is given.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "common.h"
#include "tanh_fast.h"

namespace symfast {

// What one call of the fused kernel computes (the `mode` argument).
enum class RnnTrainMode : int { Loss = 0, Gradients = 1 };

template <typename T>
struct RnnTrainProblem {
  long B = 0, Hm = 0, I = 0, O = 0, S = 0, T_ = 0, Mo = 1;
  const T *W = nullptr, *U = nullptr, *V = nullptr, *x = nullptr, *targets = nullptr, *mask = nullptr,
          *h0 = nullptr;
  const int64_t* widths = nullptr;
  RnnTrainMode mode = RnnTrainMode::Loss;
  T *loss = nullptr, *dW = nullptr, *dU = nullptr, *dV = nullptr, *dx = nullptr, *dh0 = nullptr;
};

// The kernel body, one instance per instruction set: rnnt::{avx512, avx2, generic}.
#define SYMFAST_KERNEL_NS rnnt
#define SYMFAST_KERNEL_BODY "rnn_train_impl.h"
#include "isa_instances.h"

namespace {

std::string shape_str(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) s += (d ? ", " : "") + std::to_string(a.shape(d));
  return s + "]";
}

void expect_shape(const py::array& a, std::vector<long> want, const char* name, const char* pattern) {
  bool ok = a.ndim() == (py::ssize_t)want.size();
  for (size_t d = 0; ok && d < want.size(); ++d) ok = a.shape(d) == want[d];
  if (!ok) {
    std::string w = "[";
    for (size_t d = 0; d < want.size(); ++d) w += (d ? ", " : "") + std::to_string(want[d]);
    throw std::invalid_argument(std::string(name) + " must be " + pattern + " = " + w + "], got " + shape_str(a));
  }
}

// An optional input or output: None, or a C-contiguous array of exactly T (never a converted
// copy: an output copy would receive the results and be dropped).
template <typename T>
const T* opt_in(py::object o, const char* name) {
  if (o.is_none()) return nullptr;
  if (!py::isinstance<carray<T>>(o))
    throw py::type_error(std::string(name) + " must be a C-contiguous " + (sizeof(T) == 4 ? "float32" : "float64") +
                         " array (no conversion is made)");
  return o.cast<carray<T>>().data();
}

template <typename T>
T* out_ptr(py::object o, const char* name, std::vector<long> want, const char* pattern) {
  if (!py::isinstance<carray<T>>(o) || !o.cast<py::array>().writeable())
    throw py::type_error(std::string(name) + " must be a C-contiguous writeable " +
                         (sizeof(T) == 4 ? "float32" : "float64") + " array (no conversion is made)");
  auto a = o.cast<carray<T>>();
  expect_shape(a, want, name, pattern);
  return a.mutable_data();
}

template <typename T>
py::none rnn_train_run(carray<T> W, carray<T> U, carray<T> V, carray<T> x, carray<T> targets, py::object mask,
                       py::object h0, py::object widths, RnnTrainMode mode, py::object loss, py::object dW, py::object dU,
                       py::object dV, py::object dx, py::object dh0, int num_threads, const std::string& isa) {
  RnnTrainProblem<T> pb;
  if (mode != RnnTrainMode::Loss && mode != RnnTrainMode::Gradients)
    throw std::invalid_argument("mode must be an RnnTrainMode (loss or gradients)");
  check_ndim(W, 3, "W");
  check_ndim(x, 4, "x");
  pb.B = W.shape(0);
  pb.Hm = W.shape(1);
  pb.S = x.shape(1);
  pb.T_ = x.shape(2);
  pb.I = x.shape(3);
  check_ndim(V, 3, "V");
  pb.O = V.shape(1);
  const long B = pb.B, Hm = pb.Hm, S = pb.S, Tn = pb.T_, I = pb.I, O = pb.O;
  if (B < 1 || Hm < 1 || S < 1 || Tn < 1 || I < 1 || O < 1)
    throw std::invalid_argument("every size (B, H, S, T, I, O) must be >= 1");
  expect_shape(W, {B, Hm, Hm}, "W", "[B, H, H]");
  expect_shape(U, {B, Hm, I}, "U", "[B, H, I]");
  expect_shape(V, {B, O, Hm}, "V", "[B, O, H]");
  expect_shape(x, {B, S, Tn, I}, "x", "[B, S, T, I]");
  expect_shape(targets, {B, S, Tn, O}, "targets", "[B, S, T, O]");
  pb.W = W.data();
  pb.U = U.data();
  pb.V = V.data();
  pb.x = x.data();
  pb.targets = targets.data();
  pb.mask = opt_in<T>(mask, "mask");
  if (pb.mask) {
    auto m = mask.cast<py::array>();
    pb.Mo = m.ndim() == 4 ? m.shape(3) : -1;
    if (pb.Mo != 1 && pb.Mo != O) pb.Mo = O;  // reported by expect_shape below
    expect_shape(m, {B, S, Tn, pb.Mo}, "mask", "[B, S, T, O or 1]");
  }
  pb.h0 = opt_in<T>(h0, "h0");
  if (pb.h0) expect_shape(h0.cast<py::array>(), {B, S, Hm}, "h0", "[B, S, H]");
  std::vector<int64_t> wv;
  if (!widths.is_none()) {
    if (!py::isinstance<py::array_t<int64_t, py::array::c_style>>(widths))
      throw py::type_error("widths must be a C-contiguous int64 array");
    auto wa = widths.cast<py::array_t<int64_t, py::array::c_style>>();
    expect_shape(wa, {B}, "widths", "[B]");
    wv.assign(wa.data(), wa.data() + B);
    for (long b = 0; b < B; ++b)
      if (wv[b] < 1 || wv[b] > Hm)
        throw std::invalid_argument("widths[" + std::to_string(b) + "] = " + std::to_string(wv[b]) +
                                    " must be in [1, " + std::to_string(Hm) + "]");
    pb.widths = wv.data();
  }
  pb.mode = mode;
  pb.loss = out_ptr<T>(loss, "loss", {B}, "[B]");
  if (mode == RnnTrainMode::Gradients) {
    pb.dW = out_ptr<T>(dW, "dW", {B, Hm, Hm}, "[B, H, H]");
    pb.dU = out_ptr<T>(dU, "dU", {B, Hm, I}, "[B, H, I]");
    pb.dV = out_ptr<T>(dV, "dV", {B, O, Hm}, "[B, O, H]");
    if (!dx.is_none()) pb.dx = out_ptr<T>(dx, "dx", {B, S, Tn, I}, "[B, S, T, I]");
    if (!dh0.is_none()) pb.dh0 = out_ptr<T>(dh0, "dh0", {B, S, Hm}, "[B, S, H]");
  }
  const Isa which = resolve_isa(isa);
  const int nt = clamp_threads(num_threads);
  int flags = 0;
  {
    py::gil_scoped_release release;
    flags = SYMFAST_ISA_CALL(which, rnnt, run<T>(pb, nt));
  }
  if (flags & rnnt::generic::NO_MEMORY) throw std::bad_alloc();
  static const char* names[] = {"W", "U", "V", "x", "targets", "mask", "h0"};
  for (int k = 0; k < 7; ++k)
    if (flags & (1 << k))
      throw std::invalid_argument(std::string(names[k]) + " contains NaN or Inf values; the fused kernel needs finite inputs");
  return py::none();
}

}  // namespace

// Bindings, called from module.cpp.
void bind_rnn_train(py::module_& m) {
  py::enum_<RnnTrainMode>(m, "RnnTrainMode", "What one fused RNN-training call computes (the `mode` argument)")
      .value("loss", RnnTrainMode::Loss)
      .value("gradients", RnnTrainMode::Gradients);
  const char* doc =
      "Fused tanh-RNN ensemble training step (see csrc/rnn_train.cpp header): mode loss, or gradients (loss and "
      "gradients)";
  m.def("rnn_train_f32", &rnn_train_run<float>, py::arg("W").noconvert(), py::arg("U").noconvert(),
        py::arg("V").noconvert(), py::arg("x").noconvert(), py::arg("targets").noconvert(), py::arg("mask"),
        py::arg("h0"), py::arg("widths"), py::arg("mode"), py::arg("loss"), py::arg("dW"), py::arg("dU"),
        py::arg("dV"), py::arg("dx"), py::arg("dh0"), py::arg("num_threads") = 1, py::arg("isa") = "auto", doc);
  m.def("rnn_train_f64", &rnn_train_run<double>, py::arg("W").noconvert(), py::arg("U").noconvert(),
        py::arg("V").noconvert(), py::arg("x").noconvert(), py::arg("targets").noconvert(), py::arg("mask"),
        py::arg("h0"), py::arg("widths"), py::arg("mode"), py::arg("loss"), py::arg("dW"), py::arg("dU"),
        py::arg("dV"), py::arg("dx"), py::arg("dh0"), py::arg("num_threads") = 1, py::arg("isa") = "auto", doc);
  m.def("rnn_train_isa", [](const std::string& isa) { return std::string(isa_name(resolve_isa(isa))); },
        py::arg("isa") = "auto",
        "Instruction set the rnn_train kernel uses for `isa` on this CPU");
}

}  // namespace symfast
