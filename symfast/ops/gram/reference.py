"""PyTorch reference for symfast.ops.gram.gram()."""
from __future__ import annotations

import torch


def gram(weights: torch.Tensor) -> torch.Tensor:
    """First-layer Grams G = W W^T.

    Args:
        weights: [M, d, H] fan-in-first first-layer weights.

    Returns:
        [M, d, d] in weights' dtype.
    """
    return weights @ weights.transpose(1, 2)
