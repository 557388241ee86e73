"""Access to the compiled CPU kernels (`symfast._C`) and the optional Triton.

symfast imports and works without a compiler-built extension (pure PyTorch
references), without triton and without a GPU; the fast paths say clearly
when they are unavailable instead of failing at import time.
"""
from __future__ import annotations

import importlib.util
import os

import torch

try:  # built by `pip install .` (scikit-build-core) or the in-place dev build
    _C = importlib.import_module("symfast._C")  # by name: the package's __init__ sits above this module
except ImportError:  # pragma: no cover - exercised only on broken installs
    _C = None

HAS_TRITON = importlib.util.find_spec("triton") is not None


def cpp_available() -> bool:
    return _C is not None


def require_cpp():
    """Return the compiled module or raise a RuntimeError that says how to get it."""
    if _C is None:
        raise RuntimeError(
            "symfast._C (the C++ CPU kernels) is not built; reinstall with `pip install .` "
            "or pass backend='reference'"
        )
    return _C


def isa() -> str:
    """Instruction set the C++ kernels run by default ("avx512", "avx2" or "generic"): the CPU's
    widest, capped by the environment variable SYMFAST_ISA (read once per process), which forces a
    narrower path on a machine that has a wider one. "none" without the compiled extension."""
    return _C.isa() if _C is not None else "none"


def num_threads() -> int:
    """Threads for C++ kernels: the count the user set for torch (never oversubscribe)."""
    return max(1, torch.get_num_threads())


def triton_interpret() -> bool:
    """True when Triton runs in its CPU interpreter (TRITON_INTERPRET=1)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def triton_usable(device: torch.device) -> bool:
    """Triton kernels run on CUDA devices, or on CPU tensors under TRITON_INTERPRET=1."""
    if not HAS_TRITON:
        return False
    return device.type == "cuda" or (device.type == "cpu" and triton_interpret())
