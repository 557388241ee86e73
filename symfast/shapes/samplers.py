"""Point samplers for training and checking 2D and 3D fields.

The disk (2D) and the ball (3D) are the default domains: they are invariant under
all of O(2) / O(3), so no candidate symmetry is broken by the sampling itself (a
box's corners break 60/120 degree rotations, and 72 degree ones in 3D).
All samplers draw float64 from `generator` and cast at the end, so a seed gives
the same points in every dtype.
"""
from __future__ import annotations

import math

import torch

__all__ = ["sample_disk", "sample_ball", "sample_box", "sample_near_surface", "SAMPLERS"]


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


def sample_ball(n: int, radius: float = 1.0, generator: torch.Generator | None = None,
                dtype=torch.float32, device="cpu", batch: tuple = ()) -> torch.Tensor:
    """Uniform in the 3D ball of `radius`: [*batch, n, 3].

    Directions are normalised Gaussians (isotropic), radii radius * u^(1/3) (uniform volume).
    """
    _check(n)
    _check_radius(radius)
    d = torch.randn(*batch, n, 3, generator=generator, dtype=torch.float64)
    d = d / d.norm(dim=-1, keepdim=True).clamp(min=1e-300)
    r = radius * torch.rand(*batch, n, 1, generator=generator, dtype=torch.float64).pow(1.0 / 3.0)
    return (r * d).to(device=device, dtype=dtype)


def sample_box(n: int, half_width: float = 1.0, generator: torch.Generator | None = None,
               dtype=torch.float32, device="cpu", batch: tuple = (), dim: int = 2) -> torch.Tensor:
    """Uniform in the cube [-half_width, half_width]^dim: [*batch, n, dim] (dim 2 or 3)."""
    _check(n)
    _check_dim(dim)
    u = torch.rand(*batch, n, dim, generator=generator, dtype=torch.float64)
    return ((2 * u - 1) * half_width).to(device=device, dtype=dtype)


def sample_near_surface(shape, n: int, sigma: float = 0.02, radius: float = 1.0,
                        generator: torch.Generator | None = None, dtype=torch.float32,
                        device="cpu", oversample: int = 8) -> torch.Tensor:
    """Points near the zero level set of `shape.sdf`: [n, shape.dim] (2 unless the shape says 3).

    Candidates uniform in the disk (2D) or ball (3D) of `radius` are projected onto the
    surface along the SDF gradient (x - f(x) grad f(x)), then jittered with N(0, sigma^2 I).
    """
    _check(n)
    dim = getattr(shape, "dim", 2)
    _check_dim(dim)
    domain = sample_disk if dim == 2 else sample_ball
    x = domain(n * oversample, radius, generator, torch.float64)
    x.requires_grad_(True)
    f = shape.sdf(x)
    (grad,) = torch.autograd.grad(f.sum(), x)
    with torch.no_grad():
        p = x - f[:, None] * grad
        keep = torch.argsort(f.abs())[:n]  # closest candidates project most reliably
        p = p[keep] + sigma * torch.randn(n, dim, generator=generator, dtype=torch.float64)
    return p.to(device=device, dtype=dtype)


def _check_dim(dim):
    if dim not in (2, 3):
        raise ValueError(f"dim must be 2 or 3, got {dim}")


def _check_radius(radius):
    if not (radius > 0 and math.isfinite(radius)):
        raise ValueError(f"radius must be positive and finite, got {radius}")


SAMPLERS = {"disk": sample_disk, "box": sample_box, "ball": sample_ball}
