"""Launchers for the C++ ordered Schur kernels (`csrc/ordered_schur.cpp`).

The kernels run one LAPACK/BLAS call sequence per matrix inside an OpenMP loop over the batch.
SciPy's OpenBLAS would start its own threads inside each of those calls (nested threading:
oversubscription, and one "OpenBLAS Warning : Detect OpenMP Loop" line per call), so BLAS is
limited to one thread for the duration of a kernel call; the kernel's own threads are the only ones.
"""
from __future__ import annotations

import contextlib
import functools

import torch

from symfast import _ext


@functools.lru_cache(maxsize=1)
def _controller():
    import scipy.linalg.cython_lapack  # noqa: F401  (loads the OpenBLAS the kernels call, so it is found)
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn, a dependency
        return None
    return ThreadpoolController()


def single_threaded_blas(num_threads: int):
    """Context: BLAS limited to one thread while the kernel's `num_threads` OpenMP threads call it."""
    ctl = _controller()
    if num_threads <= 1 or ctl is None:
        return contextlib.nullcontext()
    return ctl.limit(limits=1, user_api="blas")


def ordered_schur(W: torch.Tensor, sector_alpha: float, tie_tol: float):
    """W: [M, n, n] float64 CPU -> (Q, T, eigvals [M, n, 2], info [M, 4], n_R [M])."""
    C = _ext.require_cpp()
    nt = _ext.num_threads()
    with single_threaded_blas(nt):
        Q, T, e2, info, sec = C.ordered_schur_f64(W.contiguous().numpy(), float(sector_alpha), float(tie_tol), nt)
    return (torch.from_numpy(Q), torch.from_numpy(T), torch.from_numpy(e2), torch.from_numpy(info),
            torch.from_numpy(sec[:, 0].copy()))


def ordschur(U: torch.Tensor, T: torch.Tensor, clusters: torch.Tensor):
    """U, T: [M, n, n], clusters: [M, n] float64 CPU -> (Q, T2, eigvals [M, n, 2], info [M, 4])."""
    C = _ext.require_cpp()
    nt = _ext.num_threads()
    with single_threaded_blas(nt):
        Q, T2, e2, info = C.ordschur_f64(U.contiguous().numpy(), T.contiguous().numpy(),
                                         clusters.contiguous().numpy(), nt)
    return torch.from_numpy(Q), torch.from_numpy(T2), torch.from_numpy(e2), torch.from_numpy(info)
