"""Point samplers for training and checking 2D fields.

The disk is the default domain: it is invariant under all of O(2), so no
candidate symmetry is broken by the sampling itself (a box's corners break
60/120 degree rotations).
"""
from __future__ import annotations

import math

import torch

__all__ = ["sample_disk", "sample_box", "sample_near_surface", "SAMPLERS"]


def _check(n: int):
    if int(n) != n or n < 1:
        raise ValueError(f"number of points must be a positive integer, got {n}")


def sample_disk(n: int, radius: float = 1.0, generator: torch.Generator | None = None,
                dtype=torch.float32, device="cpu", batch: tuple = ()) -> torch.Tensor:
    """Uniform in the disk of `radius`: [*batch, n, 2]."""
    _check(n)
    u = torch.rand(*batch, n, 2, generator=generator, dtype=torch.float64)
    r = radius * torch.sqrt(u[..., 0])
    t = 2 * math.pi * u[..., 1]
    return torch.stack((r * torch.cos(t), r * torch.sin(t)), -1).to(device=device, dtype=dtype)


def sample_box(n: int, half_width: float = 1.0, generator: torch.Generator | None = None,
               dtype=torch.float32, device="cpu", batch: tuple = ()) -> torch.Tensor:
    """Uniform in the square [-half_width, half_width]^2: [*batch, n, 2]."""
    _check(n)
    u = torch.rand(*batch, n, 2, generator=generator, dtype=torch.float64)
    return ((2 * u - 1) * half_width).to(device=device, dtype=dtype)


def sample_near_surface(shape, n: int, sigma: float = 0.02, radius: float = 1.0,
                        generator: torch.Generator | None = None, dtype=torch.float32,
                        device="cpu", oversample: int = 8) -> torch.Tensor:
    """Points near the zero level set of `shape.sdf`: [n, 2].

    Candidates uniform in the disk are projected onto the surface along the SDF
    gradient (x - f(x) grad f(x)), then jittered with N(0, sigma^2 I).
    """
    _check(n)
    x = sample_disk(n * oversample, radius, generator, torch.float64)
    x.requires_grad_(True)
    f = shape.sdf(x)
    (grad,) = torch.autograd.grad(f.sum(), x)
    with torch.no_grad():
        p = x - f[:, None] * grad
        keep = torch.argsort(f.abs())[:n]  # closest candidates project most reliably
        p = p[keep] + sigma * torch.randn(n, 2, generator=generator, dtype=torch.float64)
    return p.to(device=device, dtype=dtype)


SAMPLERS = {"disk": sample_disk, "box": sample_box}
