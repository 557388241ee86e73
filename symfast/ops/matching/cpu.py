"""CPU launchers for the matching ops: C++ kernels in csrc/matching.cpp.

Inputs are validated by `symfast.ops.matching`; here they only become numpy views
(no copies for contiguous CPU tensors) and the outputs torch tensors. The mode codes
come from the extension (`symfast._C.MatchMode`), never mirrored by hand.
"""
from __future__ import annotations

import torch

from symfast import _ext
from symfast.ops.matching.reference import MODES


def mode_code(mode: str) -> int:
    """The kernel's code for a mode (symfast._C.MatchMode; the Python order when _C is absent)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return int(_ext._C.MatchMode.__members__[mode]) if _ext._C else MODES.index(mode)


def mode_name(code: int) -> str:
    """The mode a kernel code stands for (inverse of `mode_code`)."""
    return MODES[code] if not _ext._C else _ext._C.MatchMode(code).name


def assign_fwd(cost: torch.Tensor) -> torch.Tensor:
    """cost: [P, n, n] float64 -> [P, n] int64 (symfast._C.lsa_batched, OpenMP over problems)."""
    return torch.from_numpy(_ext.require_cpp().lsa_batched(cost.contiguous().numpy(), _ext.num_threads()))


def match_gram_fwd(gram: torch.Tensor, a2: torch.Tensor, b2: torch.Tensor, mode: int) -> list[torch.Tensor]:
    """gram: [P, n, n] float32/float64, a2, b2: [P, n] float64 -> [index [P, n] int64, scale [P, n] f64]."""
    fn = getattr(_ext.require_cpp(), "match_gram_f32" if gram.dtype == torch.float32 else "match_gram_f64")
    idx, sc = fn(gram.contiguous().numpy(), a2.contiguous().numpy(), b2.contiguous().numpy(), mode,
                 _ext.num_threads())
    return [torch.from_numpy(idx), torch.from_numpy(sc)]


def match_signed_lifts_fwd(W: torch.Tensor, src: torch.Tensor, sign: torch.Tensor, mode: int,
                           isa: str = "auto") -> list[torch.Tensor]:
    """W: [M, H, k] float32/float64, src: [G, k] int64, sign: [G, k] float64
    -> [index [M, G, H] int64, scale [M, G, H] f64, rel2 [M, G] f64].

    isa: "auto" (the widest this CPU runs) or "generic", "avx2", "avx512" to force an instance; every
    instance gives the same bits (no fused multiply-adds), so an assignment never depends on the CPU.
    """
    fn = getattr(_ext.require_cpp(), "match_signed_lifts_" + ("f32" if W.dtype == torch.float32 else "f64"))
    idx, sc, rel = fn(W.contiguous().numpy(), src.contiguous().numpy(), sign.contiguous().numpy(), mode,
                      _ext.num_threads(), isa)
    return [torch.from_numpy(idx), torch.from_numpy(sc), torch.from_numpy(rel)]
