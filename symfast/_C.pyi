"""Type stub for symfast._C, the compiled CPU kernels (csrc/, bound in csrc/module.cpp).

Arrays are C-contiguous numpy arrays of exactly the stated dtype (no conversion is made for
the fused MLP's inputs and outputs). Call these through `symfast.ops`, which validates inputs.
"""
from enum import IntEnum

import numpy as np
from numpy.typing import NDArray

F = NDArray[np.float32] | NDArray[np.float64]
F32 = NDArray[np.float32]
F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

has_openmp: bool

def isa() -> str: ...  # what the kernels run by default: the CPU's widest, capped by SYMFAST_ISA
def cpu_isa() -> str: ...  # the widest this CPU and build run
FOURIER_MLP_TILE: int  # points per tile of the fused PE+MLP kernel
SINCOS_POLY_RANGE: float  # |u| below which float32 sin/cos use the polynomial (libm beyond)

class Activation(IntEnum):  # hidden activations of the fused kernel (its `act` code)
    relu = 0
    tanh = 1
    silu = 2
    sine = 3

class FourierMlpMode(IntEnum):  # what one fused-MLP call computes (its `mode` argument)
    forward = 0
    train_step = 1
    backward = 2

class MatchMode(IntEnum):  # matching families (the `mode` code)
    perm = 0
    sign = 1
    scale = 2

# fourier_features.cpp: x [N, 2], frequencies [m, 2], phases [m] -> [N, 2m]
def fourier_features_fwd_f32(x: F32, frequencies: F32, phases: F32, num_threads: int = 1) -> F32: ...
def fourier_features_fwd_f64(x: F64, frequencies: F64, phases: F64, num_threads: int = 1) -> F64: ...

# fourier_mlp.cpp: mode forward (y [B, N]), train_step (MSE: loss [B], dw, db), backward (cotangent:
# dw, db, optional dx [B, N, D]); outputs are written in place.
def fourier_mlp_run_f32(x: F32, frequencies: F32, phases: F32, weights: list[F32], biases: list[F32], act: int,
                        mode: FourierMlpMode, aux: F32 | None, y: F32 | None, loss: F32 | None, dx: F32 | None,
                        dw: list[F32], db: list[F32], num_threads: int = 1, isa: str = "auto",
                        chunk: int = 4096) -> None: ...
def fourier_mlp_run_f64(x: F64, frequencies: F64, phases: F64, weights: list[F64], biases: list[F64], act: int,
                        mode: FourierMlpMode, aux: F64 | None, y: F64 | None, loss: F64 | None, dx: F64 | None,
                        dw: list[F64], db: list[F64], num_threads: int = 1, isa: str = "auto",
                        chunk: int = 4096) -> None: ...
def fourier_mlp_isa(isa: str = "auto") -> str: ...
def fourier_mlp_sincos_f32(u: F32, isa: str = "auto") -> F32: ...  # [2, n]: sin, cos

# gram_scores.cpp
def gram_fwd_f32(weights: F32, num_threads: int = 1, isa: str = "auto") -> F32: ...  # [M, d, H] -> [M, d, d]
def gram_fwd_f64(weights: F64, num_threads: int = 1, isa: str = "auto") -> F64: ...
def blockperm_asym_f32(phi: F32, perm: I64, blocks: F64, num_threads: int = 1) -> F64: ...  # [M, E]
def blockperm_asym_f64(phi: F64, perm: I64, blocks: F64, num_threads: int = 1) -> F64: ...
def dense_asym_f32(phi: F32, multipliers: F64, a: I64, b: I64, num_threads: int = 1, isa: str = "auto") -> F64: ...
def dense_asym_f64(phi: F64, multipliers: F64, a: I64, b: I64, num_threads: int = 1, isa: str = "auto") -> F64: ...
def sym_stats_f32(phi: F32, num_threads: int = 1) -> tuple[float, float, int]: ...  # (max asym, max |phi|, #bad)
def sym_stats_f64(phi: F64, num_threads: int = 1) -> tuple[float, float, int]: ...

# matching.cpp
def lsa_batched(cost: F64, num_threads: int = 1) -> I64: ...  # [P, n, n] -> [P, n]
def match_gram_f32(gram: F32, a2: F64, b2: F64, mode: int, num_threads: int = 1) -> tuple[I64, F64]: ...
def match_gram_f64(gram: F64, a2: F64, b2: F64, mode: int, num_threads: int = 1) -> tuple[I64, F64]: ...
def match_signed_lifts_f32(W: F32, src: I64, sign: F64, mode: int,
                           num_threads: int = 1) -> tuple[I64, F64, F64]: ...  # index, scale, rel2
def match_signed_lifts_f64(W: F64, src: I64, sign: F64, mode: int, num_threads: int = 1) -> tuple[I64, F64, F64]: ...

# ordered_schur.cpp: W [M, n, n] -> (Q, T, eigvals [M, n, 2], info [M, 4], sector bookkeeping [M, 2])
def ordered_schur_f64(W: F64, alpha: float, tie_tol: float, num_threads: int = 1) -> tuple[F64, F64, F64, F64, I64]: ...
def ordschur_f64(U: F64, T: F64, clusters: F64, num_threads: int = 1) -> tuple[F64, F64, F64, F64]: ...

# rnn_rollout.cpp: W [A, H, H], ux [B, T, H], V [O, H], h0 [B, H] -> (y [A, B, T, O], hs [A, B, T, H] or empty)
def rnn_rollout_f32(W: F32, ux: F32, V: F32, h0: F32, return_hidden: bool = False,
                    num_threads: int = 1) -> tuple[F32, F32]: ...
def rnn_rollout_f64(W: F64, ux: F64, V: F64, h0: F64, return_hidden: bool = False,
                    num_threads: int = 1) -> tuple[F64, F64]: ...

# rnn_train.cpp: W [B, H, H], U [B, H, I], V [B, O, H], x [B, S, T, I], targets [B, S, T, O],
class RnnTrainMode(IntEnum):  # what one fused RNN-training call computes (its `mode` argument)
    loss = 0
    gradients = 1

# mask [B, S, T, O or 1] | None, h0 [B, S, H] | None, widths [B] | None; writes loss [B] (mode loss),
# and dW, dU, dV (dx [B, S, T, I], dh0 [B, S, H] when given) in mode gradients
def rnn_train_f32(W: F32, U: F32, V: F32, x: F32, targets: F32, mask: F32 | None, h0: F32 | None,
                  widths: I64 | None, mode: RnnTrainMode, loss: F32, dW: F32 | None, dU: F32 | None, dV: F32 | None,
                  dx: F32 | None, dh0: F32 | None, num_threads: int = 1, isa: str = "auto") -> None: ...
def rnn_train_f64(W: F64, U: F64, V: F64, x: F64, targets: F64, mask: F64 | None, h0: F64 | None,
                  widths: I64 | None, mode: RnnTrainMode, loss: F64, dW: F64 | None, dU: F64 | None, dV: F64 | None,
                  dx: F64 | None, dh0: F64 | None, num_threads: int = 1, isa: str = "auto") -> None: ...
def rnn_train_isa(isa: str = "auto") -> str: ...
