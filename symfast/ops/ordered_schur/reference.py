"""SciPy reference for symfast.ordered_schur() and symfast.ordschur().

`scipy.linalg.schur` (LAPACK dgees) followed by a Python loop of `dtrexc`
swaps, one matrix at a time. Same ordering rule as the C++ kernel
(csrc/ordered_schur.cpp): repeatedly take the leftmost remaining block whose key is
within `tol` of the largest remaining key and move it to the front of the
unsorted part; a rejected swap (INFO = 1) is counted and sorting continues.
Keys are read off the current T (block moduli) instead of being carried along.
"""
from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack

__all__ = ["ordered_schur", "ordschur", "block_structure", "block_eigvals"]


def block_structure(T: np.ndarray) -> list[tuple[int, int]]:
    """(start, size) of the 1x1 / 2x2 diagonal blocks of a quasi-triangular T: [n, n]."""
    n = T.shape[0]
    out, i = [], 0
    while i < n:
        s = 2 if i + 1 < n and T[i + 1, i] != 0.0 else 1
        out.append((i, s))
        i += s
    return out


def block_eigvals(T: np.ndarray) -> np.ndarray:
    """Eigenvalues [n] (complex) read block by block off a real Schur form T: [n, n]."""
    ev = np.zeros(T.shape[0], dtype=np.complex128)
    for i, s in block_structure(T):
        if s == 1:
            ev[i] = T[i, i]
        else:
            a, b, c, d = T[i, i], T[i, i + 1], T[i + 1, i], T[i + 1, i + 1]
            m, disc = 0.5 * (a + d), 0.25 * (a - d) ** 2 + b * c
            im = np.sqrt(max(-disc, 0.0))
            ev[i], ev[i + 1] = m + 1j * im, m - 1j * im
    return ev


def _reorder(T, Q, key_fn, tol, lo, hi):
    fails = 0
    p = lo
    while p < hi:
        blocks = [(i, s) for i, s in block_structure(T) if lo <= i < hi and i >= p]
        keys = [key_fn(T, i) for i, _ in blocks]
        kmax = max(keys)
        f = next(i for (i, _), k in zip(blocks, keys) if k >= kmax - tol)
        if f != p:
            T2, Q2, info = lapack.dtrexc(T, Q, f + 1, p + 1)
            if info < 0:
                raise RuntimeError(f"dtrexc: illegal argument {-info}")
            T, Q = T2, Q2
            fails += int(info != 0)
        p += 2 if p + 1 < T.shape[0] and T[p + 1, p] != 0.0 else 1
    return T, Q, fails


def _modulus(T, i):
    return float(abs(block_eigvals(T[i:i + 2, i:i + 2] if i + 1 < T.shape[0] and T[i + 1, i] != 0 else T[i:i + 1, i:i + 1])[0]))


def ordered_schur(W: np.ndarray, sector_alpha: float = 0.9, tie_tol: float = 1e-9):
    """Ordered real Schur of one matrix W: [n, n] (float64).

    Returns:
        (Q [n, n], T [n, n], eigvals [n] complex, failed_swaps, sector_failures, n_R).
    """
    W = np.asarray(W, dtype=np.float64)
    n = W.shape[0]
    T, Q = sla.schur(W, output="real")
    ev = block_eigvals(T)
    rho = float(np.abs(ev).max()) if n else 0.0
    sector_fails, nR = 0, n
    tol = tie_tol * rho
    if sector_alpha > 0:  # within tol of the cut counts as R (an orthogonal W at alpha = 1: all R)
        in_r = lambda T_, i: float(_modulus(T_, i) >= sector_alpha * rho - tol)
        T, Q, sector_fails = _reorder(T, Q, in_r, 0.5, 0, n)
        flags = [in_r(T, i) for i, s in block_structure(T) for _ in range(s)]
        nR = next((i for i, f in enumerate(flags) if f < 0.5), n)
        if any(f > 0.5 for f in flags[nR:]) and sector_fails == 0:
            sector_fails = 1
    T, Q, f1 = _reorder(T, Q, _modulus, tol, 0, nR)
    T, Q, f2 = _reorder(T, Q, _modulus, tol, nR, n)
    return Q, np.triu(T, -1), block_eigvals(T), f1 + f2, sector_fails, nR


def ordschur(U: np.ndarray, T: np.ndarray, clusters: np.ndarray):
    """MATLAB `ordschur(U, T, clusters)` for one real Schur pair: highest label top-left.

    Args:
        U, T: [n, n] real Schur pair; clusters: [n] labels per diagonal position.

    Returns:
        (U2 [n, n], T2 [n, n], failed_swaps).
    """
    lab = np.asarray(clusters, dtype=np.float64).copy()
    T = np.array(T, dtype=np.float64)
    U = np.array(U, dtype=np.float64)
    n = T.shape[0]
    fails, p = 0, 0
    while p < n:
        blocks = [(i, s) for i, s in block_structure(T) if i >= p]
        kmax = max(lab[i] for i, _ in blocks)
        f, s = next((i, s) for i, s in blocks if lab[i] >= kmax - 0.5)
        if f != p:
            T2, U2, info = lapack.dtrexc(T, U, f + 1, p + 1)
            if info == 0:  # on success the block sits exactly at p: rotate the labels with it
                lab[p:f + s] = np.concatenate([lab[f:f + s], lab[p:f]])
                T, U = T2, U2
            else:
                fails += 1
        p += 2 if p + 1 < n and T[p + 1, p] != 0.0 else 1
    return U, np.triu(T, -1), fails
