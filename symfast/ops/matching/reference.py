"""References for the matching ops and for symfast.matching_scores().

  assign, match_gram      SciPy's linear_sum_assignment per problem on costs built in float64
                          PyTorch: the reference kernels of torch.ops.symfast.assign / match_gram
                          (torch.ops.symfast.match_signed_lifts' reference is match_gram's on the
                          lifted rows' Gram matrices, see _op.py)
  matching_scores_reference
                          the straightforward observable: one model and one lift at a time, cost
                          matrices from `scipy.spatial.distance.cdist` (the minimum over the two
                          signs), then `linear_sum_assignment`. Ground truth for the tests and the
                          benchmark baseline.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

__all__ = ["MODES", "assign", "match_gram", "matching_scores_reference"]

MODES = ("perm", "sign", "scale")  # hidden-action families; the kernel's codes: symfast._C.MatchMode


def assign(cost: torch.Tensor) -> torch.Tensor:
    """PyTorch/SciPy reference for torch.ops.symfast.assign.

    Args:
        cost: [P, n, n] float64 CPU, finite.

    Returns:
        [P, n] int64: the column assigned to each row (an optimal assignment).
    """
    c = cost.numpy()
    out = np.empty(c.shape[:2], dtype=np.int64)
    for m in range(c.shape[0]):
        out[m] = linear_sum_assignment(c[m])[1]
    return torch.from_numpy(out)


def match_gram(gram: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor, mode: str) -> list[torch.Tensor]:
    """PyTorch/SciPy reference for torch.ops.symfast.match_gram.

    Args:
        gram: [P, n, n] <a_i, b_j> (float32/float64 CPU); a2, b2: [P, n] float64 |a_i|^2, |b_j|^2.
        mode: "perm", "sign" or "scale" (`MODES`).

    Returns:
        [index [P, n] int64, scale [P, n] float64]: P B has rows scale_i * b_{index_i}.
    """
    safe = torch.where(b2 > 0, b2, torch.ones_like(b2))
    g64 = gram.to(torch.float64)
    if mode == "perm":
        cost = a2[..., :, None] + b2[..., None, :] - 2 * g64
    elif mode == "sign":
        cost = a2[..., :, None] + b2[..., None, :] - 2 * g64.abs()
    else:
        cost = a2[..., :, None] - g64.clamp(min=0).pow(2) / safe[..., None, :]
    index = assign(cost.clamp(min=0).contiguous())
    g = torch.gather(g64, 2, index[..., None])[..., 0]
    bsel = torch.gather(b2, 1, index)
    ok = (g > 0) & (bsel > 0)
    if mode == "perm":
        scale = torch.ones_like(g)
    elif mode == "sign":
        scale = torch.where(g < 0, -torch.ones_like(g), torch.ones_like(g))
    else:  # a non-positive overlap leaves c = 0 optimal; keep 1 so the action stays invertible
        scale = torch.where(ok, g / torch.where(bsel > 0, bsel, torch.ones_like(bsel)), torch.ones_like(g))
    return [index, scale]


def matching_scores_reference(weights_first_layer, lifts, layout: str = "HD", biases=None,
                              mode: str = "sign") -> np.ndarray:
    """Same quantity as `symfast.matching_scores(...).per_model`: [M, G] float64.

    Args:
        weights_first_layer: [M, H, d] ("HD") or [M, d, H] ("DH") numpy array.
        lifts: list of [d, d] arrays (or dict name -> [d, d]).
        biases: optional [M, H]; mode: "sign", "perm" or "scale".
    """
    W = np.asarray(weights_first_layer, dtype=np.float64)
    if layout == "DH":
        W = W.transpose(0, 2, 1)
    mats = list(lifts.values()) if isinstance(lifts, dict) else list(lifts)
    out = np.zeros((W.shape[0], len(mats)))
    for m in range(W.shape[0]):
        B = W[m]
        if biases is not None:
            B_aug = np.concatenate([B, np.asarray(biases, np.float64)[m][:, None]], 1)
        for g, rho in enumerate(mats):
            A = W[m] @ np.asarray(rho, np.float64)
            Bm = B
            if biases is not None:
                A, Bm = np.concatenate([A, B_aug[:, -1:]], 1), B_aug
            if mode == "perm":
                cost = cdist(A, Bm, "sqeuclidean")
            elif mode == "sign":
                cost = np.minimum(cdist(A, Bm, "sqeuclidean"), cdist(A, -Bm, "sqeuclidean"))
            else:
                cost = np.empty((len(A), len(Bm)))
                for i in range(len(A)):
                    for j in range(len(Bm)):
                        bb = Bm[j] @ Bm[j]
                        c = max(A[i] @ Bm[j], 0.0) / bb if bb > 0 else 0.0
                        cost[i, j] = np.sum((A[i] - c * Bm[j]) ** 2)
            r, c = linear_sum_assignment(cost)
            out[m, g] = np.sqrt(max(cost[r, c].sum(), 0.0)) / np.linalg.norm(Bm)
    return out
