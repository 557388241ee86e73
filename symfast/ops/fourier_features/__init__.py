"""Fourier positional features: `torch.ops.symfast.fourier_features` and its public function.

Points have input dimension D = 2 or 3 (x [..., D], frequencies [m, D]; `INPUT_DIMS`).

Where things live:
  reference     symfast/ops/fourier_features/reference.py (PyTorch, the ground truth)
  CPU kernel    csrc/fourier_features.cpp via cpu.py (float32: vectorised polynomial sin/cos,
                libm beyond |u| = 8000; float64: libm)
  Triton        none (on CUDA the reference's two elementwise kernels are already memory-bound)
  tests         tests/ops/test_fourier_features.py; benchmark benchmarks/benchmarks/bench_fourier_features.py
Gradients to x, frequencies and phases come from the saved output (d sin u = cos u du).
"""
from __future__ import annotations

import torch

from symfast.ops import _checks, _dispatch
from symfast.ops.fourier_features import cpu, reference

__all__ = ["fourier_features", "INPUT_DIMS", "HALF_DTYPES", "input_dim"]

INPUT_DIMS = (2, 3)  # coordinate dimensions D the Fourier-feature ops (and fourier_mlp) accept
HALF_DTYPES = (torch.float16, torch.bfloat16)  # computed in float32 by `fourier_features`


def input_dim(x: torch.Tensor, frequencies: torch.Tensor, x_form: str = "[..., D]") -> int:
    """D of frequencies [m, D] (D in INPUT_DIMS), checked against x's last dimension.

    Args:
        x: the points; its shape must be `x_form` with D substituted.
        frequencies: [m, D].
        x_form: the expected form of x for the message, e.g. "[B, N, D] or [N, D]".

    Raises:
        ValueError: naming both shapes, when D is unsupported or x and frequencies disagree.
    """
    if frequencies.ndim != 2 or frequencies.shape[1] not in INPUT_DIMS:
        raise ValueError(f"frequencies must be [m, D] with D in {list(INPUT_DIMS)}, got {list(frequencies.shape)} "
                         f"(x is {list(x.shape)})")
    D = frequencies.shape[1]
    if x.ndim < 1 or x.shape[-1] != D:
        raise ValueError(f"x must be {x_form.replace('D', str(D))} to match frequencies {list(frequencies.shape)} "
                         f"(same input dimension D), got x {list(x.shape)}")
    return D


def validate(x, frequencies, phases) -> None:
    """Static checks of one op call (fake tensors too): x [..., D], frequencies [m, D], phases [m],
    one float dtype and one device (never a mix of meta and real tensors)."""
    op = "fourier_features"
    for name, t in (("x", x), ("frequencies", frequencies), ("phases", phases)):
        _checks.tensor(op, name, t, (torch.float16, torch.bfloat16, *_checks.FLOATS))
    input_dim(x, frequencies)
    if phases.shape != frequencies.shape[:1]:
        raise ValueError(f"phases must be [{frequencies.shape[0]}] (one per frequency), got {list(phases.shape)}")
    named = (("x", x), ("frequencies", frequencies), ("phases", phases))
    _checks.same_dtype(op, named, "x")
    _checks.same_device(op, named)


def resolve_backend(backend: str, x) -> str:
    """The backend that runs on x ("auto": C++ for float32/float64 CPU tensors, else the reference;
    an explicit "cpu" on other dtypes raises): the one rule for `fourier_features` and the op's "auto"."""
    be = _dispatch.resolve("fourier_features", backend, x.device)
    if be == "cpu" and x.dtype not in (torch.float32, torch.float64):
        if backend != "auto":
            raise ValueError(f"backend='cpu' needs float32/float64 input, got {x.dtype}")
        be = "reference"
    return be


def _reference(x, frequencies, phases, backend):
    validate(x, frequencies, phases)
    return reference.fourier_features(x, frequencies, phases)


def _cpu(x, frequencies, phases, backend):
    validate(x, frequencies, phases)
    _checks.tensor("fourier_features (C++ kernel)", "x", x)
    return cpu.fourier_features(x, frequencies, phases)


@torch.library.custom_op("symfast::fourier_features", mutates_args=())
def fourier_features_op(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                        backend: str) -> torch.Tensor:
    """x: [..., D], frequencies: [m, D], phases: [m] (one dtype and device) -> [..., 2m]."""
    return _reference(x, frequencies, phases, backend)


_dispatch.register_kernels(fourier_features_op, _reference, {"cpu": _cpu}, lambda x, **_: resolve_backend("auto", x))


@fourier_features_op.register_fake
def _(x, frequencies, phases, backend):
    _checks.backend("fourier_features", backend)
    validate(x, frequencies, phases)
    return x.new_empty(*x.shape[:-1], 2 * frequencies.shape[0])


def _setup_context(ctx, inputs, output):
    x, frequencies, _, _ = inputs
    ctx.save_for_backward(x, frequencies, output)


def _backward(ctx, grad):
    x, w, out = ctx.saved_tensors
    # out = [sin u, cos u] interleaved: d/du = g_sin cos u - g_cos sin u
    du = grad[..., 0::2] * out[..., 1::2] - grad[..., 1::2] * out[..., 0::2]
    need_x, need_w, need_b, _ = ctx.needs_input_grad
    m = w.shape[0]
    dx = du @ w if need_x else None
    dw = du.reshape(-1, m).T @ x.reshape(-1, w.shape[1]) if need_w else None
    db = du.reshape(-1, m).sum(0) if need_b else None
    return dx, dw, db, None


fourier_features_op.register_autograd(_backward, setup_context=_setup_context)


def _check_real(t, name: str) -> None:
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.is_complex() or not t.is_floating_point():
        raise ValueError(f"{name} must be a real floating-point tensor, got {t.dtype}")


def fourier_features(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                     backend: str = "auto") -> torch.Tensor:
    """Fourier features sin/cos(w_j . x + b_j), interleaved per frequency.

    Differentiable in x, frequencies and phases on every backend; works under torch.compile
    (fullgraph) and torch.func transforms (those run the reference: plain PyTorch, about
    the speed of `backend="reference"`).

    Args:
        x: [..., D] coordinates, real floating point, D = 2 or 3.
        frequencies: [m, D] (same D); phases: [m]. Cast to x's dtype and device.
        backend: "auto" (C++ for float32/float64 CPU tensors, else the reference), "cpu" or
            "reference" (see `symfast.ops._dispatch`).

    Returns:
        [..., 2m] features in x's dtype. float16/bfloat16 points are encoded in float32 and the
        features rounded to x's dtype at the end (as `FourierPE` does).
    """
    for name, t in (("x", x), ("frequencies", frequencies), ("phases", phases)):
        _check_real(t, name)
    input_dim(x, frequencies)
    if phases.shape != frequencies.shape[:1]:
        raise ValueError(f"phases must be [{frequencies.shape[0]}], got {list(phases.shape)}")
    if x.dtype in HALF_DTYPES:  # w.x rounded to 3 significant digits would put sin/cos off by up to 2
        return fourier_features(x.float(), frequencies, phases, backend).to(x.dtype)
    w = frequencies.to(device=x.device, dtype=x.dtype)
    b = phases.to(device=x.device, dtype=x.dtype)
    be = resolve_backend(backend, x)
    if be == "reference" or _dispatch.under_functorch(x, w, b):
        return reference.fourier_features(x, w, b)
    return fourier_features_op(x, w, b, _dispatch.for_op(backend, be))
