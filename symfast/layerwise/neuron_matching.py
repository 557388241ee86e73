"""Matching a layer's neurons under an activation's latent group (the activations and their groups:
`symfast.activations`).

"real_scale" (a real non-zero scale per neuron) is not a mode of the batched matching kernel;
`match_neurons` here builds it from the kernel's cost matrices and assignment.
"""
from __future__ import annotations

import numpy as np
import torch

from symfast.activations import Activation
from symfast.ops.matching import assign, cost_matrices
from symfast.ops.matching import match_rows as _match_rows_kernel

__all__ = ["MODES", "match_neurons", "post_action", "best_scales"]

MODES = ("perm", "sign", "scale", "real_scale")


def post_action(index: np.ndarray, scale: np.ndarray, act: Activation):
    """Post-activation action of the pre-activation action (z -> scale * z[index]).

    Returns:
        (R [H, H] with R[i, index_i] = phi(scale_i), offset [H]): act(z') = R act(z) + offset.
    """
    H = len(index)
    R = np.zeros((H, H))
    R[np.arange(H), index] = act.phi(np.asarray(scale, dtype=np.float64))
    return R, act.offset(np.asarray(scale, dtype=np.float64))


def best_scales(A: np.ndarray, B: np.ndarray, mode: str) -> np.ndarray:
    """Per row i, the scale c in the mode's set minimising ||A_i - c B_i|| ([H, k] each -> [H])."""
    g = (A * B).sum(1)
    b2 = (B ** 2).sum(1)
    safe = np.where(b2 > 0, b2, 1.0)
    if mode == "sign":
        return np.where(g < 0, -1.0, 1.0)
    if mode == "scale":
        return np.where((g > 0) & (b2 > 0), g / safe, 1.0)
    if mode == "real_scale":
        return np.where((g != 0) & (b2 > 0), g / safe, 1.0)
    if mode == "perm":
        return np.ones(len(A))
    raise ValueError(f"mode must be one of {MODES}, got {mode!r}")


def match_neurons(A: torch.Tensor, B: torch.Tensor, mode: str, backend: str = "auto"):
    """Pair rows of A ([H, k]) with rows of B up to a permutation with scales from `mode`.

    "perm", "sign" and "scale" go to the batched matching kernel; "real_scale" (c any non-zero real:
    cost |a|^2 - <a, b>^2 / |b|^2) is built here from its cost matrices and assignment.
    backend: of the matching kernel ("auto", "cpu", "reference"; see `symfast.ops.matching`).

    Returns:
        (index [H] int64, scale [H], row_residual [H] = ||a_i - c_i b_index_i|| / ||a_i||).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if mode != "real_scale":
        idx, sc, res, _ = _match_rows_kernel(A, B, mode, backend)
        return idx.numpy(), sc.numpy().astype(np.float64), res.numpy().astype(np.float64)
    _, gram, a2, b2 = cost_matrices(A[None], B[None], "perm")
    safe = torch.where(b2 > 0, b2, torch.ones_like(b2))
    cost = (a2[..., :, None] - gram.pow(2) / safe[..., None, :]).clamp(min=0)
    idx = assign(cost.detach().cpu().numpy())[0]
    An, Bn = A.detach().cpu().double().numpy(), B.detach().cpu().double().numpy()
    sc = best_scales(An, Bn[idx], "real_scale")
    diff = np.linalg.norm(An - sc[:, None] * Bn[idx], axis=1)
    an = np.linalg.norm(An, axis=1)
    return idx.astype(np.int64), sc, diff / np.where(an > 0, an, 1.0)
