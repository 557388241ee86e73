"""CPU launcher for `gram`: the C++ kernel in csrc/gram.cpp (`gram_fwd_f32` / `gram_fwd_f64`)."""
from __future__ import annotations

import torch

from symfast import _ext


def gram_fwd(weights: torch.Tensor, isa: str = "auto") -> torch.Tensor:
    """weights: [M, d, H] float32/float64 CPU -> [M, d, d] (exactly symmetric, float64 sums).

    isa: "auto" (the widest this CPU runs) or "generic", "avx2", "avx512" to force an instance.
    """
    C = _ext.require_cpp()
    fn = C.gram_fwd_f32 if weights.dtype == torch.float32 else C.gram_fwd_f64
    return torch.from_numpy(fn(weights.detach().contiguous().numpy(), _ext.num_threads(), isa))
