"""Launchers for the C++ ordered Schur kernels (`csrc/ordered_schur.cpp`)."""
from __future__ import annotations

import torch

from symfast import _ext


def ordered_schur(W: torch.Tensor, sector_alpha: float, tie_tol: float):
    """W: [M, n, n] float64 CPU -> (Q, T, eigvals [M, n, 2], info [M, 4], n_R [M])."""
    C = _ext.require_cpp()
    Q, T, e2, info, sec = C.ordered_schur_f64(W.contiguous().numpy(), float(sector_alpha), float(tie_tol),
                                              _ext.num_threads())
    return (torch.from_numpy(Q), torch.from_numpy(T), torch.from_numpy(e2), torch.from_numpy(info),
            torch.from_numpy(sec[:, 0].copy()))


def ordschur(U: torch.Tensor, T: torch.Tensor, clusters: torch.Tensor):
    """U, T: [M, n, n], clusters: [M, n] float64 CPU -> (Q, T2, eigvals [M, n, 2], info [M, 4])."""
    C = _ext.require_cpp()
    Q, T2, e2, info = C.ordschur_f64(U.contiguous().numpy(), T.contiguous().numpy(), clusters.contiguous().numpy(),
                                     _ext.num_threads())
    return torch.from_numpy(Q), torch.from_numpy(T2), torch.from_numpy(e2), torch.from_numpy(info)
