// Fused ensemble training step of bias-free tanh RNNs, compiled once per instruction set.
//
// rnn_train.cpp stamps it out per instruction set through isa_instances.h (namespaces
// symfast::rnnt::{avx512, avx2, generic}), after simd.h (Vec, pad_to, the micro-GEMM `gemm`);
// tanh_fast comes from tanh_fast.h. No headers here.
//
// Model b (width Hb <= Hm, every product over its first Hb units only), S sequences, T steps:
//   forward   H_t = tanh(H_{t-1} W^T + X_t U^T)          H_t: [S, Hp] (Hp = Hb padded to a vector)
//             Y_t = H_t V^T,  e = Y_t - targets_t
//             loss = sum_{s,t,o} m e^2 / max(sum m, 1)   (m broadcast over o when mask is [S, T])
//   backward  dY_t = 2 m e / max(sum m, 1)
//             G_t  = dY_t V + dZ_{t+1} W,  dZ_t = G_t * (1 - H_t^2)
//             dW += dZ_t^T H_{t-1},  dU += dZ_t^T X_t,  dV += dY_t^T H_t
//             dx_t = dZ_t U,  dh0 = dZ_0 W
// One thread owns one model from start to end, so every sum runs in a fixed order
// (results do not depend on the thread count). All hidden states of a model are kept
// ([T + 1, S, Hp]); the backward's per-step products run while dZ_t and H_{t-1} are in L1.

template <typename T>
inline void tanh_inplace(T* x, long n) {
#pragma omp simd
  for (long k = 0; k < n; ++k) x[k] = tanh_fast(x[k]);
}

// 64-byte aligned, zeroed scratch.
template <typename T>
struct Scratch {
  T* p = nullptr;
  explicit Scratch(long n) {
    const size_t bytes = (size_t)std::max<long>(64, (n * (long)sizeof(T) + 63) / 64 * 64);
    p = static_cast<T*>(std::aligned_alloc(64, bytes));
    if (!p) throw std::bad_alloc();
    std::memset(p, 0, bytes);
  }
  Scratch(const Scratch&) = delete;
  ~Scratch() { std::free(p); }
};

// The hidden states of one model ([T + 1, S, Hp], megabytes): one grow-only buffer per thread,
// reused across models and calls (a fresh allocation this size is a fresh mmap, whose page
// faults and zeroing cost ~10% of a step).
template <typename T>
T* hidden_pool(long n) {
  thread_local struct Pool {
    T* p = nullptr;
    long n = 0;
    ~Pool() { std::free(p); }
  } pool;
  if (n > pool.n) {
    std::free(pool.p);
    pool.p = static_cast<T*>(std::aligned_alloc(64, (size_t)((n * (long)sizeof(T) + 63) / 64 * 64)));
    pool.n = pool.p ? n : 0;
    if (!pool.p) throw std::bad_alloc();
  }
  return pool.p;
}

// Non-finite flags, one bit per input (the kernel reads each input once before the step).
enum Flag { BAD_W = 1, BAD_U = 2, BAD_V = 4, BAD_X = 8, BAD_TARGETS = 16, BAD_MASK = 32, BAD_H0 = 64, NO_MEMORY = 128 };

template <typename T>
inline int nonfinite(const T* p, long n) {
  int bad = 0;
  for (long k = 0; k < n; ++k) bad |= !__builtin_isfinite(p[k]);
  return bad;
}

// One model: the whole forward, loss and (mode gradients) backward. Returns its non-finite flags
// (nothing is computed when any is set).
template <typename T>
int train_one(const RnnTrainProblem<T>& pb, long b) {
  constexpr int W = Vec<T>::W;
  const long Hm = pb.Hm, I = pb.I, O = pb.O, S = pb.S, Tn = pb.T_, Mo = pb.Mo;
  const long H = pb.widths ? pb.widths[b] : Hm;
  const long Hp = pad_to(H, W);
  const T* Wb = pb.W + b * Hm * Hm;
  const T* Ub = pb.U + b * Hm * I;
  const T* Vb = pb.V + b * O * Hm;
  const T* xb = pb.x + b * S * Tn * I;
  const T* tb = pb.targets + b * S * Tn * O;
  const T* mb = pb.mask ? pb.mask + b * S * Tn * Mo : nullptr;
  const T* h0b = pb.h0 ? pb.h0 + b * S * Hm : nullptr;

  int flags = 0;
  for (long i = 0; i < H; ++i) {
    if (nonfinite(Wb + i * Hm, H)) flags |= BAD_W;
    if (nonfinite(Ub + i * I, I)) flags |= BAD_U;
  }
  for (long o = 0; o < O; ++o)
    if (nonfinite(Vb + o * Hm, H)) flags |= BAD_V;
  if (nonfinite(xb, S * Tn * I)) flags |= BAD_X;
  if (nonfinite(tb, S * Tn * O)) flags |= BAD_TARGETS;
  if (mb && nonfinite(mb, S * Tn * Mo)) flags |= BAD_MASK;
  if (h0b)
    for (long s = 0; s < S; ++s)
      if (nonfinite(h0b + s * Hm, H)) flags |= BAD_H0;
  if (flags) return flags;

  // Packed, zero-padded weights: WT[j, i] = W[i, j] (forward), Wp[i, j] = W[i, j] (backward),
  // UT[k, i] = U[i, k], Vp[o, i] = V[o, i]; VT[j, o] = V[o, j] and Up[i, k] = U[i, k] with
  // OW / IW columns (O, I padded to a vector) for the readout and dx products.
  const long OW = pad_to(O, W), IW = pad_to(I, W);
  Scratch<T> WT(Hp * Hp), Wp(Hp * Hp), UT(I * Hp), Vp(O * Hp), VT(Hp * OW), Up(Hp * IW);
  for (long i = 0; i < H; ++i) {
    for (long j = 0; j < H; ++j) {
      WT.p[j * Hp + i] = Wb[i * Hm + j];
      Wp.p[i * Hp + j] = Wb[i * Hm + j];
    }
    for (long k = 0; k < I; ++k) UT.p[k * Hp + i] = Up.p[i * IW + k] = Ub[i * I + k];
  }
  for (long o = 0; o < O; ++o)
    for (long i = 0; i < H; ++i) Vp.p[o * Hp + i] = VT.p[i * OW + o] = Vb[o * Hm + i];

  double msum = 0;  // the loss's denominator
  if (mb) {
    for (long k = 0; k < S * Tn * Mo; ++k) msum += (double)mb[k];
    msum *= (double)(O / Mo);
  } else {
    msum = (double)(S * Tn * O);
  }
  const double denom = msum > 1.0 ? msum : 1.0;
  const T gscale = (T)(2.0 / denom);

  // Hs[t + 1] = H_t (every entry written by the step's first gemm), Hs[0] = h0; dY [T, S, O];
  // Y: one step's outputs [S, OW].
  T* const hsb = hidden_pool<T>((Tn + 1) * S * Hp);
  std::memset(hsb, 0, S * Hp * sizeof(T));
  Scratch<T> dY(pb.mode == RnnTrainMode::Gradients ? Tn * S * O : 1), Y(S * OW);
  if (h0b)
    for (long s = 0; s < S; ++s) std::memcpy(hsb + s * Hp, h0b + s * Hm, H * sizeof(T));
  const long xs = Tn * I;  // x's stride between sequences
  double loss = 0;
  for (long t = 0; t < Tn; ++t) {
    T* hp = hsb + t * S * Hp;
    T* hn = hp + S * Hp;
    gemm<T, INIT_ZERO>(S, Hp, (int)I, xb + t * I, xs, 1, UT.p, Hp, hn, Hp);  // X_t U^T
    gemm<T, INIT_ACC>(S, Hp, (int)H, hp, Hp, 1, WT.p, Hp, hn, Hp);          // + H_{t-1} W^T
    tanh_inplace(hn, S * Hp);
    gemm<T, INIT_ZERO>(S, OW, (int)H, hn, Hp, 1, VT.p, OW, Y.p, OW);       // Y_t = H_t V^T
    for (long s = 0; s < S; ++s) {  // loss and dY
      const T* tr = tb + (s * Tn + t) * O;
      for (long o = 0; o < O; ++o) {
        const T e = Y.p[s * OW + o] - tr[o];
        const T m = mb ? mb[(s * Tn + t) * Mo + (Mo == 1 ? 0 : o)] : T(1);
        loss += (double)(m * e * e);
        if (pb.mode == RnnTrainMode::Gradients) dY.p[(t * S + s) * O + o] = gscale * m * e;
      }
    }
  }
  pb.loss[b] = (T)(loss / denom);
  if (pb.mode == RnnTrainMode::Loss) return 0;

  // Backward through time.
  Scratch<T> G(S * Hp), dZn(S * Hp), dWa(Hp * Hp), dUT(I * Hp), dVa(O * Hp), DX(pb.dx ? S * IW : 1);
  T* dxb = pb.dx ? pb.dx + b * S * Tn * I : nullptr;
  for (long t = Tn - 1; t >= 0; --t) {
    const T* ht = hsb + (t + 1) * S * Hp;
    const T* hprev = hsb + t * S * Hp;
    const T* dyt = dY.p + t * S * O;
    gemm<T, INIT_ACC>(O, Hp, (int)S, dyt, 1, O, ht, Hp, dVa.p, Hp);                  // dV += dY_t^T H_t
    gemm<T, INIT_ZERO>(S, Hp, (int)O, dyt, O, 1, Vp.p, Hp, G.p, Hp);                 // G = dY_t V
    if (t < Tn - 1) gemm<T, INIT_ACC>(S, Hp, (int)H, dZn.p, Hp, 1, Wp.p, Hp, G.p, Hp);  // + dZ_{t+1} W
#pragma omp simd
    for (long k = 0; k < S * Hp; ++k) G.p[k] *= T(1) - ht[k] * ht[k];  // G is now dZ_t
    gemm<T, INIT_ACC>(H, Hp, (int)S, G.p, 1, Hp, hprev, Hp, dWa.p, Hp);              // dW += dZ_t^T H_{t-1}
    gemm<T, INIT_ACC>(I, Hp, (int)S, xb + t * I, 1, xs, G.p, Hp, dUT.p, Hp);         // dU^T += X_t^T dZ_t
    if (dxb) {                                                                   // dx_t = dZ_t U
      gemm<T, INIT_ZERO>(S, IW, (int)H, G.p, Hp, 1, Up.p, IW, DX.p, IW);
      for (long s = 0; s < S; ++s) std::memcpy(dxb + (s * Tn + t) * I, DX.p + s * IW, I * sizeof(T));
    }
    std::swap(G.p, dZn.p);  // dZn = dZ_t
  }
  // Outputs: the active block, zeros elsewhere (padded units get exactly zero gradient).
  T* dWb = pb.dW + b * Hm * Hm;
  T* dUb = pb.dU + b * Hm * I;
  T* dVb = pb.dV + b * O * Hm;
  std::memset(dWb, 0, Hm * Hm * sizeof(T));
  std::memset(dUb, 0, Hm * I * sizeof(T));
  std::memset(dVb, 0, O * Hm * sizeof(T));
  for (long i = 0; i < H; ++i) {
    std::memcpy(dWb + i * Hm, dWa.p + i * Hp, H * sizeof(T));
    for (long k = 0; k < I; ++k) dUb[i * I + k] = dUT.p[k * Hp + i];
  }
  for (long o = 0; o < O; ++o) std::memcpy(dVb + o * Hm, dVa.p + o * Hp, H * sizeof(T));
  if (pb.dh0) {  // dh0 = dZ_0 W
    T* dh0b = pb.dh0 + b * S * Hm;
    std::memset(dh0b, 0, S * Hm * sizeof(T));
    gemm<T, INIT_ZERO>(S, Hp, (int)H, dZn.p, Hp, 1, Wp.p, Hp, G.p, Hp);
    for (long s = 0; s < S; ++s) std::memcpy(dh0b + s * Hm, G.p + s * Hp, H * sizeof(T));
  }
  return 0;
}

// All models, OpenMP over models (one thread per model). Returns the OR of the flags.
template <typename T>
int run(const RnnTrainProblem<T>& pb, int nt) {
  int flags = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nt) reduction(| : flags)
  for (long b = 0; b < pb.B; ++b) {
    try {
      flags |= train_one<T>(pb, b);
    } catch (const std::bad_alloc&) {  // never let an exception leave the parallel region
      flags |= NO_MEMORY;
    }
  }
  return flags;
}
