"""One thread for the Schur analysis, so that its numbers do not depend on the machine's thread count.

The analysis after training is many small float64 products, factorisations and reductions. Torch
splits reductions by thread count and MKL rounds some matrix sizes (e.g. n = 27, 39, 43)
differently at one and at two threads, so the same checkpoints gave tables that differed in the
last digits between machines; on a busy machine the second thread also mostly waits. Inside
`analysis_threads()` torch (and the BLAS that SciPy's and NumPy's LAPACK calls use) runs on one
thread. The fused rollout kernel (`symfast.rnn_rollout`) computes each sequence on one thread in a
fixed order, so its results do not depend on the count: `kernel_threads()` gives it the caller's
threads back for the duration of one call.
"""
from __future__ import annotations

import contextlib
import importlib

import torch

__all__ = ["analysis_threads", "kernel_threads"]

_outer: list[int] = []  # thread counts outside the open analysis_threads() contexts, innermost last


@contextlib.contextmanager
def analysis_threads():
    """Context: torch and BLAS on one thread; the previous settings are restored on exit (nests)."""
    prev = torch.get_num_threads()
    _outer.append(_outer[-1] if _outer else prev)
    torch.set_num_threads(1)
    try:
        with _single_threaded_blas():
            yield
    finally:
        _outer.pop()
        torch.set_num_threads(prev)


@contextlib.contextmanager
def kernel_threads():
    """Context: inside `analysis_threads`, the caller's thread count for a thread-count-independent
    kernel call; outside it, nothing changes."""
    if not _outer:
        yield
        return
    torch.set_num_threads(_outer[-1])
    try:
        yield
    finally:
        torch.set_num_threads(1)


def _single_threaded_blas():
    try:
        importlib.import_module("scipy.linalg.cython_lapack")  # loads SciPy's BLAS, so that it is limited too
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - threadpoolctl ships with scikit-learn, a dependency
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")
