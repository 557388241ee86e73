"""Launcher for the C++ Fourier-feature kernel (`csrc/fourier_features.cpp`)."""
from __future__ import annotations

import torch

from symfast import _ext


def fourier_features(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                     backend: str = "cpu") -> torch.Tensor:
    """x: [..., D], frequencies: [m, D], phases: [m] (float32/float64 CPU, one dtype) -> [..., 2m]."""
    C = _ext.require_cpp()
    fn = C.fourier_features_fwd_f32 if x.dtype == torch.float32 else C.fourier_features_fwd_f64
    flat = x.reshape(-1, x.shape[-1]).contiguous()
    out = fn(flat.numpy(), frequencies.contiguous().numpy(), phases.contiguous().numpy(), _ext.num_threads())
    return torch.from_numpy(out).reshape(*x.shape[:-1], 2 * frequencies.shape[0])
