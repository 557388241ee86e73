"""Batched ordered real Schur decomposition and multi-cluster reordering.

    ordered_schur(W [..., n, n]) -> OrderedSchur     torch.ops.symfast.ordered_schur
    ordschur(U, T, clusters) -> OrderedSchur          torch.ops.symfast.ordschur

Where things live:
  reference     symfast/ops/ordered_schur/reference.py (scipy.linalg.schur + a Python dtrexc loop)
  CPU kernel    csrc/ordered_schur.cpp via cpu.py (SciPy's bundled LAPACK dgees/dtrexc reached
                through its PyCapsules, OpenMP over the batch)
  Triton        none (LAPACK-style sequential swaps; float64)
  tests         tests/ops/test_ordered_schur.py; benchmark benchmarks/benchmarks/bench_schur.py
The ops take and return float64 tensors ([M, n, n] batches); `OrderedSchur` is the public
result (torch or numpy like the input). Not differentiable: inputs that require grad raise.
Matrices are scaled by a power of two before factorising (exact; errors are relative), so
entries near 1e±300 neither overflow nor underflow the checks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from symfast.ops import _checks, _dispatch
from symfast.ops.ordered_schur import cpu, reference

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

    def __repr__(self) -> str:  # short: the dataclass default would print Q and T whole
        n_R, T = np.asarray(self.n_R), np.asarray(self.T)
        batch = n_R.shape

        def worst(x):
            x = np.asarray(x)
            return float(x.max()) if x.size else float("nan")

        n_r = int(n_R) if not batch else (f"{int(n_R.min())}..{int(n_R.max())}" if n_R.size else "-")
        return (f"OrderedSchur(n={T.shape[-1]}" + (f", batch={batch}" if batch else "") + f", n_R={n_r}, "
                f"recon_err={worst(self.recon_err):.2g}, orth_err={worst(self.orth_err):.2g}, "
                f"failed_swaps={int(np.asarray(self.failed_swaps).sum())})")

    def blocks(self, index=()) -> list[tuple[int, int]]:
        """(start, size) of each diagonal block of matrix `index` of the batch."""
        st = np.asarray(self.block_start)[index]
        sz = np.asarray(self.block_size)[index]
        return [(int(i), int(sz[i])) for i in range(len(st)) if st[i] == i]


def _as_batch(W, name: str) -> tuple[torch.Tensor, tuple, bool]:
    """[M, n, n] float64 CPU tensor, leading shape, whether the input was a tensor."""
    is_torch = isinstance(W, torch.Tensor)
    if is_torch:
        if W.is_complex() or W.dtype not in (torch.float32, torch.float64):
            raise ValueError(f"{name} must be float32 or float64, got {W.dtype}")
        t = W.detach().cpu().double()
    else:
        arr = np.asarray(W)
        if arr.dtype not in (np.float32, np.float64):
            raise ValueError(f"{name} must be float32 or float64, got {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float64))
    if t.ndim < 2 or t.shape[-1] != t.shape[-2]:
        raise ValueError(f"{name} must be [..., n, n] (square), got {list(t.shape)}")
    if t.shape[-1] == 0:
        raise ValueError(f"{name} must have n >= 1, got {list(t.shape)}")
    if not _checks.all_finite(t):
        raise ValueError(f"{name} contains NaN or Inf")
    lead = tuple(t.shape[:-2])
    return t.reshape(-1, t.shape[-1], t.shape[-1]).contiguous(), lead, is_torch


def _pow2_scale(A: torch.Tensor) -> torch.Tensor:
    """[M] powers of two s with max |s A_m| in [0.5, 1) (1 for a zero matrix): exact rescaling."""
    amax = A.abs().flatten(1).amax(dim=1)
    _, e = torch.frexp(torch.where(amax > 0, amax, torch.ones_like(amax)))
    return torch.ldexp(torch.ones_like(amax), -e)


# Columns of the ops' per-matrix `info` [M, 4] (the C++ kernel writes the same layout). A dgees
# failure in the C++ kernel is flagged by a negative FAILED_SWAPS with LAPACK's INFO in SECTOR_FAILURES.
RECON_ERR, ORTH_ERR, FAILED_SWAPS, SECTOR_FAILURES = range(4)


def _info(Q: np.ndarray, T: np.ndarray, A: np.ndarray, failed_swaps, sector_failures) -> np.ndarray:
    """[M, 4] float64 info rows: ||Q T Q^T - A|| / ||A||, ||Q^T Q - I||, failed swaps, sector failures."""
    n = A.shape[-1]
    rows = [[np.linalg.norm(q @ t @ q.T - a) / max(np.linalg.norm(a), 1e-300), np.linalg.norm(q.T @ q - np.eye(n)),
             f, sf] for q, t, a, f, sf in zip(Q, T, A, failed_swaps, sector_failures)]
    return np.array(rows, dtype=np.float64).reshape(-1, 4)


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
    bad = ~(info[:, RECON_ERR] <= CHECK_TOL) | ~(info[:, ORTH_ERR] <= CHECK_TOL)
    if bad.any():
        m = int(np.nonzero(bad)[0][0])
        raise RuntimeError(
            f"{what}: factorisation check failed for {int(bad.sum())} matrices (first: index {m}, "
            f"reconstruction error {info[m, RECON_ERR]:.2e}, orthogonality error {info[m, ORTH_ERR]:.2e}); "
            "refusing to return a wrong Schur form")


def _wrap(Q, T, ev, info, nR, lead, is_torch):
    n = T.shape[-1]
    start, size = _structure(T)
    out = dict(Q=Q.reshape(*lead, n, n), T=T.reshape(*lead, n, n), eigvals=ev.reshape(*lead, n),
               block_start=start.reshape(*lead, n), block_size=size.reshape(*lead, n),
               n_R=nR.reshape(lead), recon_err=info[:, RECON_ERR].reshape(lead),
               orth_err=info[:, ORTH_ERR].reshape(lead),
               failed_swaps=info[:, FAILED_SWAPS].astype(np.int64).reshape(lead),
               sector_failures=info[:, SECTOR_FAILURES].astype(np.int64).reshape(lead))
    if is_torch:
        out = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}
    return OrderedSchur(**out)


# ---- ops: float64 tensors in and out ----------------------------------------------------
def _square_batch(op: str, name: str, t, n=None) -> int:
    _checks.tensor(op, name, t, (torch.float64,))
    if t.ndim != 3 or t.shape[1] != t.shape[2] or t.shape[1] < 1 or (n is not None and t.shape[1] != n):
        want = "[M, n, n] with n >= 1" if n is None else f"[M, {n}, {n}]"
        raise ValueError(f"{op}: {name} must be {want}, got {list(t.shape)}")
    if t.device.type not in ("cpu", "meta"):
        raise ValueError(f"{op}: {name} must be a CPU tensor (the op runs LAPACK on the host), got {t.device}")
    return t.shape[1]


MAX_ENTRY = 1e150  # largest |entry| x n of W (or T) taken: beyond it products in the 2x2 blocks' eigenvalues and
# the residual norms overflow float64 (NaN sort keys, Inf errors); scale the matrix first (eigenvalues scale with it)


def _magnitude(op: str, name: str, t) -> None:
    """ValueError when an entry of `t` [M, n, n] exceeds MAX_ENTRY / n (values skipped on meta)."""
    if _checks.has_values(t) and t.numel():
        n, big = t.shape[-1], float(t.abs().max())
        if big * n > MAX_ENTRY:
            raise ValueError(f"{op}: {name} has an entry of magnitude {big:.3g}; at n = {n} entries up to "
                             f"{MAX_ENTRY / n:.3g} are taken (beyond, eigenvalue and residual arithmetic "
                             f"overflows float64): divide {name} by a scale first")


def validate_ordered_schur(W, sector_alpha, tie_tol) -> None:
    """W: [M, n, n] float64 CPU, finite; finite sector_alpha and tie_tol >= 0 (values skipped on meta)."""
    op = "ordered_schur"
    _square_batch(op, "W", W)
    _checks.scalar_finite(op, "sector_alpha", sector_alpha)
    _checks.scalar_finite(op, "tie_tol", tie_tol)
    if tie_tol < 0:
        raise ValueError(f"{op}: tie_tol must be >= 0, got {tie_tol}")
    _checks.finite(op, (("W", W),))
    _magnitude(op, "W", W)


def validate_ordschur(U, T, clusters) -> None:
    """U, T: [M, n, n] float64 CPU, finite, T a real Schur form; clusters [M, n] float64 labels, equal on
    both rows of each 2x2 block (values skipped on meta)."""
    op = "ordschur"
    n = _square_batch(op, "T", T)
    _square_batch(op, "U", U, n)
    _checks.tensor(op, "clusters", clusters, (torch.float64,))
    if U.shape[0] != T.shape[0] or clusters.shape != (T.shape[0], n):
        raise ValueError(f"{op}: U must be [M, n, n] = {list(T.shape)} and clusters [M, n] = [{T.shape[0]}, {n}] "
                         f"(T's), got U {list(U.shape)}, clusters {list(clusters.shape)}")
    _checks.same_device(op, (("U", U), ("T", T), ("clusters", clusters)))
    _checks.finite(op, (("U", U), ("T", T), ("clusters", clusters)))
    _magnitude(op, "T", T)
    if _checks.has_values(T):
        Ta, lab = T.numpy(), clusters.numpy()
        _check_schur_form(Ta)
        start, size = _structure(Ta)
        two = size == 2
        if n > 1 and (two[:, :-1] & (start[:, :-1] == np.arange(n - 1)) & (lab[:, :-1] != lab[:, 1:])).any():
            raise ValueError("clusters must give both rows of a 2x2 block (a conjugate pair) the same label")


def resolve_backend(backend: str, op: str) -> str:
    """The backend that runs op ("ordered_schur" or "ordschur"; CPU tensors only, LAPACK): "auto" is the
    C++ kernel when symfast._C is built, else the reference. The public functions' and the ops' rule."""
    return _dispatch.resolve(op, backend, "cpu")


def _ordered_schur_reference(W, sector_alpha, tie_tol, backend):
    validate_ordered_schur(W, sector_alpha, tie_tol)
    A = W.numpy()
    n = A.shape[-1]
    res = [reference.ordered_schur(a, sector_alpha, tie_tol) for a in A]  # (Q, T, eigvals, failed, sector_failed, n_R)
    Q, T, ev, failed, sector_failed, nR = (list(col) for col in zip(*res)) if res else ([],) * 6
    Q = np.stack(Q) if res else np.zeros((0, n, n))
    T = np.stack(T) if res else np.zeros((0, n, n))
    ev = np.stack(ev) if res else np.zeros((0, n), np.complex128)
    info = _info(Q, T, A, failed, sector_failed)
    nR = np.array(nR, np.int64)
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in (Q, T, np.stack([ev.real, ev.imag], -1), info, nR)]


def _ordered_schur_cpu(W, sector_alpha, tie_tol, backend):
    validate_ordered_schur(W, sector_alpha, tie_tol)
    return list(cpu.ordered_schur(W, sector_alpha, tie_tol))


@torch.library.custom_op("symfast::ordered_schur", mutates_args=())
def ordered_schur_op(W: torch.Tensor, sector_alpha: float, tie_tol: float, backend: str) -> list[torch.Tensor]:
    """W: [M, n, n] float64 CPU -> [Q [M, n, n], T [M, n, n], eigvals [M, n, 2] (re, im),
    info [M, 4] (recon_err, orth_err, failed_swaps, sector_failures), n_R [M] int64]."""
    return _ordered_schur_reference(W, sector_alpha, tie_tol, backend)


_dispatch.register_kernels(ordered_schur_op, _ordered_schur_reference, {"cpu": _ordered_schur_cpu},
                           lambda **_: resolve_backend("auto", "ordered_schur"))
_dispatch.not_differentiable(ordered_schur_op)


@ordered_schur_op.register_fake
def _(W, sector_alpha, tie_tol, backend):
    _checks.backend("ordered_schur", backend)
    validate_ordered_schur(W, sector_alpha, tie_tol)
    M, n, _ = W.shape  # the kernels return contiguous tensors whatever W's strides
    return [W.new_empty(M, n, n), W.new_empty(M, n, n), W.new_empty(M, n, 2), W.new_empty(M, 4),
            W.new_empty(M, dtype=torch.int64)]


def _ordschur_reference(U, T, clusters, backend):
    validate_ordschur(U, T, clusters)
    Ua, Ta, lab = U.numpy(), T.numpy(), clusters.numpy()
    res = [reference.ordschur(u, t, c) for u, t, c in zip(Ua, Ta, lab)]  # (Q, T, failed swaps)
    Q = np.stack([q for q, _, _ in res])
    T2 = np.stack([t for _, t, _ in res])
    ev = np.stack([reference.block_eigvals(t) for t in T2])
    info = _info(Q, T2, Ua @ Ta @ Ua.transpose(0, 2, 1), [f for _, _, f in res], [0] * len(res))
    return [torch.from_numpy(np.ascontiguousarray(a)) for a in (Q, T2, np.stack([ev.real, ev.imag], -1), info)]


def _ordschur_cpu(U, T, clusters, backend):
    validate_ordschur(U, T, clusters)
    return list(cpu.ordschur(U, T, clusters))


@torch.library.custom_op("symfast::ordschur", mutates_args=())
def ordschur_op(U: torch.Tensor, T: torch.Tensor, clusters: torch.Tensor, backend: str) -> list[torch.Tensor]:
    """U, T: [M, n, n] float64 CPU real Schur pairs, clusters: [M, n] float64 labels ->
    [Q, T2, eigvals [M, n, 2], info [M, 4]] (as `ordered_schur_op`)."""
    return _ordschur_reference(U, T, clusters, backend)


_dispatch.register_kernels(ordschur_op, _ordschur_reference, {"cpu": _ordschur_cpu},
                           lambda **_: resolve_backend("auto", "ordschur"))
_dispatch.not_differentiable(ordschur_op)


@ordschur_op.register_fake
def _(U, T, clusters, backend):
    _checks.backend("ordschur", backend)
    validate_ordschur(U, T, clusters)
    M, n, _ = T.shape  # the kernels return contiguous tensors whatever T's strides
    return [T.new_empty(M, n, n), T.new_empty(M, n, n), T.new_empty(M, n, 2), T.new_empty(M, 4)]


def _check_schur_form(T: np.ndarray) -> None:
    """Quasi-upper-triangular with 2x2 blocks only for complex pairs in standard form (as LAPACK's)."""
    M, n, _ = T.shape
    if np.abs(np.tril(T, -2)).max(initial=0.0) > 0:
        raise ValueError("T must be quasi-upper-triangular (a real Schur form): entries below the "
                         "first subdiagonal are non-zero")
    if n < 2:
        return
    sub = np.diagonal(T, offset=-1, axis1=1, axis2=2) != 0  # [M, n-1]
    if (sub[:, :-1] & sub[:, 1:]).any():
        raise ValueError("T is not in real Schur form: two consecutive non-zero subdiagonal entries "
                         "(diagonal blocks are at most 2x2)")
    m, i = np.nonzero(sub)
    if not len(m):  # no 2x2 blocks (all eigenvalues real)
        return
    a, b, c, d = T[m, i, i], T[m, i, i + 1], T[m, i + 1, i], T[m, i + 1, i + 1]
    scale = np.maximum(np.abs(T[m]).reshape(len(m), -1).max(1), 1e-300)
    bad = ~((np.sign(b) * np.sign(c) < 0) & (np.abs(a - d) <= 1e-12 * scale))  # signs: b c may underflow
    if bad.any():
        k = int(np.nonzero(bad)[0][0])
        raise ValueError(f"T is not in real Schur form: the 2x2 block at rows {i[k]}, {i[k] + 1} of matrix "
                         f"{m[k]} is not a complex pair in standard form [[a, b], [c, a]] with b c < 0")


def _check_scalar(name: str, v) -> float:
    v = float(v)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    return v


def ordered_schur(W, sector_alpha: float = 0.9, tie_tol: float = 1e-9, backend: str = "auto") -> OrderedSchur:
    """Ordered real Schur decomposition of a batch, blocks sorted by |lambda|, non-increasing.

    Computed in float64 whatever the input dtype. Blocks whose moduli differ by at most
    `tie_tol * rho(W)` count as ties and keep their LAPACK order (deterministic; rounding
    noise never drives swaps, e.g. for orthogonal W where every |lambda| = 1). The sector
    |lambda| >= sector_alpha * rho (less `tie_tol * rho`: a modulus within the tolerance of the cut
    counts as R) is moved to the front first and each sector is then sorted,
    so a rejected swap of nearly equal eigenvalues (dtrexc INFO = 1) only perturbs the order
    inside a sector; such failures are counted in `failed_swaps`. Every result is checked
    (reconstruction and orthogonality <= 1e-9, else RuntimeError).

    Args:
        W: [..., n, n] torch tensor or numpy array, float32/float64, finite; not requiring grad
            (the decomposition is not differentiable).
        sector_alpha: sector cut for the first pass (<= 0: a single pass); finite.
        tie_tol: relative tie tolerance on moduli, finite and >= 0.
        backend: "auto"/"cpu" (C++ kernel) or "reference" (scipy + Python dtrexc loop).

    Returns:
        OrderedSchur (float64; torch tensors if W is a tensor, else numpy arrays).
    """
    _dispatch.refuse_grad("ordered_schur", W=W)
    sector_alpha = _check_scalar("sector_alpha", sector_alpha)
    tie_tol = _check_scalar("tie_tol", tie_tol)
    if tie_tol < 0:
        raise ValueError(f"tie_tol must be >= 0, got {tie_tol}")
    be = resolve_backend(backend, "ordered_schur")
    A, lead, is_torch = _as_batch(W, "W")
    s = _pow2_scale(A)
    Q, T, e2, info, nR = ordered_schur_op(A * s[:, None, None], sector_alpha, tie_tol, _dispatch.for_op(backend, be))
    if be == "cpu" and bool((info[:, FAILED_SWAPS] < 0).any()):
        m = int(torch.nonzero(info[:, FAILED_SWAPS] < 0)[0])
        raise RuntimeError(f"ordered_schur: LAPACK dgees failed (INFO={int(info[m, SECTOR_FAILURES])}) for matrix {m}")
    info = info.numpy()
    _check(info, "ordered_schur")
    T = T / s[:, None, None]
    e2 = e2 / s[:, None, None]
    ev = e2[..., 0].numpy() + 1j * e2[..., 1].numpy()
    return _wrap(Q.numpy(), T.numpy(), ev, info, nR.numpy(), lead, is_torch)


def ordschur(U, T, clusters, backend: str = "auto") -> OrderedSchur:
    """Reorder real Schur pairs into several clusters (MATLAB `ordschur` semantics).

    The cluster with the highest label ends in the top-left corner, the next highest
    next, and so on; the order inside a cluster is kept (stable). scipy's `schur(sort=)`
    offers two clusters only.

    Args:
        U: [..., n, n] orthogonal; T: [..., n, n] real Schur form (W = U T U^T): quasi-upper-
            triangular, 2x2 blocks only for complex pairs in standard form [[a, b], [c, a]], b c < 0
            (anything else raises). Neither may require grad.
        clusters: [..., n] integer labels, one per diagonal position (both rows of a
            2x2 block must carry the same label).
        backend: "auto"/"cpu" or "reference".

    Returns:
        OrderedSchur of the reordered pair (n_R = n; eigenvalues re-read off T).
    """
    _dispatch.refuse_grad("ordschur", U=U, T=T)
    be = _dispatch.for_op(backend, resolve_backend(backend, "ordschur"))
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
    _check_schur_form(Ta.numpy())
    start, size = _structure(Ta.numpy())
    two = size == 2
    if n > 1 and (two[:, :-1] & (start[:, :-1] == np.arange(n - 1)) & (lab[:, :-1] != lab[:, 1:])).any():
        raise ValueError("clusters must give both rows of a 2x2 block (a conjugate pair) the same label")
    s = _pow2_scale(Ta)
    Q, T2, e2, info = ordschur_op(Ua, Ta * s[:, None, None], torch.from_numpy(np.ascontiguousarray(lab)), be)
    info = info.numpy()
    _check(info, "ordschur")
    T2 = T2 / s[:, None, None]
    e2 = e2 / s[:, None, None]
    ev = e2[..., 0].numpy() + 1j * e2[..., 1].numpy()
    return _wrap(Q.numpy(), T2.numpy(), ev, info, np.full(len(Ta), n, np.int64), lead, is_torch)
