"""Batched neuron matching: min over signed/scaled permutations P of ||A - P B||.

The core of latent-action recovery and of the layerwise study's "matching" observable
(`symfast.readout.matching.matching_scores`): for each of M problems, rows a_i of A and b_j
of B ([M, H, k]) are paired by a linear assignment on the cost

    perm : ||a_i - b_j||^2                   = |a|^2 + |b|^2 - 2<a, b>
    sign : min_s ||a_i - s b_j||^2, s = +-1  = |a|^2 + |b|^2 - 2|<a, b>|
    scale: min_c ||a_i - c b_j||^2, c > 0    = |a|^2 - max(<a, b>, 0)^2 / |b|^2

All M cost matrices come from one batched matmul (no Python loop over neurons).

Ops (not differentiable: inputs that require grad raise; the public functions pass detached
costs and keep residuals differentiable where they are computed from the rows):
  torch.ops.symfast.assign(cost [P, n, n] f64) -> [P, n] int64
  torch.ops.symfast.match_gram(gram [P, n, n], a2 [P, n], b2 [P, n], mode) -> (index, scale f64)
  torch.ops.symfast.match_signed_lifts(W [M, H, k], src [G, k], sign [G, k], mode)
      -> (index [M, G, H], scale [M, G, H] f64, rel2 [M, G] f64)
Where things live:
  ops           _op.py (torch.library registrations and fakes; `match_gram`, the op on any tensors)
  reference     reference.py: SciPy's linear_sum_assignment per problem (assign, match_gram) and
                the whole observable per model (matching_scores_reference, for tests)
  CPU kernel    csrc/matching.cpp via cpu.py (shortest augmenting paths, OpenMP over problems;
                mode codes from symfast._C.MatchMode, the modes compile-time template parameters)
  lifts         lifts.py: lifts applied to batches of first layers, residuals of a chunk of models
  Triton        none (assignment is sequential per problem)
  tests         tests/ops/test_matching.py, tests/layerwise/test_layerwise.py
  benchmark     benchmarks/benchmarks/bench_matching.py
Backends: "auto", "cpu", "reference" ("cpp"/"scipy" still accepted, deprecated).
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from symfast.ops import _dispatch
from symfast.ops.matching import lifts, reference
# the ops, and the kernel-level names the layerwise study builds on (importable here, not in __all__)
from symfast.ops.matching._op import (assign_op, match_gram, match_gram_op, match_signed_lifts_op,  # noqa: F401
                                      resolve_backend)
from symfast.ops.matching.cpu import mode_code  # noqa: F401
from symfast.ops.matching.lifts import signed_permutation  # noqa: F401

__all__ = ["MODES", "cost_matrices", "assign", "match_rows"]

MODES = reference.MODES  # "perm", "sign", "scale"


def cost_matrices(A: torch.Tensor, B: torch.Tensor, mode: str):
    """Batched assignment costs.

    Args:
        A, B: [M, H, k] rows to pair (row i of A with row pi(i) of B).
        mode: "perm", "sign" or "scale".

    Returns:
        (cost [M, H, H] with cost[m, i, j] the squared residual of pairing a_i with b_j,
        gram [M, H, H] = <a_i, b_j>, a2 [M, H] = |a_i|^2, b2 [M, H] = |b_j|^2).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    gram = torch.matmul(A, B.transpose(-1, -2))
    a2 = A.pow(2).sum(-1)
    b2 = B.pow(2).sum(-1)
    if mode == "perm":
        cost = a2[..., :, None] + b2[..., None, :] - 2 * gram
    elif mode == "sign":
        cost = a2[..., :, None] + b2[..., None, :] - 2 * gram.abs()
    else:
        safe = torch.where(b2 > 0, b2, torch.ones_like(b2))
        cost = a2[..., :, None] - gram.clamp(min=0).pow(2) / safe[..., None, :]
    return cost.clamp(min=0), gram, a2, b2


def assign(cost, backend: str = "auto") -> np.ndarray:
    """Batched linear sum assignment: [P, n, n] costs -> [P, n] column index per row.

    backend: "cpu" (symfast._C.lsa_batched: shortest augmenting path from a row reduction, OpenMP
    over problems, torch's thread count), "reference" (SciPy's linear_sum_assignment per problem)
    or "auto" (cpu when built). Both return an optimal assignment; with ties they may pick
    different ones.
    """
    be = resolve_backend(backend)
    if isinstance(cost, torch.Tensor):
        _dispatch.refuse_grad("assign", cost=cost)
        cost = cost.detach().cpu().numpy()
    cost = np.ascontiguousarray(cost, dtype=np.float64)
    if cost.ndim != 3 or cost.shape[1] != cost.shape[2]:
        raise ValueError(f"cost must be [P, n, n], got {list(cost.shape)}")
    return assign_op(torch.from_numpy(cost), _dispatch.for_op(backend, be)).numpy()  # the op refuses NaN / Inf costs


def match_rows(A: torch.Tensor, B: torch.Tensor, mode: str, backend: str = "auto"):
    """Pair the rows of A with those of B up to a signed / scaled permutation, for M problems at once.

    Args:
        A, B: [M, H, k] (or [H, k] for one problem).
        mode: "perm", "sign" or "scale" (`MODES`).
        backend: assignment backend (see `assign`).

    Returns:
        (index [M, H] int64, scale [M, H], row_residual [M, H], total [M]):
        P B has rows scale_i * b_{index_i}; row_residual_i = ||a_i - scale_i b_{index_i}|| / ||a_i||
        (0 for a zero row); total = min_P ||A - P B||_F (unnormalised).
    """
    single = A.ndim == 2
    if single:
        A, B = A[None], B[None]
    gram = torch.matmul(A, B.transpose(-1, -2))
    index, scale, ok = match_gram(gram, A.pow(2).sum(-1), B.pow(2).sum(-1), mode, backend)
    a2 = A.pow(2).sum(-1)
    # residuals from the rows themselves (no |a|^2 + |b|^2 - 2<a, b> cancellation): exact zeros stay ~1e-16
    bsel_rows = torch.gather(B, 1, index[..., None].expand(-1, -1, B.shape[-1]))
    diff = A - scale[..., None] * bsel_rows
    row = diff.pow(2).sum(-1)
    if mode == "scale":  # the optimum allows c = 0 for non-overlapping rows; the action keeps c = 1
        total = torch.where(ok, row, a2).sum(-1).sqrt()
    else:
        total = row.sum(-1).sqrt()
    row_res = row.sqrt() / torch.where(a2 > 0, a2, torch.ones_like(a2)).sqrt()
    if single:
        return index[0], scale[0], row_res[0], total[0]
    return index, scale, row_res, total


def lift_residuals(Wm: torch.Tensor, R: torch.Tensor, orthogonal: bool, mode: str, backend: str = "auto"):
    """Squared relative residuals min_P ||W R_g - P W||_F^2 / ||W||_F^2 for a chunk of models and any lifts.

    Args:
        Wm: [M, H, k] first layers (rows = neurons); R: [G, k, k] lifts; orthogonal: every lift is
            orthogonal (then |a_i| = |w_i| is not recomputed); mode: "perm", "sign" or "scale".
        backend: assignment backend (see `assign`).

    Returns:
        (rel2 [M, G], index [M * G, H], scale [M * G, H]). For signed-permutation lifts
        torch.ops.symfast.match_signed_lifts computes the same in one fused call.
    """
    return lifts.lift_residuals(Wm, R, orthogonal, mode, functools.partial(match_gram, backend=backend))
