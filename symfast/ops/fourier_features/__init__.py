"""Fourier positional features with device dispatch.

CPU float32/float64 -> C++ kernel (`csrc/fourier_features.cpp`); other
devices, or when autograd needs a graph -> the PyTorch reference.
"""
from __future__ import annotations

import torch

from symfast import _ext
from symfast.ops.fourier_features import reference

__all__ = ["fourier_features"]


def fourier_features(
    x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor, backend: str = "auto"
) -> torch.Tensor:
    """Fourier features sin/cos(w_j . x + b_j), interleaved per frequency.

    Args:
        x: [..., 2] coordinates (float32 or float64).
        frequencies: [m, 2]; phases: [m]. Cast to x's dtype and device.
        backend: "auto" (C++ on CPU when no gradient is needed), "cpu" or "reference".

    Returns:
        [..., 2m] features in x's dtype.
    """
    if x.shape[-1] != 2:
        raise ValueError(f"x must be [..., 2], got {list(x.shape)}")
    if frequencies.ndim != 2 or frequencies.shape[1] != 2:
        raise ValueError(f"frequencies must be [m, 2], got {list(frequencies.shape)}")
    if phases.shape != frequencies.shape[:1]:
        raise ValueError(f"phases must be [{frequencies.shape[0]}], got {list(phases.shape)}")
    if backend not in ("auto", "cpu", "reference"):
        raise ValueError(f"backend must be 'auto', 'cpu' or 'reference', got {backend!r}")
    w = frequencies.to(device=x.device, dtype=x.dtype)
    b = phases.to(device=x.device, dtype=x.dtype)
    needs_grad = torch.is_grad_enabled() and x.requires_grad
    use_cpp = (
        backend == "cpu"
        or (backend == "auto" and x.device.type == "cpu" and not needs_grad and _ext.cpp_available())
    ) and x.dtype in (torch.float32, torch.float64)
    if not use_cpp:
        if backend == "cpu":
            raise ValueError(f"backend='cpu' needs float32/float64 CPU input, got {x.dtype} on {x.device}")
        return reference.fourier_features(x, w, b)
    if x.device.type != "cpu":
        raise ValueError(f"backend='cpu' needs a CPU tensor, got device {x.device}")
    C = _ext.require_cpp()
    fn = C.fourier_features_fwd_f32 if x.dtype == torch.float32 else C.fourier_features_fwd_f64
    flat = x.detach().reshape(-1, 2).contiguous()
    out = fn(flat.numpy(), w.contiguous().numpy(), b.contiguous().numpy(), _ext.num_threads())
    return torch.from_numpy(out).reshape(*x.shape[:-1], 2 * w.shape[0])
