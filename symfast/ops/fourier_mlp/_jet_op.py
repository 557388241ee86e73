"""torch.library registration of the second-order fused PE+MLP ops: the model's input gradient
and losses on it (eikonal, normals), fused on the CPU (C++) and on CUDA (Triton).

  symfast::fourier_mlp_jet(x, frequencies, phases, weights, biases, activation, backend) -> [f, g]
      f [B, N] and its input gradient g = grad_x f [B, N, D], in one pass (one output, K = 1)
  symfast::fourier_mlp_jet_backward(cf, cg, x, ..., backend, need_dx) -> [dx, *dW, *db]
      the gradients of sum(cf * f) + sum(cg * g): the double backward of an input-gradient loss
  symfast::fourier_mlp_eikonal_step(x, targets, normals, ..., eikonal, normal, backend) -> [terms, *dW, *db]
      per-model loss terms [B, 3] (MSE, eikonal, normal) and the gradients of
      sum_b (mse + eikonal * eik + normal * nrm), in one pass without an autograd graph
Backends of all three ops: "auto" resolves in the kernel by the family's rule
(`_op.resolve_backend`); "cpu" runs the C++ kernel's jet modes (csrc/fourier_mlp_jet_impl.h),
"triton" the Triton jet kernels (triton_jet.py: one forward kernel, one backward kernel whose
MODE 3 is the eikonal step; a model whose kernel the GPU refuses, too large for its shared memory,
runs the reference with a one-time RuntimeWarning), "reference" the reference (reference.fourier_mlp_jet,
fourier_mlp_jet_vjp, eikonal_cotangents); calls with no points run the reference on every backend.
The jet op's autograd runs the fused jet backward; differentiating that once more (third order)
goes through the reference's autograd.
"""
from __future__ import annotations

import math
import numbers

import torch

from symfast.ops import _checks, _dispatch
from symfast.ops.fourier_mlp import reference
from symfast.ops.fourier_mlp._op import (auto, backward_outputs, check_finite_params, fused_kernels, nan_past_overflow,
                                         validate)


def _triton_jet():
    from symfast.ops.fourier_mlp import triton_jet
    return triton_jet


def validate_jet(x, frequencies, phases, weights, biases, activation, targets=None, cf=None, cg=None,
                 normals=None, eikonal=0.0, normal=0.0):
    """`validate` plus what the second-order ops need (one output; cg and normals [B, N, D]; the loss
    weights finite and >= 0, normals given when their weight is > 0); returns (B, N)."""
    B, N = validate(x, frequencies, phases, weights, biases, activation, targets=targets, grad=cf)
    if weights[-1].shape[2] != 1:
        raise ValueError(f"the input-gradient ops take one output (out_features = 1), got {weights[-1].shape[2]}")
    D = x.shape[-1]
    for name, t in (("cg (the gradient of g)", cg), ("normals", normals)):
        if t is None:
            continue
        if not isinstance(t, torch.Tensor) or t.shape != (B, N, D):
            raise ValueError(f"{name} must be [B={B}, N={N}, D={D}], got {list(getattr(t, 'shape', [type(t)]))}")
        if t.dtype != x.dtype or t.device != x.device:
            raise ValueError(f"{name} must be {x.dtype} on {x.device} like x, got {t.dtype} on {t.device}")
    for name, v in (("eikonal", eikonal), ("normal", normal)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
            raise ValueError(f"the {name} weight must be a finite number >= 0, got {v!r}")
    if normal > 0 and normals is None:
        raise ValueError("a normal weight > 0 needs normals [B, N, D]")
    return B, N


def overflowed(f: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """[B] bool: the models whose outputs f [B, N] or input gradients g [B, N, D] are not all finite."""
    return ~(torch.isfinite(f).flatten(1).all(1) & torch.isfinite(g).flatten(1).all(1))


# ---- fourier_mlp_jet ----

def _jet_check(x, frequencies, phases, weights, biases, activation, backend):
    validate_jet(x, frequencies, phases, weights, biases, activation)
    check_finite_params(weights, biases, frequencies, phases)
    return x, weights


def _jet_fused(impl, x, frequencies, phases, weights, biases, activation, backend):
    f, g = impl.fourier_mlp_jet(x, frequencies, phases, weights, biases, activation)
    return nan_past_overflow(overflowed(f, g), [f, g])


def _jet_reference(x, frequencies, phases, weights, biases, activation, backend):
    _jet_check(x, frequencies, phases, weights, biases, activation, backend)
    # reference.fourier_mlp_jet takes the kernels' arguments
    return _jet_fused(reference, x, frequencies, phases, weights, biases, activation, backend)


@torch.library.custom_op("symfast::fourier_mlp_jet", mutates_args=())
def fourier_mlp_jet_op(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                       weights: list[torch.Tensor], biases: list[torch.Tensor], activation: str,
                       backend: str) -> list[torch.Tensor]:
    return _jet_reference(x, frequencies, phases, weights, biases, activation, backend)


_dispatch.register_kernels(fourier_mlp_jet_op, _jet_reference, fused_kernels(
    "fourier_mlp_jet", _jet_check, _jet_reference, _jet_fused, lambda x, *_: [(x, "x")], _triton_jet), auto)


@fourier_mlp_jet_op.register_fake
def _(x, frequencies, phases, weights, biases, activation, backend):
    _checks.backend("fourier_mlp_jet", backend)
    B, N = validate_jet(x, frequencies, phases, weights, biases, activation)
    return [x.new_empty(B, N), x.new_empty(B, N, x.shape[-1])]


# ---- fourier_mlp_jet_backward ----

def _jet_bwd_check(cf, cg, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    validate_jet(x, frequencies, phases, weights, biases, activation, cf=cf, cg=cg)
    check_finite_params(weights, biases, frequencies, phases)
    return x, weights


def _jet_bwd_reference(cf, cg, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    _jet_bwd_check(cf, cg, x, frequencies, phases, weights, biases, activation, backend, need_dx)
    f, g = reference.fourier_mlp_jet(x, frequencies, phases, weights, biases, activation)
    out = backward_outputs(x, *reference.fourier_mlp_jet_vjp(cf, cg, x, frequencies, phases, weights, biases,
                                                             activation, need_dx))
    return nan_past_overflow(overflowed(f, g), out)


def _jet_bwd_fused(impl, cf, cg, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    dx, dw, db, f, g = impl.fourier_mlp_jet_bwd(cf.contiguous(), cg.contiguous(), x, frequencies, phases, weights,
                                                biases, activation, need_dx)
    return nan_past_overflow(overflowed(f, g), backward_outputs(x, dx, dw, db))


@torch.library.custom_op("symfast::fourier_mlp_jet_backward", mutates_args=())
def fourier_mlp_jet_backward_op(cf: torch.Tensor, cg: torch.Tensor, x: torch.Tensor, frequencies: torch.Tensor,
                                phases: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor],
                                activation: str, backend: str, need_dx: bool) -> list[torch.Tensor]:
    return _jet_bwd_reference(cf, cg, x, frequencies, phases, weights, biases, activation, backend, need_dx)


_dispatch.register_kernels(fourier_mlp_jet_backward_op, _jet_bwd_reference, fused_kernels(
    "fourier_mlp_jet_backward", _jet_bwd_check, _jet_bwd_reference, _jet_bwd_fused,
    lambda cf, cg, x, *_: [(x, "x"), (cf, "the gradient of f"), (cg, "the gradient of g")], _triton_jet), auto)


@fourier_mlp_jet_backward_op.register_fake
def _(cf, cg, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    _checks.backend("fourier_mlp_jet_backward", backend)
    validate_jet(x, frequencies, phases, weights, biases, activation, cf=cf, cg=cg)
    dx = torch.empty_like(x) if need_dx else x.new_empty(0)
    return [dx, *[torch.empty_like(w) for w in weights], *[torch.empty_like(b) for b in biases]]


# ---- autograd of the jet: the fused jet backward; a third derivative through the reference ----

def _jet_setup_context(ctx, inputs, output):
    x, frequencies, phases, weights, biases, activation, backend = inputs
    ctx.save_for_backward(x, frequencies, phases, *weights, *biases)
    ctx.n_layers, ctx.activation, ctx.backend = len(weights), activation, backend


def _jet_backward(ctx, grads):
    x, frequencies, phases, *wb = ctx.saved_tensors
    L = ctx.n_layers
    weights, biases = wb[:L], wb[L:]
    cf, cg = grads
    need_dx = bool(ctx.needs_input_grad[0])
    if torch.is_grad_enabled():  # create_graph=True: differentiable gradients from the reference
        cands = [x, *weights, *biases]
        want = [i for i, t in enumerate(cands) if t.requires_grad and (i > 0 or need_dx)]
        f, g = reference.fourier_mlp_jet(x, frequencies, phases, list(weights), list(biases), ctx.activation)
        gs = torch.autograd.grad((f, g), [cands[i] for i in want], (cf, cg), create_graph=True, allow_unused=True)
        full = [None] * len(cands)
        for i, gr in zip(want, gs):
            full[i] = torch.zeros_like(cands[i]) if gr is None else gr
        return full[0], None, None, full[1:1 + L], full[1 + L:], None, None
    out = torch.ops.symfast.fourier_mlp_jet_backward(cf, cg, x, frequencies, phases, list(weights), list(biases),
                                                     ctx.activation, ctx.backend, need_dx)
    return (out[0] if need_dx else None), None, None, list(out[1:1 + L]), list(out[1 + L:]), None, None


fourier_mlp_jet_op.register_autograd(_jet_backward, setup_context=_jet_setup_context)


def _no_fourth_order(ctx, grads):
    raise RuntimeError("internal: symfast::fourier_mlp_jet_backward is not differentiable; a third derivative "
                       "goes through the reference (create_graph=True)")


fourier_mlp_jet_backward_op.register_autograd(_no_fourth_order)


# ---- fourier_mlp_eikonal_step ----

def eikonal_outputs(terms, dw, db, n_points: int) -> list:
    """[terms, *dW, *db] with the overflow rule applied (a model with a non-finite loss term: all NaN;
    with no points the terms are NaN by definition and the gradients stay zero)."""
    bad = ~torch.isfinite(terms).all(1) if n_points else torch.zeros(len(terms), dtype=torch.bool,
                                                                      device=terms.device)
    return nan_past_overflow(bad, [terms, *dw, *db])


def _eik_check(x, targets, normals, frequencies, phases, weights, biases, activation, eikonal, normal, backend):
    validate_jet(x, frequencies, phases, weights, biases, activation, targets=targets, normals=normals,
                 eikonal=eikonal, normal=normal)
    check_finite_params(weights, biases, frequencies, phases)
    return x, weights


def _eik_reference(x, targets, normals, frequencies, phases, weights, biases, activation, eikonal, normal, backend):
    _eik_check(x, targets, normals, frequencies, phases, weights, biases, activation, eikonal, normal, backend)
    # The hand-written jet backward, not autograd: autograd does not record inside an op's kernel.
    f, g = reference.fourier_mlp_jet(x, frequencies, phases, weights, biases, activation)
    cf, cg = reference.eikonal_cotangents(f, g, targets, normals, eikonal, normal)
    _, dw, db = reference.fourier_mlp_jet_vjp(cf, cg, x, frequencies, phases, weights, biases, activation, False)
    return eikonal_outputs(reference.eikonal_terms(f, g, targets, normals), dw, db, x.shape[-2])


def _eik_fused(impl, x, targets, normals, frequencies, phases, weights, biases, activation, eikonal, normal, backend):
    return eikonal_outputs(*impl.eikonal_train_step(x, targets, frequencies, phases, weights, biases, activation,
                                                    eikonal, normals, normal), x.shape[-2])


@torch.library.custom_op("symfast::fourier_mlp_eikonal_step", mutates_args=())
def fourier_mlp_eikonal_step_op(x: torch.Tensor, targets: torch.Tensor, normals: torch.Tensor | None,
                                frequencies: torch.Tensor, phases: torch.Tensor, weights: list[torch.Tensor],
                                biases: list[torch.Tensor], activation: str, eikonal: float, normal: float,
                                backend: str) -> list[torch.Tensor]:
    return _eik_reference(x, targets, normals, frequencies, phases, weights, biases, activation, eikonal, normal,
                          backend)


_dispatch.register_kernels(fourier_mlp_eikonal_step_op, _eik_reference, fused_kernels(
    "fourier_mlp_eikonal_step", _eik_check, _eik_reference, _eik_fused,
    lambda x, targets, normals, *_: [(x, "x"), (targets, "targets"), (normals, "normals")], _triton_jet), auto)
_dispatch.not_differentiable(fourier_mlp_eikonal_step_op)


@fourier_mlp_eikonal_step_op.register_fake
def _(x, targets, normals, frequencies, phases, weights, biases, activation, eikonal, normal, backend):
    _checks.backend("fourier_mlp_eikonal_step", backend)
    B, _ = validate_jet(x, frequencies, phases, weights, biases, activation, targets=targets, normals=normals,
                        eikonal=eikonal, normal=normal)
    return [x.new_empty(B, 3), *[torch.empty_like(w) for w in weights], *[torch.empty_like(b) for b in biases]]
