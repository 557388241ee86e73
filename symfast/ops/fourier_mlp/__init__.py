"""Fused batched Fourier-PE + MLP: forward, backward and training step for B models.

Points have input dimension D = 2 or 3 (x [B, N, D] or [N, D], frequencies [m, D]).

Model b: y = W_out act(... act(phi(x) W_1 + b_1) ...) + b_out with phi a Fourier PE
(frequencies + phases shared by the batch) computed on the fly.

Where things live:
  ops           _op.py: torch.ops.symfast.fourier_mlp (+ _backward) and fourier_mlp_train_step
  reference     symfast/ops/fourier_mlp/reference.py (PyTorch, the ground truth)
  CPU kernel    csrc/fourier_mlp.cpp + csrc/fourier_mlp_impl.h via cpu.py (OpenMP over
                (model, point chunk); AVX-512 / AVX2 / baseline chosen at run time)
  Triton        triton.py (CUDA float32)
  tests         tests/ops/test_fourier_mlp.py, tests/ops/test_transforms.py
  benchmark     benchmarks/benchmarks/bench_fourier_mlp.py
Backends resolve in `symfast.ops._dispatch` ("auto": C++ on CPU, Triton on CUDA).
Gradients reach every weight, bias and x (custom op + autograd, usable in torch.compile);
double backward and gradients to frequencies/phases go through the reference. Under
torch.func transforms (vmap, grad, jacrev) the reference runs instead of the kernels
(plain PyTorch, exact; costs the reference's speed: ~6x the fused kernel for a training step).
"""
from __future__ import annotations

import torch

from symfast import _ext
from symfast.ops import _dispatch
from symfast.ops.fourier_mlp import reference
from symfast.ops.fourier_mlp._op import (MAX_WIDTH, check_finite_params, fourier_mlp_op, fourier_mlp_train_step_op,
                                         validate)

__all__ = ["fourier_mlp", "fourier_mlp_train_step", "mse_loss", "ACTIVATIONS", "BACKENDS", "MAX_WIDTH"]

ACTIVATIONS = tuple(reference.ACTIVATIONS)  # the names of the one activation table
BACKENDS = _dispatch.BACKENDS
mse_loss = reference.mse_loss


def _validate(x, frequencies, phases, weights, biases, activation, targets=None):
    """The op's checks (`_op.validate`) plus contiguity, with messages naming the offender; returns (B, N)."""
    B, N = validate(x, frequencies, phases, weights, biases, activation, targets=targets, pe_cast=True)
    named = [("x", x)] + [(f"weights[{l}]", w) for l, w in enumerate(weights)] + \
        [(f"biases[{l}]", b) for l, b in enumerate(biases)] + ([] if targets is None else [("targets", targets)])
    for name, t in named:
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (shape {list(t.shape)}, strides {list(t.stride())}); "
                             f"call .contiguous()")
    return B, N


def _resolve_backend(backend: str, x: torch.Tensor, weights) -> str:
    problem = None
    if _ext.HAS_TRITON and (x.device.type == "cuda" or backend == "triton"):
        from symfast.ops.fourier_mlp import triton as tri
        problem = tri.unsupported(x.dtype, weights)
    return _dispatch.resolve("fourier_mlp", backend, x.device, triton=True, triton_problem=problem)


def fourier_mlp(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor, weights, biases,
                activation: str = "relu", backend: str = "auto") -> torch.Tensor:
    """Forward pass of B Fourier-PE + MLP models, differentiable (fused backward).

    Args:
        x: [B, N, D] points per model, or [N, D] shared by all models (float32 or float64), D = 2 or 3.
        frequencies: [m, D] (same D), phases: [m] of the PE (d = 2m); cast to x's dtype and device.
        weights: L+1 tensors, fan-in first: [B, d, H_1], ..., [B, H_L, 1] (L >= 1 hidden layers).
        biases: L+1 tensors [B, fan_out].
        activation: "relu", "tanh", "silu" or "sine" (hidden layers).
        backend: "auto" (C++ on CPU, Triton on CUDA), "cpu", "triton" or "reference"
            (see `symfast.ops._dispatch`).

    Returns:
        [B, N] outputs. Gradients flow to x, weights and biases; gradients to
        frequencies/phases and double backward use the reference.
    """
    _validate(x, frequencies, phases, weights, biases, activation)
    frequencies = frequencies.to(device=x.device, dtype=x.dtype).contiguous()
    phases = phases.to(device=x.device, dtype=x.dtype).contiguous()
    backend = _resolve_backend(backend, x, weights)
    if (backend == "reference" or frequencies.requires_grad or phases.requires_grad
            or _dispatch.under_functorch(x, frequencies, phases, *weights, *biases)):
        if backend == "reference" and not (torch.compiler.is_compiling()
                                           or _dispatch.under_functorch(*weights, *biases)):
            check_finite_params(weights, biases, frequencies, phases)  # as in the op's kernels
        return reference.fourier_mlp(x, frequencies, phases, list(weights), list(biases), activation)
    return fourier_mlp_op(x, frequencies, phases, list(weights), list(biases), activation, backend)


def fourier_mlp_train_step(x: torch.Tensor, targets: torch.Tensor, frequencies: torch.Tensor,
                           phases: torch.Tensor, weights, biases, activation: str = "relu",
                           backend: str = "auto"):
    """Fused forward + per-model MSE + backward for B models in one pass (no autograd graph).

    Args:
        x: [B, N, D] (or [N, D] shared); targets: [B, N]; the rest as in `fourier_mlp`.
            Weights/biases may require grad (they are read, not tracked).

    Returns:
        (loss [B], dW list, db list): loss[b] = mean_n (y_bn - targets_bn)^2, and the gradients
        of loss.sum() shaped like weights/biases (model b's gradient is that of its own MSE),
        accumulated per model in a fixed order (deterministic for any thread count on CPU).
        Use as `p.grad = g` before `torch.optim.Adam(..., fused=True).step()`.
    """
    _validate(x, frequencies, phases, weights, biases, activation, targets)
    frequencies = frequencies.to(device=x.device, dtype=x.dtype).contiguous()
    phases = phases.to(device=x.device, dtype=x.dtype).contiguous()
    backend = _resolve_backend(backend, x, weights)
    if backend == "reference" or _dispatch.under_functorch(x, targets, *weights, *biases):
        if backend == "reference" and not (torch.compiler.is_compiling()
                                           or _dispatch.under_functorch(*weights, *biases)):
            check_finite_params(weights, biases, frequencies, phases)  # as in the op's kernels
        return reference.fourier_mlp_train_step(x, targets, frequencies, phases, list(weights), list(biases),
                                                activation)
    L = len(weights)
    out = fourier_mlp_train_step_op(x.detach(), targets.detach(), frequencies, phases,
                                    [w.detach() for w in weights], [b.detach() for b in biases], activation,
                                    backend)
    return out[0], list(out[1:1 + L]), list(out[1 + L:])
