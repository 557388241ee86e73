"""Batched ordered real Schur decomposition and multi-cluster reordering.

CPU float64 C++ kernel (`csrc/schur.cpp`, SciPy's bundled LAPACK dgees/dtrexc
reached through its PyCapsules, OpenMP over the batch); the SciPy reference
loop (`reference.py`) with backend="reference".
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symfast import _ext
from symfast.ops.ordered_schur import reference

__all__ = ["ordered_schur", "ordschur", "OrderedSchur"]

# A factorisation whose relative reconstruction error or orthogonality error
# exceeds this is never returned silently (LAPACK gives ~1e-15 * n).
CHECK_TOL = 1e-9


@dataclass
class OrderedSchur:
    """W = Q T Q^T with ordered 1x1 / 2x2 blocks (float64; torch or numpy like the input).

    Attributes:
        Q: [..., n, n] orthogonal. T: [..., n, n] quasi-upper-triangular, 2x2 blocks in
            standard form [[a, b], [c, a]] with b c < 0.
        eigvals: [..., n] complex, read off T's blocks (a conjugate pair: +imag first).
        block_start, block_size: [..., n] int64: start row and size (1 or 2) of the block
            holding each row.
        n_R: [...] size of the leading sector |lambda| >= sector_alpha * rho (the sector
            that was ordered first); sector_alpha <= 0 gives n.
        recon_err: [...] ||Q T Q^T - W||_F / ||W||_F; orth_err: [...] ||Q^T Q - I||_F.
        failed_swaps: [...] dtrexc swaps rejected inside a sector (order there is then
            only approximately non-increasing); sector_failures: [...] rejected swaps
            across the sector cut (should be 0).
    """

    Q: object
    T: object
    eigvals: object
    block_start: object
    block_size: object
    n_R: object
    recon_err: object
    orth_err: object
    failed_swaps: object
    sector_failures: object

    def blocks(self, index=()) -> list[tuple[int, int]]:
        """(start, size) of each diagonal block of matrix `index` of the batch."""
        st = np.asarray(self.block_start)[index]
        sz = np.asarray(self.block_size)[index]
        return [(int(i), int(sz[i])) for i in range(len(st)) if st[i] == i]


def _as_batch(W, name: str) -> tuple[np.ndarray, tuple, bool]:
    is_torch = isinstance(W, torch.Tensor)
    if is_torch:
        if W.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"{name} must be float32 or float64, got {W.dtype}")
        arr = W.detach().cpu().double().numpy()
    else:
        arr = np.asarray(W)
        if arr.dtype not in (np.float32, np.float64):
            raise ValueError(f"{name} must be float32 or float64, got {arr.dtype}")
        arr = arr.astype(np.float64)
    if arr.ndim < 2 or arr.shape[-1] != arr.shape[-2]:
        raise ValueError(f"{name} must be [..., n, n] (square), got {list(arr.shape)}")
    if arr.shape[-1] == 0:
        raise ValueError(f"{name} must have n >= 1, got {list(arr.shape)}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} contains NaN or Inf")
    lead = arr.shape[:-2]
    return np.ascontiguousarray(arr.reshape(-1, arr.shape[-1], arr.shape[-1])), lead, is_torch


def _structure(T: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    M, n, _ = T.shape
    start = np.zeros((M, n), np.int64)
    size = np.ones((M, n), np.int64)
    sub = np.zeros((M, n), bool)
    if n > 1:
        sub[:, :-1] = np.diagonal(T, offset=-1, axis1=1, axis2=2) != 0
    for m in range(M):
        i = 0
        while i < n:
            if sub[m, i]:
                start[m, i:i + 2] = i
                size[m, i:i + 2] = 2
                i += 2
            else:
                start[m, i] = i
                i += 1
    return start, size


def _check(info: np.ndarray, what: str) -> None:
    bad = ~(info[:, 0] <= CHECK_TOL) | ~(info[:, 1] <= CHECK_TOL)
    if bad.any():
        m = int(np.nonzero(bad)[0][0])
        raise RuntimeError(
            f"{what}: factorisation check failed for {int(bad.sum())} matrices (first: index {m}, "
            f"reconstruction error {info[m, 0]:.2e}, orthogonality error {info[m, 1]:.2e}); "
            "refusing to return a wrong Schur form")


def _wrap(Q, T, ev, info, nR, lead, is_torch):
    n = T.shape[-1]
    start, size = _structure(T)
    out = dict(Q=Q.reshape(*lead, n, n), T=T.reshape(*lead, n, n), eigvals=ev.reshape(*lead, n),
               block_start=start.reshape(*lead, n), block_size=size.reshape(*lead, n),
               n_R=nR.reshape(lead), recon_err=info[:, 0].reshape(lead), orth_err=info[:, 1].reshape(lead),
               failed_swaps=info[:, 2].astype(np.int64).reshape(lead),
               sector_failures=info[:, 3].astype(np.int64).reshape(lead))
    if is_torch:
        out = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}
    return OrderedSchur(**out)


def ordered_schur(W, sector_alpha: float = 0.9, tie_tol: float = 1e-9, backend: str = "auto") -> OrderedSchur:
    """Ordered real Schur decomposition of a batch, blocks sorted by |lambda|, non-increasing.

    Computed in float64 whatever the input dtype. Blocks whose moduli differ by at most
    `tie_tol * rho(W)` count as ties and keep their LAPACK order (deterministic; rounding
    noise never drives swaps, e.g. for orthogonal W where every |lambda| = 1). The sector
    |lambda| >= sector_alpha * rho is moved to the front first and each sector is then sorted,
    so a rejected swap of nearly equal eigenvalues (dtrexc INFO = 1) only perturbs the order
    inside a sector; such failures are counted in `failed_swaps`. Every result is checked
    (reconstruction and orthogonality <= 1e-9, else RuntimeError).

    Args:
        W: [..., n, n] torch tensor or numpy array, float32/float64, finite.
        sector_alpha: sector cut for the first pass (<= 0: a single pass).
        tie_tol: relative tie tolerance on moduli.
        backend: "auto"/"cpu" (C++ kernel) or "reference" (scipy + Python dtrexc loop).

    Returns:
        OrderedSchur (float64; torch tensors if W is a tensor, else numpy arrays).
    """
    if backend not in ("auto", "cpu", "reference"):
        raise ValueError(f"backend must be 'auto', 'cpu' or 'reference', got {backend!r}")
    A, lead, is_torch = _as_batch(W, "W")
    if backend == "reference" or (backend == "auto" and not _ext.cpp_available()):
        res = [reference.ordered_schur(a, sector_alpha, tie_tol) for a in A]
        Q = np.stack([r[0] for r in res])
        T = np.stack([r[1] for r in res])
        ev = np.stack([r[2] for r in res])
        info = np.array([[np.linalg.norm(q @ t @ q.T - a) / max(np.linalg.norm(a), 1e-300),
                          np.linalg.norm(q.T @ q - np.eye(len(a))), r[3], r[4]]
                         for q, t, a, r in zip(Q, T, A, res)], dtype=np.float64).reshape(-1, 4)
        nR = np.array([r[5] for r in res], np.int64)
    else:
        C = _ext.require_cpp()
        Q, T, e2, info, sec = C.ordered_schur_f64(A, float(sector_alpha), float(tie_tol), _ext.num_threads())
        if (info[:, 2] < 0).any():
            m = int(np.nonzero(info[:, 2] < 0)[0][0])
            raise RuntimeError(f"ordered_schur: LAPACK dgees failed (INFO={int(info[m, 3])}) for matrix {m}")
        ev = e2[..., 0] + 1j * e2[..., 1]
        nR = sec[:, 0]
    _check(info, "ordered_schur")
    return _wrap(Q, T, ev, info, nR, lead, is_torch)


def ordschur(U, T, clusters, backend: str = "auto") -> OrderedSchur:
    """Reorder real Schur pairs into several clusters (MATLAB `ordschur` semantics).

    The cluster with the highest label ends in the top-left corner, the next highest
    next, and so on; the order inside a cluster is kept (stable). scipy's `schur(sort=)`
    offers two clusters only.

    Args:
        U: [..., n, n] orthogonal; T: [..., n, n] real Schur form (W = U T U^T).
        clusters: [..., n] integer labels, one per diagonal position (both rows of a
            2x2 block must carry the same label).
        backend: "auto"/"cpu" or "reference".

    Returns:
        OrderedSchur of the reordered pair (n_R = n; eigenvalues re-read off T).
    """
    if backend not in ("auto", "cpu", "reference"):
        raise ValueError(f"backend must be 'auto', 'cpu' or 'reference', got {backend!r}")
    Ua, lead, is_torch = _as_batch(U, "U")
    Ta, lead_t, _ = _as_batch(T, "T")
    if Ua.shape != Ta.shape or lead != lead_t:
        raise ValueError(f"U and T must have the same shape, got {list(lead) + list(Ua.shape[1:])} "
                         f"and {list(lead_t) + list(Ta.shape[1:])}")
    n = Ta.shape[-1]
    lab = clusters.detach().cpu().numpy() if isinstance(clusters, torch.Tensor) else np.asarray(clusters)
    if lab.shape != tuple(lead) + (n,):
        raise ValueError(f"clusters must be {list(lead) + [n]}, got {list(lab.shape)}")
    if not np.issubdtype(lab.dtype, np.integer):
        raise ValueError(f"clusters must be integer labels, got {lab.dtype}")
    lab = lab.reshape(-1, n).astype(np.float64)
    if np.abs(np.tril(Ta, -2)).max(initial=0.0) > 0:
        raise ValueError("T must be quasi-upper-triangular (a real Schur form)")
    start, size = _structure(Ta)
    two = size == 2
    if n > 1 and (two[:, :-1] & (start[:, :-1] == np.arange(n - 1)) & (lab[:, :-1] != lab[:, 1:])).any():
        raise ValueError("clusters must give both rows of a 2x2 block (a conjugate pair) the same label")
    if backend == "reference" or (backend == "auto" and not _ext.cpp_available()):
        res = [reference.ordschur(u, t, c) for u, t, c in zip(Ua, Ta, lab)]
        Q = np.stack([r[0] for r in res])
        T2 = np.stack([r[1] for r in res])
        ev = np.stack([reference.block_eigvals(t) for t in T2])
        info = np.array([[np.linalg.norm(q @ t @ q.T - u @ t0 @ u.T) / max(np.linalg.norm(u @ t0 @ u.T), 1e-300),
                          np.linalg.norm(q.T @ q - np.eye(n)), r[2], 0]
                         for q, t, u, t0, r in zip(Q, T2, Ua, Ta, res)], dtype=np.float64).reshape(-1, 4)
    else:
        C = _ext.require_cpp()
        Q, T2, e2, info = C.ordschur_f64(Ua, Ta, np.ascontiguousarray(lab), _ext.num_threads())
        ev = e2[..., 0] + 1j * e2[..., 1]
    _check(info, "ordschur")
    return _wrap(Q, T2, ev, info, np.full(len(Ta), n, np.int64), lead, is_torch)
