"""torch.library registration of the gram op (works under torch.compile).

  symfast::gram(weights [M, d, H], backend) -> [M, d, d]
The default implementation is the reference; "cpu" runs the C++ kernel; "auto" resolves in the
kernel by `resolve_backend`
(`_dispatch.register_kernels`, the rule shared by every op). Both raise on NaN/Inf weights.
Autograd: dW = (g + g^T) W from the saved weights.
"""
from __future__ import annotations

import torch

from symfast.ops import _checks, _dispatch
from symfast.ops.gram import cpu, reference


def validate(weights) -> None:
    """weights: a float32/float64 [M, d, H] tensor (static: the fake implementation runs it too)."""
    _checks.tensor("gram", "weights", weights)
    if weights.ndim != 3:
        raise ValueError(f"gram: weights must be [M, d, H], got {list(weights.shape)}")


def resolve_backend(backend: str, weights) -> str:
    """The backend that runs: "auto" is the C++ kernel for CPU weights when symfast._C is built, else
    the reference (no Triton kernel). The one rule for `gram` and the op's own "auto"."""
    return _dispatch.resolve("gram", backend, weights.device)


def _gram_reference(weights, backend):
    validate(weights)
    if not _checks.all_finite(weights):
        raise ValueError("weights contains NaN or Inf")
    return reference.gram(weights)


def _gram_cpu(weights, backend):
    validate(weights)
    return cpu.gram_fwd(weights)  # the kernel checks NaN/Inf as it reads


@torch.library.custom_op("symfast::gram", mutates_args=())
def gram_op(weights: torch.Tensor, backend: str) -> torch.Tensor:
    """weights: [M, d, H] -> [M, d, d]."""
    return _gram_reference(weights, backend)


_dispatch.register_kernels(gram_op, _gram_reference, {"cpu": _gram_cpu},
                           lambda weights, **_: resolve_backend("auto", weights))


@gram_op.register_fake
def _(weights, backend):
    _checks.backend("gram", backend)
    validate(weights)
    return weights.new_empty(weights.shape[0], weights.shape[1], weights.shape[1])


def _gram_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _gram_backward(ctx, grad):
    (w,) = ctx.saved_tensors
    return (grad + grad.transpose(1, 2)) @ w, None


gram_op.register_autograd(_gram_backward, setup_context=_gram_setup)
