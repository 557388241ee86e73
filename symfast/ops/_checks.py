"""Boundary checks shared by the registered ops (`torch.ops.symfast.*`).

Every op validates its own arguments in each of its implementations *and* in its fake
(meta) implementation, so a direct `torch.ops.symfast.<op>` call -- from torch.compile or
other people's code -- gets the same clear ValueError as the public function, and never
reaches a kernel with buffers it would read past. The checks here are static (shapes,
dtypes, devices) and run on fake tensors too; value checks (finiteness, index ranges)
skip meta tensors, which hold no values.

Devices: a mix of meta and real tensors is refused. The dispatcher sends such a call to
the fake implementation, which would otherwise return an uninitialised real tensor.
"""
from __future__ import annotations

import torch

FLOATS = (torch.float32, torch.float64)
RESOLVED = ("cpu", "triton", "reference")  # what "auto" resolves to
TAKEN = ("auto", *RESOLVED)  # the backend names an op takes ("auto": resolved in its kernel, `_dispatch`)


def backend(op: str, name, valid=TAKEN) -> None:
    """`name` is one of the backend names `valid` (default: any op's); ValueError naming them otherwise
    (an unknown name would otherwise fall through to the reference without a word). Every op's kernels
    (with the op's own names) and its fake implementation call this."""
    if not isinstance(name, str) or name not in valid:
        raise ValueError(f"{op}: backend must be one of {list(valid)}, got {name!r}")


def shape(t: torch.Tensor) -> list[int]:
    return list(t.shape)


def tensor(op: str, name: str, t, dtypes=FLOATS) -> torch.Tensor:
    """`t` is a tensor of one of `dtypes`; ValueError naming the argument otherwise."""
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{op}: {name} must be a tensor, got {type(t).__name__}")
    if dtypes is not None and t.dtype not in dtypes:
        want = " or ".join(str(d).replace("torch.", "") for d in dtypes)
        raise ValueError(f"{op}: {name} must be {want}, got {t.dtype}")
    return t


def same_dtype(op: str, named, ref: str) -> None:
    """Every tensor in `named` ((name, tensor) pairs, None skipped) has the dtype of the one named `ref`."""
    named = [(n, t) for n, t in named if t is not None]
    dtype = dict(named)[ref].dtype
    for name, t in named:
        if t.dtype != dtype:
            raise ValueError(f"{op}: {name} has dtype {t.dtype}, expected {dtype} (same as {ref})")


def same_device(op: str, named, allow_cpu=()) -> torch.device:
    """All tensors on the first one's device (names in `allow_cpu` may also be on the CPU);
    never a mix of meta and real tensors. Returns the device."""
    named = [(n, t) for n, t in named if t is not None]
    ref_name, ref = named[0]
    dev = ref.device
    metas = [n for n, t in named if t.device.type == "meta"]
    if metas and len(metas) != len(named):
        reals = [f"{n} on {t.device}" for n, t in named if t.device.type != "meta"]
        raise ValueError(f"{op}: {', '.join(metas)} on meta but {', '.join(reals)}: pass all tensors on the meta "
                         f"device (shapes only) or none")
    for name, t in named:
        if t.device != dev and not (name in allow_cpu and t.device.type == "cpu"):
            raise ValueError(f"{op}: {name} is on {t.device}, expected {dev} (same as {ref_name})")
    return dev


def has_values(t: torch.Tensor | None) -> bool:
    """A tensor whose values can be read (not meta, not a fake tensor under torch.compile)."""
    if t is None or t.device.type == "meta":
        return False
    return not isinstance(t, torch._subclasses.fake_tensor.FakeTensor)


def all_finite(t: torch.Tensor) -> bool:
    """True when no value of the (real) tensor is NaN or +-Inf (an empty tensor: True). One min/max pass:
    NaN propagates through both, so both are finite exactly when every value is. About 10x faster
    than `isfinite(t).all()`, which writes a bool tensor of t's size first (48 ms vs 5 ms for
    4M doubles on one thread)."""
    if t.numel() == 0:
        return True
    lo, hi = torch.aminmax(t)
    return bool(torch.isfinite(lo) & torch.isfinite(hi))


def finite(op: str, named) -> None:
    """ValueError naming the first tensor with NaN or Inf values (meta/fake tensors skipped)."""
    for name, t in named:
        if has_values(t) and t.numel() and t.is_floating_point() and not all_finite(t):
            raise ValueError(f"{op}: {name} contains NaN or Inf values")


def scalar_finite(op: str, name: str, v) -> None:
    if not isinstance(v, (int, float)) or v != v or v in (float("inf"), float("-inf")):
        raise ValueError(f"{op}: {name} must be a finite number, got {v!r}")
