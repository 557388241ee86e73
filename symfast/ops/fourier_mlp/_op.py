"""torch.library registration of the fused PE+MLP ops (works under torch.compile).

Three custom ops, all taking an already-resolved backend name (see `symfast.ops._dispatch`):
  symfast::fourier_mlp(x, frequencies, phases, weights, biases, activation, backend) -> y [B, N]
  symfast::fourier_mlp_backward(grad, ..., need_dx) -> [dx, *dW, *db]   (dx empty if not needed)
  symfast::fourier_mlp_train_step(x, targets, ...) -> [loss, *dW, *db]
Each op's default implementation is the reference (backward: the chain rule written out in
reference.fourier_mlp_vjp); "cpu" runs the C++ kernel, "triton" the Triton kernels
(`_dispatch.register_kernels`, the rule shared by every op).
The forward op's autograd saves only its inputs and recomputes the forward tile by tile
in the backward kernel (no [B, N, H] activations are kept). Double backward
(create_graph=True, e.g. training on an eikonal loss) is computed by the PyTorch
reference: correct, differentiable, not fused.
"""
from __future__ import annotations

import torch

from symfast.ops import _dispatch
from symfast.ops.fourier_mlp import cpu, reference

_LIB = "symfast"


def _check_finite(x: torch.Tensor, name: str) -> None:
    # The C++ kernel checks x and targets/gradients as it reads them; the Triton kernels do not.
    if not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} contains NaN or Inf values; the fused kernel needs finite inputs")


def check_finite_params(weights, biases) -> None:
    """ValueError naming the first weight or bias tensor with NaN or Inf values. Every backend calls it
    (with an Inf weight the kernels differ only in where 0 * Inf makes NaN; neither is meaningful)."""
    for kind, params in (("weights", weights), ("biases", biases)):
        for i, p in enumerate(params):
            if not bool(torch.isfinite(p).all()):
                raise ValueError(f"{kind}[{i}] contains NaN or Inf values")


def _triton():
    from symfast.ops.fourier_mlp import triton as tri
    return tri


# Each op's kernels, one signature per op: the default implementation (any device) is the
# reference; `_dispatch.register_kernels` routes "cpu" / "triton" to the CPU and CUDA kernels.

def _fwd_reference(x, frequencies, phases, weights, biases, activation, backend):
    check_finite_params(weights, biases)
    return reference.fourier_mlp(x, frequencies, phases, weights, biases, activation)


def _fwd_cpu(x, frequencies, phases, weights, biases, activation, backend):
    check_finite_params(weights, biases)
    return cpu.fourier_mlp_fwd(x, frequencies, phases, weights, biases, activation)


def _fwd_triton(x, frequencies, phases, weights, biases, activation, backend):
    check_finite_params(weights, biases)
    _check_finite(x, "x")
    return _triton().fourier_mlp_fwd(x, frequencies, phases, weights, biases, activation)


@torch.library.custom_op(f"{_LIB}::fourier_mlp", mutates_args=())
def fourier_mlp_op(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                   weights: list[torch.Tensor], biases: list[torch.Tensor], activation: str,
                   backend: str) -> torch.Tensor:
    return _fwd_reference(x, frequencies, phases, weights, biases, activation, backend)


_dispatch.register_kernels(fourier_mlp_op, _fwd_reference, {"cpu": _fwd_cpu, "triton": _fwd_triton})


@fourier_mlp_op.register_fake
def _(x, frequencies, phases, weights, biases, activation, backend):
    return x.new_empty(weights[0].shape[0], x.shape[-2])


def _bwd_outputs(x, dx, dw, db):
    if dx is None:
        dx = x.new_empty(0)
    elif x.ndim == 2:  # x shared by all models: sum the per-model gradients in model order
        dx = dx.sum(0)
    return [dx, *dw, *db]


def _bwd_reference(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    return _bwd_outputs(x, *reference.fourier_mlp_vjp(grad, x, frequencies, phases, weights, biases,
                                                      activation, need_dx))


def _bwd_cpu(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    return _bwd_outputs(x, *cpu.fourier_mlp_bwd(grad.contiguous(), x, frequencies, phases, weights, biases,
                                                activation, need_dx))


def _bwd_triton(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    _check_finite(grad, "the incoming gradient")
    return _bwd_outputs(x, *_triton().fourier_mlp_bwd(grad.contiguous(), x, frequencies, phases, weights,
                                                      biases, activation, need_dx))


@torch.library.custom_op(f"{_LIB}::fourier_mlp_backward", mutates_args=())
def fourier_mlp_backward_op(grad: torch.Tensor, x: torch.Tensor, frequencies: torch.Tensor,
                            phases: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor],
                            activation: str, backend: str, need_dx: bool) -> list[torch.Tensor]:
    return _bwd_reference(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx)


_dispatch.register_kernels(fourier_mlp_backward_op, _bwd_reference, {"cpu": _bwd_cpu, "triton": _bwd_triton})


@fourier_mlp_backward_op.register_fake
def _(grad, x, frequencies, phases, weights, biases, activation, backend, need_dx):
    dx = torch.empty_like(x) if need_dx else x.new_empty(0)
    return [dx, *[torch.empty_like(w) for w in weights], *[torch.empty_like(b) for b in biases]]


def _no_double_backward(ctx, grads):
    raise RuntimeError("internal: symfast::fourier_mlp_backward is not differentiable; double backward "
                       "goes through the reference (create_graph=True)")


fourier_mlp_backward_op.register_autograd(_no_double_backward)


def _setup_context(ctx, inputs, output):
    x, frequencies, phases, weights, biases, activation, backend = inputs
    ctx.save_for_backward(x, frequencies, phases, *weights, *biases)
    ctx.n_layers = len(weights)
    ctx.activation = activation
    ctx.backend = backend


def _backward(ctx, grad):
    x, frequencies, phases, *wb = ctx.saved_tensors
    L = ctx.n_layers
    weights, biases = wb[:L], wb[L:]
    need_dx = bool(ctx.needs_input_grad[0])
    if torch.is_grad_enabled():  # create_graph=True: differentiable gradients from the reference
        cands = [x, *weights, *biases]
        want = [i for i, t in enumerate(cands) if t.requires_grad and (i > 0 or need_dx)]
        y = reference.fourier_mlp(x, frequencies, phases, list(weights), list(biases), ctx.activation)
        gs = torch.autograd.grad(y, [cands[i] for i in want], grad, create_graph=True, allow_unused=True)
        full = [None] * len(cands)
        for i, g in zip(want, gs):
            full[i] = torch.zeros_like(cands[i]) if g is None else g
        return full[0], None, None, full[1:1 + L], full[1 + L:], None, None
    out = torch.ops.symfast.fourier_mlp_backward(grad, x, frequencies, phases, list(weights), list(biases),
                                                 ctx.activation, ctx.backend, need_dx)
    return (out[0] if need_dx else None), None, None, list(out[1:1 + L]), list(out[1 + L:]), None, None


fourier_mlp_op.register_autograd(_backward, setup_context=_setup_context)


def _step_reference(x, targets, frequencies, phases, weights, biases, activation, backend):
    check_finite_params(weights, biases)
    # The hand-written backward, not autograd: autograd does not record inside an op's kernel.
    y = reference.fourier_mlp(x, frequencies, phases, weights, biases, activation)
    _, dw, db = reference.fourier_mlp_vjp(2 * (y - targets) / y.shape[1], x, frequencies, phases, weights,
                                          biases, activation, need_dx=False)
    return [reference.mse_loss(y, targets), *dw, *db]


def _step_cpu(x, targets, frequencies, phases, weights, biases, activation, backend):
    check_finite_params(weights, biases)
    loss, dw, db = cpu.fourier_mlp_train_step(x, targets, frequencies, phases, weights, biases, activation)
    return [loss, *dw, *db]


def _step_triton(x, targets, frequencies, phases, weights, biases, activation, backend):
    check_finite_params(weights, biases)
    _check_finite(x, "x")
    _check_finite(targets, "targets")
    loss, dw, db = _triton().fourier_mlp_train_step(x, targets, frequencies, phases, weights, biases, activation)
    return [loss, *dw, *db]


@torch.library.custom_op(f"{_LIB}::fourier_mlp_train_step", mutates_args=())
def fourier_mlp_train_step_op(x: torch.Tensor, targets: torch.Tensor, frequencies: torch.Tensor,
                              phases: torch.Tensor, weights: list[torch.Tensor], biases: list[torch.Tensor],
                              activation: str, backend: str) -> list[torch.Tensor]:
    return _step_reference(x, targets, frequencies, phases, weights, biases, activation, backend)


_dispatch.register_kernels(fourier_mlp_train_step_op, _step_reference, {"cpu": _step_cpu, "triton": _step_triton})


@fourier_mlp_train_step_op.register_fake
def _(x, targets, frequencies, phases, weights, biases, activation, backend):
    loss = x.new_empty(weights[0].shape[0])
    return [loss, *[torch.empty_like(w) for w in weights], *[torch.empty_like(b) for b in biases]]
