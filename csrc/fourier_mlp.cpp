// Fused batched Fourier-PE + MLP: forward, backward and MSE training step on the CPU.
//   x: [B, N, D] (or [N, D] shared), frequencies: [m, D], phases: [m]   (d = 2m, D = 2 or 3)
//   weights[l]: [B, fan_in, fan_out] (fan-in first), biases[l]: [B, fan_out], last fan_out = 1
//   mode (FourierMlpMode, exported as _C.FourierMlpMode):
//     Forward:   y [B, N]
//     TrainStep: MSE vs targets [B, N] -> loss [B], dW, db (of sum_b loss_b)
//     Backward:  cotangent [B, N] -> dW, db (and dx [B, N, D] when requested)
//   and the second-order modes (fourier_mlp_jet_impl.h), on f and its input gradient g = grad_x f:
//     Jet:          y [B, N], gy [B, N, D]
//     JetBackward:  cotangents [B, N] of y and aux_g [B, N, D] of gy -> dW, db (and dx; y and gy if given)
//     JetTrainStep: targets [B, N] (+ target normals aux_g [B, N, D], optional) -> loss terms [B, 3]
//                   (MSE, eikonal (|g| - 1)^2, normal |g - n|^2, each a mean over points), dW, db
// Reference: symfast/ops/fourier_mlp/reference.py. The kernel body (fourier_mlp_impl.h) is
// compiled for AVX-512, AVX2+FMA and baseline x86-64 and picked at run time (resolve_isa, common.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <pybind11/stl.h>

#include "common.h"
#include "sincos.h"

namespace symfast {

// What one call of the fused kernel computes (the `mode` argument).
enum class FourierMlpMode : int { Forward = 0, TrainStep = 1, Backward = 2, Jet = 3, JetBackward = 4, JetTrainStep = 5 };

template <typename T>
struct Problem {
  long B = 0, N = 0, m = 0, D = 2, chunk = 4096;
  const T* x = nullptr;
  bool x_shared = false;
  const T* freq = nullptr;
  const T* phase = nullptr;
  std::vector<const T*> w, b;
  std::vector<long> fan_in, fan_out;
  int act = 0;
  FourierMlpMode mode = FourierMlpMode::Forward;
  const T* aux = nullptr;  // targets (TrainStep) or cotangent (Backward)
  const T* aux_g = nullptr;  // jet modes: cotangent of gy (JetBackward) or target normals (JetTrainStep)
  T eikonal = 0, normal = 0;  // JetTrainStep: weights of the eikonal and normal terms
  T* y = nullptr;
  T* gy = nullptr;  // Jet: the input gradient [B, N, D]
  T* loss = nullptr;
  T* dx = nullptr;
  std::vector<T*> dw, db;
};

// 64-byte aligned scratch buffer.
template <typename T>
struct Buf {
  T* p = nullptr;
  long n = 0;
  Buf() = default;
  explicit Buf(long k) { resize(k); }
  Buf(Buf&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; o.n = 0; }
  Buf(const Buf&) = delete;
  ~Buf() { std::free(p); }
  void resize(long k) {
    std::free(p);
    n = k;
    p = static_cast<T*>(std::aligned_alloc(64, (size_t)std::max<long>(64, ((k * sizeof(T) + 63) / 64) * 64)));
    zero();
  }
  void zero() { std::memset(p, 0, n * sizeof(T)); }
};

// The kernel body, one instance per instruction set: fmlp::{avx512, avx2, generic}.
#define SYMFAST_KERNEL_NS fmlp
#define SYMFAST_KERNEL_BODY "fourier_mlp_impl.h"
#include "isa_instances.h"

namespace {

// The kernel for instruction set `isa` (from resolve_isa) and input dimension D.
template <typename T, int D>
int run_isa(Isa isa, const Problem<T>& pb, int nt) {
  if (pb.mode >= FourierMlpMode::Jet) return SYMFAST_ISA_CALL(isa, fmlp, run_jet<T, D>(pb, nt));
  return SYMFAST_ISA_CALL(isa, fmlp, run<T, D>(pb, nt));
}

// "[2, 64, 16]" for messages.
inline std::string shape_str(const py::array& a) {
  std::string s = "[";
  for (py::ssize_t i = 0; i < a.ndim(); ++i) s += (i ? ", " : "") + std::to_string(a.shape(i));
  return s + "]";
}

inline std::string indexed(const char* name, int l) { return std::string(name) + "[" + std::to_string(l) + "]"; }

// Throws ValueError unless `a` is exactly `dims` (form: the expected shape in words for the message).
inline void check_shape(const py::array& a, std::initializer_list<py::ssize_t> dims, const std::string& name,
                        const std::string& form) {
  bool ok = a.ndim() == (py::ssize_t)dims.size();
  py::ssize_t i = 0;
  for (py::ssize_t d : dims) ok = ok && a.shape(i++) == d;
  if (!ok) throw std::invalid_argument(name + " must be " + form + ", got " + shape_str(a));
}

template <typename T>
void check_finite(const carray<T>& a, const char* name) {
  const T* p = a.data();
  for (py::ssize_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(p[i])) throw std::invalid_argument(std::string(name) + " contains NaN or Inf values");
}

// An output (or aux) buffer of exactly `dims`: None, or a C-contiguous writeable array of exactly T.
// Never a converted copy: a copy would receive the results and be dropped.
template <typename T>
T* opt_ptr(py::object o, const char* name, std::initializer_list<py::ssize_t> dims, const std::string& form) {
  if (o.is_none()) return nullptr;
  if (!py::isinstance<carray<T>>(o) || !o.cast<py::array>().writeable())
    throw py::type_error(std::string(name) + " must be a C-contiguous writeable " +
                         (sizeof(T) == 4 ? "float32" : "float64") + " array (no conversion is made)");
  carray<T> a = o.cast<carray<T>>();
  check_shape(a, dims, name, form);
  return a.mutable_data();
}

template <typename T>
py::none fourier_mlp_run(carray<T> x, carray<T> freq, carray<T> phase, std::vector<carray<T>> weights,
                         std::vector<carray<T>> biases, int act, FourierMlpMode mode, py::object aux, py::object y,
                         py::object loss, py::object dx, std::vector<carray<T>> dw, std::vector<carray<T>> db,
                         int num_threads, const std::string& isa, long chunk, py::object gy, py::object aux_g,
                         double eikonal, double normal) {
  // Every shape is checked here, before any pointer is taken: the kernel trusts fan-ins, batch sizes
  // and lengths, so a direct call with mismatched arrays must stop at this boundary.
  Problem<T> pb;
  const int L = (int)weights.size();
  if (L < 2 || (int)biases.size() != L)
    throw std::invalid_argument("weights and biases must be equal-length lists with >= 1 hidden layer, got " +
                                std::to_string(L) + " weights and " + std::to_string(biases.size()) + " biases");
  if (act < fmlp::generic::RELU || act > fmlp::generic::SINE)
    throw std::invalid_argument("act must be an Activation code, got " + std::to_string(act));
  check_ndim(freq, 2, "frequencies");
  check_ndim(phase, 1, "phases");
  if (x.ndim() != 2 && x.ndim() != 3)
    throw std::invalid_argument("x must be [B, N, D] or [N, D], got " + shape_str(x));
  pb.D = freq.shape(1);
  if (pb.D != 2 && pb.D != 3)
    throw std::invalid_argument("frequencies must be [m, D] with D = 2 or 3, got " + shape_str(freq));
  if (x.shape(x.ndim() - 1) != pb.D)
    throw std::invalid_argument("x's last dimension must equal frequencies.shape[1] = " + std::to_string(pb.D) +
                                ", got x " + shape_str(x));
  pb.m = freq.shape(0);
  if (phase.shape(0) != pb.m)
    throw std::invalid_argument("phases must be [" + std::to_string(pb.m) + "], got " + shape_str(phase));
  check_finite(freq, "frequencies");
  check_finite(phase, "phases");
  check_ndim(weights[0], 3, "weights[0]");
  pb.B = weights[0].shape(0);
  pb.x_shared = x.ndim() == 2;
  pb.N = x.shape(x.ndim() - 2);
  const std::string sB = std::to_string(pb.B), sN = std::to_string(pb.N), sD = std::to_string(pb.D);
  if (pb.B < 1 || pb.N < 1)
    throw std::invalid_argument("need B >= 1 models and N >= 1 points, got weights[0] " + shape_str(weights[0]) +
                                ", x " + shape_str(x));
  if (!pb.x_shared && x.shape(0) != pb.B)
    throw std::invalid_argument("x must be [B, N, D] with B = " + sB + " (weights[0].shape[0]) or [N, D], got " +
                                shape_str(x));
  long fan_in = 2 * pb.m;
  for (int l = 0; l < L; ++l) {
    const bool last = l == L - 1;
    const carray<T>& w = weights[l];
    const std::string fi = std::to_string(fan_in);
    if (w.ndim() != 3 || w.shape(0) != pb.B || w.shape(1) != fan_in || (last && w.shape(2) != 1) || w.shape(2) < 1)
      throw std::invalid_argument(indexed("weights", l) + " must be [B, " + fi + ", " + (last ? "1" : "H") +
                                  "] with B = " + sB + (l ? " (fan-in = previous fan-out)" : " (fan-in = 2m)") +
                                  ", got " + shape_str(w));
    const long fo = w.shape(2);
    check_shape(biases[l], {pb.B, fo}, indexed("biases", l), "[B, " + std::to_string(fo) + "] with B = " + sB);
    pb.w.push_back(w.data());
    pb.b.push_back(biases[l].data());
    pb.fan_in.push_back(fan_in);
    pb.fan_out.push_back(fo);
    fan_in = fo;
  }
  if (mode < FourierMlpMode::Forward || mode > FourierMlpMode::JetTrainStep)
    throw std::invalid_argument("mode must be a FourierMlpMode (forward, train_step, backward, jet, jet_backward "
                                "or jet_train_step)");
  const bool jet = mode >= FourierMlpMode::Jet;
  const bool step = mode == FourierMlpMode::TrainStep || mode == FourierMlpMode::JetTrainStep;
  if (mode != FourierMlpMode::Forward && mode != FourierMlpMode::Jet) {
    if ((int)dw.size() != L || (int)db.size() != L) throw std::invalid_argument("dw/db must have one array per layer");
    for (int l = 0; l < L; ++l) {
      check_shape(dw[l], {pb.B, pb.fan_in[l], pb.fan_out[l]}, indexed("dw", l), "weights[l]'s shape");
      check_shape(db[l], {pb.B, pb.fan_out[l]}, indexed("db", l), "biases[l]'s shape");
      pb.dw.push_back(dw[l].mutable_data());
      pb.db.push_back(db[l].mutable_data());
    }
    if (aux.is_none()) throw std::invalid_argument("targets/cotangent required for the training and backward modes");
    pb.aux = opt_ptr<T>(aux, step ? "targets" : "the incoming gradient", {pb.B, pb.N},
                        "[B, N] = [" + sB + ", " + sN + "]");
  }
  const std::string sBND = "[B, N, D] = [" + sB + ", " + sN + ", " + sD + "]";
  if (!aux_g.is_none()) {
    if (mode != FourierMlpMode::JetBackward && mode != FourierMlpMode::JetTrainStep)
      throw std::invalid_argument("aux_g is only read by modes jet_backward and jet_train_step");
    pb.aux_g = opt_ptr<T>(aux_g, step ? "the target normals" : "the incoming gradient of the input gradient",
                          {pb.B, pb.N, pb.D}, sBND);
  }
  if (!gy.is_none() && mode != FourierMlpMode::Jet && mode != FourierMlpMode::JetBackward)
    throw std::invalid_argument("gy is only written by modes jet and jet_backward");
  if (!(std::isfinite(eikonal) && std::isfinite(normal) && eikonal >= 0 && normal >= 0))
    throw std::invalid_argument("eikonal and normal weights must be finite and >= 0");
  if (mode == FourierMlpMode::JetTrainStep && normal > 0 && !pb.aux_g)
    throw std::invalid_argument("a normal weight > 0 needs the target normals (aux_g)");
  pb.eikonal = T(eikonal);
  pb.normal = T(normal);
  pb.x = x.data();
  pb.freq = freq.data();
  pb.phase = phase.data();
  pb.act = act;
  pb.mode = mode;
  pb.chunk = chunk > 0 ? chunk : 4096;
  pb.y = opt_ptr<T>(y, "y", {pb.B, pb.N}, "[B, N] = [" + sB + ", " + sN + "]");
  pb.loss = mode == FourierMlpMode::JetTrainStep ? opt_ptr<T>(loss, "loss", {pb.B, 3}, "[B, 3] = [" + sB + ", 3]")
                                                 : opt_ptr<T>(loss, "loss", {pb.B}, "[B] = [" + sB + "]");
  pb.dx = opt_ptr<T>(dx, "dx", {pb.B, pb.N, pb.D}, sBND);
  pb.gy = opt_ptr<T>(gy, "gy", {pb.B, pb.N, pb.D}, sBND);
  if (pb.dx && (mode == FourierMlpMode::Forward || mode == FourierMlpMode::Jet || step))
    throw std::invalid_argument("dx is only written by modes backward and jet_backward");
  if ((mode == FourierMlpMode::Forward || mode == FourierMlpMode::Jet) && !pb.y)
    throw std::invalid_argument("modes forward and jet need y");
  if (mode == FourierMlpMode::Jet && !pb.gy) throw std::invalid_argument("mode jet needs gy");
  if (step && !pb.loss) throw std::invalid_argument("modes train_step and jet_train_step need loss");
  (void)jet;
  const Isa which = resolve_isa(isa);
  const int nt = clamp_threads(num_threads);
  int flags = 0;
  {
    py::gil_scoped_release release;
    flags = pb.D == 3 ? run_isa<T, 3>(which, pb, nt) : run_isa<T, 2>(which, pb, nt);
  }
  // The kernel checks its inputs as it reads them (free, unlike a separate pass over x).
  const char* bad = (flags & fmlp::generic::NONFINITE_X) ? "x"
                    : (flags & fmlp::generic::NONFINITE_AUX)
                        ? (step ? "targets" : "the incoming gradient")
                        : nullptr;
  if (bad)
    throw std::invalid_argument(std::string(bad) + " contains NaN or Inf values; the fused kernel needs finite inputs");
  return py::none();
}

// The kernel's float32 sin/cos (polynomial + Cody-Waite reduction), exposed for accuracy tests.
carray<float> sincos_f32(carray<float> u, const std::string& isa) {
  const Isa which = resolve_isa(isa);
  const py::ssize_t n = u.size();
  carray<float> out({(py::ssize_t)2, n});
  const float* up = u.data();
  float* s = out.mutable_data();
  float* c = s + n;
  SYMFAST_ISA_CALL(which, fmlp, sincos_array(up, s, c, n));
  return out;
}

}  // namespace

// Bindings, called from module.cpp.
void bind_fourier_mlp(py::module_& m) {
  // The kernel's activation codes and tile size, read by symfast/ops/fourier_mlp/cpu.py.
  py::enum_<fmlp::generic::Act>(m, "Activation", "Hidden activations of the fused kernel (the `act` code)")
      .value("relu", fmlp::generic::RELU)
      .value("tanh", fmlp::generic::TANH)
      .value("silu", fmlp::generic::SILU)
      .value("sine", fmlp::generic::SINE);
  py::enum_<FourierMlpMode>(m, "FourierMlpMode", "What one fused-MLP call computes (the `mode` argument)")
      .value("forward", FourierMlpMode::Forward)
      .value("train_step", FourierMlpMode::TrainStep)
      .value("backward", FourierMlpMode::Backward)
      .value("jet", FourierMlpMode::Jet)
      .value("jet_backward", FourierMlpMode::JetBackward)
      .value("jet_train_step", FourierMlpMode::JetTrainStep);
  m.attr("FOURIER_MLP_TILE") = fmlp::generic::TILE;
  m.attr("SINCOS_POLY_RANGE") = kSinCosPolyRange;
  def_f32_f64(m, "fourier_mlp_run", &fourier_mlp_run<float>, &fourier_mlp_run<double>,
              "Fused Fourier-PE + MLP on {dtype} arrays (see csrc/fourier_mlp.cpp header): mode forward, "
              "train_step (MSE), backward (cotangent), jet (f and grad_x f), jet_backward or jet_train_step "
              "(MSE + eikonal + normal terms); outputs written in place",
              py::arg("x").noconvert(), py::arg("frequencies").noconvert(), py::arg("phases").noconvert(),
              py::arg("weights").noconvert(), py::arg("biases").noconvert(), py::arg("act"), py::arg("mode"),
              py::arg("aux"), py::arg("y"), py::arg("loss"), py::arg("dx"), py::arg("dw").noconvert(),
              py::arg("db").noconvert(), py::arg("num_threads") = 1, py::arg("isa") = "auto",
              py::arg("chunk") = 4096, py::arg("gy") = py::none(), py::arg("aux_g") = py::none(),
              py::arg("eikonal") = 0.0, py::arg("normal") = 0.0);
  m.def("fourier_mlp_isa", [](const std::string& isa) { return std::string(isa_name(resolve_isa(isa))); },
        py::arg("isa") = "auto", "Instruction set the fourier_mlp kernel uses for `isa` on this CPU");
  m.def("fourier_mlp_sincos_f32", &sincos_f32, py::arg("u"), py::arg("isa") = "auto",
        "[2, n] sin and cos of u by the fourier_mlp kernel's float32 polynomial (tests)");
}


// The kernel's float32 sin/cos for other kernels (csrc/sincos.h); ISA resolved once.
void sincos_f32_dispatch(const float* u, float* s, float* c, long n) {
  static const Isa which = resolve_isa("auto");
  SYMFAST_ISA_CALL(which, fmlp, sincos_array(u, s, c, n));
}

}  // namespace symfast
