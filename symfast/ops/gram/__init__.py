"""First-layer Grams G = W W^T for many models at once.

    gram(weights [M, d, H]) -> G = W W^T: [M, d, d]                    torch.ops.symfast.gram

Where things live:
  ops           _op.py: torch.ops.symfast.gram (reference by default, "cpu" runs the C++ kernel;
                gradient dW = (g + g^T) W on every backend)
  reference     symfast/ops/gram/reference.py (one batched matmul)
  CPU kernel    csrc/gram.cpp via cpu.py: dot products of W's rows in register tiles (upper
                triangle, mirrored), float64 sums in one fixed order, one instance per ISA
                (AVX-512, AVX2 + FMA, generic) picked at run time
  Triton        none (on CUDA the reference is one cuBLAS batched GEMM)
  tests         tests/ops/test_gram.py
  benchmark     benchmarks/benchmarks/bench_gram_scores.py (the gram cases)
The Grams are the observables that `symfast.ops.gram_scores` scores.
"""
from __future__ import annotations

import torch

from symfast.ops import _dispatch
from symfast.ops.gram import reference
from symfast.ops.gram._op import gram_op, resolve_backend

__all__ = ["gram", "gram_op"]


def gram(weights: torch.Tensor, backend: str = "auto") -> torch.Tensor:
    """First-layer Grams G = W W^T for a batch of models (differentiable on every backend).

    Args:
        weights: [M, d, H] fan-in-first first-layer weights (as `Ensemble.weights[0]`), float32/float64.
        backend: "auto" (C++ on CPU, torch's batched GEMM elsewhere), "cpu" or "reference";
            "triton" raises (no Triton kernel).

    Returns:
        [M, d, d] in weights' dtype. The "cpu" result is exactly symmetric, summed in float64 for
        both dtypes in an order that does not depend on the thread count.

    Raises:
        ValueError: weights contain NaN or Inf (every backend). Finite weights whose Gram overflows
            the dtype give Inf entries, as the reference's product does.
    """
    if not isinstance(weights, torch.Tensor):
        raise ValueError(f"weights must be a torch.Tensor [M, d, H], got {type(weights).__name__}")
    be = resolve_backend(backend, weights)
    if weights.ndim != 3:
        raise ValueError(f"weights must be [M, d, H], got {list(weights.shape)}")
    if weights.dtype not in (torch.float32, torch.float64):
        raise ValueError(f"weights must be float32 or float64, got {weights.dtype}")
    if _dispatch.under_functorch(weights):
        return reference.gram(weights)
    # NaN/Inf raise in every kernel (the C++ one checks as it reads)
    return gram_op(weights, _dispatch.for_op(backend, be))
