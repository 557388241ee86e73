// Vectorised float32 sin/cos shared by the CPU kernels (defined in fourier_mlp.cpp:
// polynomial with Cody-Waite range reduction, ~1e-7 absolute up to |u| = 8200,
// AVX-512 / AVX2 / baseline chosen at run time).
#pragma once

namespace symfast {
// Largest |u| for which the polynomial is used; beyond it (or for NaN) callers use libm.
constexpr float kSinCosPolyRange = 8000.f;

// s[i] = sin(u[i]), c[i] = cos(u[i]) for i < n (|u| < kSinCosPolyRange).
void sincos_f32_dispatch(const float* u, float* s, float* c, long n);
}  // namespace symfast
