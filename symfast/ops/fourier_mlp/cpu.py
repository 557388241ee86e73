"""Launcher for the C++ fused PE+MLP kernel (`csrc/fourier_mlp.cpp`).

Inputs are validated by `symfast.ops.fourier_mlp`; here they only become numpy
views (no copies for contiguous CPU tensors) and outputs are allocated as torch
tensors that the kernel writes in place.
"""
from __future__ import annotations

import torch

from symfast import _ext

# The kernel's activation codes and points per tile, read from the extension (never mirrored).
ACT_CODES = {name: int(code) for name, code in _ext._C.Activation.__members__.items()} if _ext._C else {}
TILE = int(_ext._C.FOURIER_MLP_TILE) if _ext._C else 48
MAX_WIDTH = 1024  # widest hidden layer the kernel takes (its tile buffers scale with it)


def unsupported(weights) -> str:
    """Why the C++ kernel cannot run this model ('' when it can); the reference runs any."""
    widest = max(w.shape[2] for w in weights[:-1])
    if widest > MAX_WIDTH:
        return f"hidden widths up to {MAX_WIDTH}, got {widest}"
    if weights[-1].shape[2] != 1:
        return f"one output (out_features = 1), got {weights[-1].shape[2]}"
    return ""


def chunk_size(B: int, N: int) -> int:
    """Points per work unit: models are split into chunks only when B is small (>= ~64 units
    in all, >= 1024 points each; splitting costs ~4% at B = 128, so it is kept for B < 64).
    A function of (B, N) alone, so results do not depend on the thread count; each chunk's
    gradient partial is summed in chunk order."""
    C = max(1, min(-(-64 // max(B, 1)), -(-N // 1024)))
    return -(-(-(-N // C)) // TILE) * TILE


def _np(t: torch.Tensor):
    return t.detach().contiguous().numpy()


def _run(mode: str, x, freq, phase, weights, biases, activation, aux=None, y=None, loss=None, dx=None,
         dw=(), db=(), isa="auto", gy=None, aux_g=None, eikonal=0.0, normal=0.0):
    """One kernel call; mode names a member of the kernel's _C.FourierMlpMode (forward, train_step,
    backward, jet, jet_backward, jet_train_step), passed as that enum."""
    C = _ext.require_cpp()
    fn = C.fourier_mlp_run_f32 if x.dtype == torch.float32 else C.fourier_mlp_run_f64
    fn(_np(x), _np(freq), _np(phase), [_np(w) for w in weights], [_np(b) for b in biases],
       ACT_CODES[activation], C.FourierMlpMode.__members__[mode], None if aux is None else _np(aux),
       None if y is None else y.numpy(), None if loss is None else loss.numpy(),
       None if dx is None else dx.numpy(), [g.numpy() for g in dw], [g.numpy() for g in db],
       _ext.num_threads(), isa, chunk_size(weights[0].shape[0], x.shape[-2]),
       None if gy is None else gy.numpy(), None if aux_g is None else _np(aux_g), float(eikonal), float(normal))


def fourier_mlp_fwd(x, freq, phase, weights, biases, activation, isa="auto") -> torch.Tensor:
    """y: [B, N] from x: [B, N, D] or [N, D] (see reference.fourier_mlp)."""
    B, N = weights[0].shape[0], x.shape[-2]
    y = torch.empty(B, N, dtype=x.dtype)
    _run("forward", x, freq, phase, weights, biases, activation, y=y, isa=isa)
    return y


def fourier_mlp_bwd(grad, x, freq, phase, weights, biases, activation, need_dx, isa="auto"):
    """Cotangent grad: [B, N] -> (dx [B, N, D] per model or None, dW list, db list)."""
    B, N = grad.shape
    dw = [torch.empty_like(w, memory_format=torch.contiguous_format) for w in weights]
    db = [torch.empty_like(b, memory_format=torch.contiguous_format) for b in biases]
    dx = torch.empty(B, N, x.shape[-1], dtype=x.dtype) if need_dx else None
    _run("backward", x, freq, phase, weights, biases, activation, aux=grad, dx=dx, dw=dw, db=db, isa=isa)
    return dx, dw, db


def fourier_mlp_train_step(x, targets, freq, phase, weights, biases, activation, isa="auto"):
    """(loss [B], dW list, db list) of the per-model MSE, in one fused pass."""
    dw = [torch.empty_like(w, memory_format=torch.contiguous_format) for w in weights]
    db = [torch.empty_like(b, memory_format=torch.contiguous_format) for b in biases]
    loss = torch.empty(weights[0].shape[0], dtype=x.dtype)
    _run("train_step", x, freq, phase, weights, biases, activation, aux=targets, loss=loss, dw=dw, db=db, isa=isa)
    return loss, dw, db


def _grads_like(weights, biases):
    return ([torch.empty_like(w, memory_format=torch.contiguous_format) for w in weights],
            [torch.empty_like(b, memory_format=torch.contiguous_format) for b in biases])


def fourier_mlp_jet(x, freq, phase, weights, biases, activation, isa="auto"):
    """(f [B, N], g [B, N, D]): the outputs and their input gradients in one pass (reference.fourier_mlp_jet)."""
    B, N, D = weights[0].shape[0], x.shape[-2], x.shape[-1]
    y, gy = torch.empty(B, N, dtype=x.dtype), torch.empty(B, N, D, dtype=x.dtype)
    _run("jet", x, freq, phase, weights, biases, activation, y=y, gy=gy, isa=isa)
    return y, gy


def fourier_mlp_jet_bwd(cf, cg, x, freq, phase, weights, biases, activation, need_dx, isa="auto"):
    """Cotangents cf [B, N] of f and cg [B, N, D] of g -> (dx [B, N, D] per model or None, dW, db, and the
    recomputed f [B, N] and g [B, N, D], for the overflow rule)."""
    B, N, D = weights[0].shape[0], x.shape[-2], x.shape[-1]
    dw, db = _grads_like(weights, biases)
    dx = torch.empty(B, N, D, dtype=x.dtype) if need_dx else None
    y, gy = torch.empty(B, N, dtype=x.dtype), torch.empty(B, N, D, dtype=x.dtype)
    _run("jet_backward", x, freq, phase, weights, biases, activation, aux=cf, aux_g=cg, dx=dx, dw=dw, db=db, isa=isa,
         y=y, gy=gy)
    return dx, dw, db, y, gy


def eikonal_train_step(x, targets, freq, phase, weights, biases, activation, eikonal, normals=None, normal=0.0,
                       isa="auto"):
    """(terms [B, 3], dW, db) of sum_b (mse + eikonal * eik + normal * nrm), in one fused pass."""
    dw, db = _grads_like(weights, biases)
    terms = torch.empty(weights[0].shape[0], 3, dtype=x.dtype)
    _run("jet_train_step", x, freq, phase, weights, biases, activation, aux=targets, aux_g=normals, loss=terms,
         dw=dw, db=db, isa=isa, eikonal=eikonal, normal=normal)
    return terms, dw, db
