"""Per-model reference for symfast.matching_scores().

The straightforward version: one model and one lift at a time, cost matrices
from `scipy.spatial.distance.cdist` (the minimum over the two signs), then
`linear_sum_assignment`. Ground truth for the tests and the benchmark baseline.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

__all__ = ["matching_scores_reference"]


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
