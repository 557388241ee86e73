// tanh of the recurrent kernels (rnn_train, rnn_rollout), written once.
// float32: odd rational minimax approximation on [-7.9, 7.9] (Eigen's coefficients for its
// vectorised tanh), a few ulp, vectorisable (std::tanh is not); clamped beyond, where
// tanh = +-1 in float. NaN stays NaN: the clamp is two comparisons, both false for NaN (a
// std::min/std::max clamp would turn NaN into -1). tanh(0) = 0 exactly, so padded units stay
// zero. float64 uses libm.
#pragma once
#include <cmath>

#include "common.h"

namespace symfast {

SYMFAST_INLINE float tanh_fast(float x) {
  const float c = 7.90531110763549805f;
  x = x < -c ? -c : (x > c ? c : x);
  const float x2 = x * x;
  float p = -2.76076847742355e-16f;
  p = p * x2 + 2.00018790482477e-13f;
  p = p * x2 + -8.60467152213735e-11f;
  p = p * x2 + 5.12229709037114e-08f;
  p = p * x2 + 1.48572235717979e-05f;
  p = p * x2 + 6.37261928875436e-04f;
  p = p * x2 + 4.89352455891786e-03f;
  p = p * x;
  float q = 1.19825839466702e-06f;
  q = q * x2 + 1.18534705686654e-04f;
  q = q * x2 + 2.26843463243900e-03f;
  q = q * x2 + 4.89352518554385e-03f;
  const float r = p / q;
  return __builtin_fabsf(x) < 0.0004f ? x : r;
}

SYMFAST_INLINE double tanh_fast(double x) { return std::tanh(x); }

}  // namespace symfast
