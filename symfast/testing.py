"""Tolerances for comparing fast paths against their references, in one table.

Used by the tests and available to users checking their own kernels. A fast
path agrees with its reference when every element satisfies
|fast - ref| <= atol + rtol * |ref|; long reductions (sums over thousands of
points) are compared by RMS error relative to the reference's RMS instead
(`assert_close(..., rms=True)`), which does not punish a few cancellations.
"""
from __future__ import annotations

import torch

__all__ = ["TOLERANCES", "FAST_OPCHECK", "assert_close", "opcheck"]

# torch.library.opcheck's checks without the slow dynamic-shape tracing (test_aot_dispatch_dynamic,
# seconds per call on 2 cores): tests run the full opcheck once per op and backend, this subset
# for the other parametrisations.
FAST_OPCHECK = ("test_schema", "test_autograd_registration", "test_faketensor")

# dtype -> (rtol, atol). float32 kernels reorder sums and use fused multiply-adds,
# so they agree to a few ulps times the reduction depth, not to the last bit.
TOLERANCES = {
    torch.float64: (1e-10, 1e-12),
    torch.float32: (2e-4, 2e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (2e-2, 1e-2),
}


def assert_close(name: str, ref, fast, rms: bool = False, rtol: float | None = None,
                 atol: float | None = None) -> None:
    """Assert `fast` matches `ref` within the dtype's tolerance; the message names the output."""
    ref = torch.as_tensor(ref)
    fast = torch.as_tensor(fast)
    if ref.shape != fast.shape:
        raise AssertionError(f"{name}: shape {list(fast.shape)} != reference {list(ref.shape)}")
    drt, dat = TOLERANCES.get(ref.dtype, TOLERANCES[torch.float32])
    rtol = drt if rtol is None else rtol
    atol = dat if atol is None else atol
    r, f = ref.detach().double().cpu(), fast.detach().double().cpu()
    if not torch.isfinite(f).all() and torch.isfinite(r).all():
        raise AssertionError(f"{name}: fast path has non-finite values")
    if rms:
        err = (f - r).pow(2).mean().sqrt().item()
        scale = r.pow(2).mean().sqrt().item()
        if err > atol + rtol * scale:
            raise AssertionError(f"{name}: RMS error {err:.3e} > {atol:.1e} + {rtol:.1e} * RMS {scale:.3e}")
        return
    bad = (f - r).abs() > atol + rtol * r.abs()
    if bad.any():
        idx = tuple(int(i) for i in bad.nonzero()[0])
        raise AssertionError(
            f"{name}: {int(bad.sum())}/{bad.numel()} elements differ; first at {idx}: "
            f"fast {f[idx].item():.6e} vs reference {r[idx].item():.6e} (rtol {rtol}, atol {atol})")


def opcheck(op, args, fast: bool = False) -> None:
    """`torch.library.opcheck` raising on any failure; fast=True skips the dynamic-shape tracing."""
    utils = FAST_OPCHECK if fast else ("test_schema", "test_autograd_registration", "test_faketensor",
                                       "test_aot_dispatch_dynamic")
    torch.library.opcheck(op, args, test_utils=utils)
