"""PyTorch reference for symfast.ops.fourier_features()."""
from __future__ import annotations

import torch


def fourier_features(x: torch.Tensor, frequencies: torch.Tensor, phases: torch.Tensor,
                     backend: str = "reference") -> torch.Tensor:
    """Fourier features, interleaved sin/cos per frequency.

    Args:
        x: [..., D] coordinates (D = 2 or 3).
        frequencies: [m, D] frequency vectors w_j (same dtype/device as x).
        phases: [m] phases b_j.
        backend: ignored (the op's signature).

    Returns:
        [..., 2m] with out[..., 2j] = sin(w_j . x + b_j), out[..., 2j+1] = cos(w_j . x + b_j).
    """
    u = x @ frequencies.T + phases
    return torch.stack((torch.sin(u), torch.cos(u)), dim=-1).flatten(-2)
