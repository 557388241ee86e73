"""PyTorch reference for symfast.ops.gram.gram()."""
from __future__ import annotations

import torch


def gram(weights: torch.Tensor) -> torch.Tensor:
    """First-layer Grams G = W W^T.

    Args:
        weights: [M, d, H] fan-in-first first-layer weights.

    Returns:
        [M, d, d] in weights' dtype (float32 weights: summed in float64, then rounded).
    """
    if weights.dtype == torch.float32:  # summed in float64, as the C++ kernel: an overflow rounds to +-Inf, not NaN
        w = weights.double()
        return (w @ w.transpose(1, 2)).to(weights.dtype)
    return weights @ weights.transpose(1, 2)
