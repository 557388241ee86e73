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
  second order  _jet_op.py (ops), csrc/fourier_mlp_jet_impl.h (C++ engine), triton_jet.py (Triton kernels)
  tests         tests/ops/test_fourier_mlp.py, tests/ops/test_fourier_mlp_jet.py, tests/ops/test_transforms.py
  benchmark     benchmarks/benchmarks/bench_fourier_mlp.py
Backends resolve in `symfast.ops._dispatch` ("auto": C++ on CPU, Triton on CUDA), by the one rule
`resolve_backend` (_op.py), which the ops also apply to "auto" inside their kernels.
Gradients reach every weight, bias and x (custom op + autograd, usable in torch.compile).
Second order (input-gradient losses: eikonal, normals) is fused on the CPU and, for the models the
Triton kernels take (float32, 1..4 hidden layers of one width 16..256; a model whose jet kernel needs
more shared memory than the GPU has runs the reference, with a one-time warning), on CUDA: `fourier_mlp_jet`
gives f and grad_x f in one pass with a fused double backward, and torch.autograd.grad(f, x,
create_graph=True) through `fourier_mlp` reaches it; `fourier_mlp_eikonal_step` is the one-pass
training step. Gradients to frequencies/phases go through the reference. Under
torch.func transforms (vmap, grad, jacrev) the reference runs instead of the kernels
(plain PyTorch, exact; costs the reference's speed: ~6x the fused kernel for a training step).
"""
from __future__ import annotations

import contextlib

import torch

from symfast.ops import _dispatch
from symfast.ops.fourier_mlp import cpu, reference
from symfast.ops.fourier_mlp._jet_op import (eikonal_outputs, fourier_mlp_eikonal_step_op, fourier_mlp_jet_op,
                                             overflowed, validate_jet)
from symfast.ops.fourier_mlp._op import (check_finite_params, fourier_mlp_op, fourier_mlp_train_step_op,
                                         nan_past_overflow, resolve_backend, step_outputs, validate)

__all__ = ["fourier_mlp", "fourier_mlp_train_step", "fourier_mlp_jet", "fourier_mlp_eikonal_step", "mse_loss", "ACTIVATIONS", "BACKENDS", "MAX_WIDTH",
           "LOW_PRECISION"]

ACTIVATIONS = tuple(reference.ACTIVATIONS)  # the names of the one activation table
BACKENDS = _dispatch.BACKENDS
MAX_WIDTH = cpu.MAX_WIDTH  # widest hidden layer of the C++ kernel (the reference has no limit)
LOW_PRECISION = (torch.bfloat16, torch.float16)  # computed in float32, see `_full_precision`
mse_loss = reference.mse_loss


def _full_precision(x, weights, biases, *extra):
    """The dtype convention: (x, weights, biases, *extra, out_dtype, context).

    bfloat16/float16 tensors are computed in float32 (or in the weights' float64): x, extra
    tensors (targets), weights and biases in those dtypes are cast (differentiably) and the output
    returned in x's dtype. Under torch.autocast for x's device, float32 inputs are computed in
    float32 with autocast off inside (the reference's matmuls too) and the output returned in the
    autocast dtype, as autocast's own matmuls return it. out_dtype is None when the output stays
    in the computed dtype; `context` disables autocast around the computation.
    """
    if not (isinstance(x, torch.Tensor) and isinstance(weights, (list, tuple)) and isinstance(biases, (list, tuple))
            and weights):  # not a valid call: `validate` says why
        return (x, weights, biases, *extra, None, contextlib.nullcontext())
    full = x.dtype if x.dtype not in LOW_PRECISION else \
        (weights[0].dtype if isinstance(weights[0], torch.Tensor) and weights[0].dtype == torch.float64
         else torch.float32)
    out_dtype = x.dtype if x.dtype in LOW_PRECISION else None
    dev = x.device.type
    autocast = dev in ("cpu", "cuda") and torch.is_autocast_enabled(dev)
    if autocast and full == torch.float32:
        out_dtype = torch.get_autocast_dtype(dev)
    low = [t.to(full) if isinstance(t, torch.Tensor) and t.dtype in LOW_PRECISION else t
           for t in (x, *weights, *biases, *extra)]
    L = len(weights)
    ctx = torch.autocast(dev, enabled=False) if autocast else contextlib.nullcontext()
    return (low[0], low[1:1 + L], low[1 + L:1 + 2 * L], *low[1 + 2 * L:], out_dtype, ctx)


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


def fourier_mlp(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor, weights, biases,
                activation: str = "relu", backend: str = "auto") -> torch.Tensor:
    """Forward pass of B Fourier-PE + MLP models, differentiable (fused backward).

    Args:
        x: [B, N, D] points per model, or [N, D] shared by all models, D = 2 or 3; float32 or
            float64, or bfloat16/float16 (computed in float32, returned in x's dtype); N = 0 gives
            an empty output.
        frequencies: [m, D] (same D), phases: [m] of the PE (d = 2m); cast to the computed dtype and x's device.
        weights: L+1 tensors, fan-in first: [B, d, H_1], ..., [B, H_L, K] (L >= 1 hidden layers,
            K >= 1 outputs; the C++ and Triton kernels take K = 1 and, C++, widths up to MAX_WIDTH:
            "auto" runs other models on the reference, with a one-time warning).
        biases: L+1 tensors [B, fan_out].
        activation: "relu", "tanh", "silu" or "sine" (hidden layers).
        backend: "auto" (C++ on CPU, Triton on CUDA), "cpu", "triton" or "reference"
            (see `symfast.ops._dispatch`).

    Returns:
        [B, N] outputs ([B, N, K] for K > 1), in x's dtype (under torch.autocast: the autocast
        dtype). Gradients flow to x, weights and biases; gradients to frequencies/phases and
        double backward use the reference.
    """
    x, weights, biases, out_dtype, no_autocast = _full_precision(x, weights, biases)
    _validate(x, frequencies, phases, weights, biases, activation)
    frequencies = frequencies.to(device=x.device, dtype=x.dtype).contiguous()
    phases = phases.to(device=x.device, dtype=x.dtype).contiguous()
    requested, backend = backend, resolve_backend(backend, x.device, x.dtype, weights)
    with no_autocast:
        if (backend == "reference" or frequencies.requires_grad or phases.requires_grad
                or _dispatch.under_functorch(x, frequencies, phases, *weights, *biases)):
            if backend == "reference" and not (torch.compiler.is_compiling()
                                               or _dispatch.under_functorch(*weights, *biases)):
                check_finite_params(weights, biases, frequencies, phases)  # as in the op's kernels
            y = reference.fourier_mlp(x, frequencies, phases, list(weights), list(biases), activation)
        else:
            y = fourier_mlp_op(x, frequencies, phases, list(weights), list(biases), activation,
                               _dispatch.for_op(requested, backend))
    return y if out_dtype is None else y.to(out_dtype)


def fourier_mlp_train_step(x: torch.Tensor, targets: torch.Tensor, frequencies: torch.Tensor,
                           phases: torch.Tensor, weights, biases, activation: str = "relu",
                           backend: str = "auto"):
    """Fused forward + per-model MSE + backward for B models in one pass (no autograd graph).

    Args:
        x: [B, N, D] (or [N, D] shared); targets: shaped like the output ([B, N], or [B, N, K]);
            the rest as in `fourier_mlp` (bfloat16/float16 x and targets are computed in float32).
            Weights/biases may require grad (they are read, not tracked).

    Returns:
        (loss [B], dW list, db list), in the computed dtype: loss[b] = `mse_loss` (the mean over
        points and outputs; NaN for N = 0, whose gradients are zero), and the gradients
        of loss.sum() shaped like weights/biases (model b's gradient is that of its own MSE),
        accumulated per model in a fixed order (deterministic for any thread count on CPU).
        Use as `p.grad = g` before `torch.optim.Adam(..., fused=True).step()`.
    """
    x, weights, biases, targets, _, no_autocast = _full_precision(x, weights, biases, targets)
    _validate(x, frequencies, phases, weights, biases, activation, targets)
    frequencies = frequencies.to(device=x.device, dtype=x.dtype).contiguous()
    phases = phases.to(device=x.device, dtype=x.dtype).contiguous()
    requested, backend = backend, resolve_backend(backend, x.device, x.dtype, weights)
    with no_autocast:
        if backend == "reference" or _dispatch.under_functorch(x, targets, *weights, *biases):
            if backend == "reference" and not (torch.compiler.is_compiling()
                                               or _dispatch.under_functorch(*weights, *biases)):
                check_finite_params(weights, biases, frequencies, phases)  # as in the op's kernels
            loss, dw, db = reference.fourier_mlp_train_step(x, targets, frequencies, phases, list(weights),
                                                            list(biases), activation)
            if not _traced(x, targets, *weights, *biases):  # the ops' overflow rule, on the reference too
                loss, *g = step_outputs(loss, dw, db, x.shape[-2])
                dw, db = g[:len(weights)], g[len(weights):]
            return loss, dw, db
        L = len(weights)
        out = fourier_mlp_train_step_op(x.detach(), targets.detach(), frequencies, phases,
                                        [w.detach() for w in weights], [b.detach() for b in biases], activation,
                                        _dispatch.for_op(requested, backend))
    return out[0], list(out[1:1 + L]), list(out[1 + L:])


def _traced(*tensors) -> bool:
    """Under torch.compile, a torch.func transform or on the meta device: no data-dependent masking
    (the ops apply it)."""
    return (torch.compiler.is_compiling() or _dispatch.under_functorch(*tensors)
            or any(t.device.type == "meta" for t in tensors))


def _prepare(x, frequencies, phases, weights, biases, activation, extra, backend):
    """The public functions' common front: dtype convention, validation, encoding cast, backend (the
    resolved name, and the name to hand the op: `_dispatch.for_op`)."""
    x, weights, biases, *extra, out_dtype, no_autocast = _full_precision(x, weights, biases, *extra)
    _validate(x, frequencies, phases, weights, biases, activation)
    frequencies = frequencies.to(device=x.device, dtype=x.dtype).contiguous()
    phases = phases.to(device=x.device, dtype=x.dtype).contiguous()
    resolved = resolve_backend(backend, x.device, x.dtype, weights)
    return (x, frequencies, phases, list(weights), list(biases), extra, out_dtype, no_autocast, resolved,
            _dispatch.for_op(backend, resolved))


def fourier_mlp_jet(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor, weights, biases,
                    activation: str = "relu", backend: str = "auto"):
    """The outputs f and their input gradients g = grad_x f of B Fourier-PE + MLP models (one output,
    K = 1) in one fused pass, differentiable: a loss on g (eikonal, normals) backpropagates through the
    fused double backward to the weights, biases and x.

    Args: as `fourier_mlp` (the model must have one output).

    Returns:
        (f [B, N], g [B, N, D]) in x's dtype (bfloat16/float16 are computed in float32). With shared
        points x [N, D], g[b] is model b's gradient. Equal to `torch.autograd.grad(f.sum(), x,
        create_graph=True)` of `fourier_mlp` with per-model points, which also reaches this op.
    """
    x, frequencies, phases, weights, biases, _, out_dtype, no_autocast, backend, op_backend = _prepare(
        x, frequencies, phases, weights, biases, activation, (), backend)
    validate_jet(x, frequencies, phases, weights, biases, activation)
    with no_autocast:
        if (backend == "reference" or frequencies.requires_grad or phases.requires_grad
                or _dispatch.under_functorch(x, frequencies, phases, *weights, *biases)):
            f, g = reference.fourier_mlp_jet(x, frequencies, phases, weights, biases, activation)
            if not _traced(x, *weights, *biases) and not torch.is_grad_enabled():
                f, g = nan_past_overflow(overflowed(f, g), [f, g])  # (not in place of a differentiable result)
        else:
            f, g = fourier_mlp_jet_op(x, frequencies, phases, weights, biases, activation, op_backend)
    return (f, g) if out_dtype is None else (f.to(out_dtype), g.to(out_dtype))


def fourier_mlp_eikonal_step(x: torch.Tensor, targets: torch.Tensor, frequencies: torch.Tensor,
                             phases: torch.Tensor, weights, biases, activation: str = "relu", eikonal: float = 0.1,
                             normals: torch.Tensor | None = None, normal: float = 0.0, backend: str = "auto"):
    """Fused forward + loss + double backward of second-order SDF training for B models in one pass
    (no autograd graph): per model

        loss = mean (f - targets)^2 + eikonal * mean (|grad_x f| - 1)^2 + normal * mean |grad_x f - normals|^2

    over the N points (the eikonal term as in IGR, SIREN and NeuS; the normal term where the shape
    gives its normals, e.g. the gradient of an exact SDF).

    Args:
        x: [B, N, D] (or [N, D] shared); targets [B, N]; normals [B, N, D] (needed when normal > 0);
            eikonal, normal: the terms' weights (finite, >= 0); the rest as in `fourier_mlp` (one output).

    Returns:
        (loss [B], terms [B, 3], dW list, db list): terms are the unweighted (MSE, eikonal, normal)
        means; the gradients are those of loss.sum() shaped like weights/biases, for
        `p.grad = g` before an optimizer step.
    """
    extra = (targets,) if normals is None else (targets, normals)
    x, frequencies, phases, weights, biases, extra, _, no_autocast, backend, op_backend = _prepare(
        x, frequencies, phases, weights, biases, activation, extra, backend)
    targets, normals = extra[0], (extra[1] if len(extra) > 1 else None)
    validate_jet(x, frequencies, phases, weights, biases, activation, targets=targets, normals=normals,
                 eikonal=eikonal, normal=normal)
    with no_autocast:
        if backend == "reference" or _dispatch.under_functorch(x, targets, *weights, *biases):
            terms, dw, db = reference.eikonal_train_step(x, targets, frequencies, phases, weights, biases,
                                                         activation, eikonal, normals, normal)
            if not _traced(x, targets, *weights, *biases):  # the ops' overflow rule, on the reference too
                terms, *g = eikonal_outputs(terms, dw, db, x.shape[-2])
                dw, db = g[:len(weights)], g[len(weights):]
        else:
            L = len(weights)
            out = fourier_mlp_eikonal_step_op(x.detach(), targets.detach(),
                                              None if normals is None else normals.detach(), frequencies,
                                              phases, [w.detach() for w in weights], [b.detach() for b in biases],
                                              activation, float(eikonal), float(normal), op_backend)
            terms, dw, db = out[0], list(out[1:1 + L]), list(out[1 + L:])
    loss = terms[:, 0] + eikonal * terms[:, 1] + normal * terms[:, 2]
    return loss, terms, dw, db
