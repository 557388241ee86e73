import math

import pytest
import torch

import symfast.shapes as shapes
from symfast.shapes import samplers


def gen(seed=0):
    return torch.Generator().manual_seed(seed)


def test_ball_shape_bounds_and_uniformity():
    b = samplers.sample_ball(20000, 0.8, gen(), torch.float64)
    assert b.shape == (20000, 3) and b.dtype == torch.float64
    r = b.norm(dim=1)
    assert r.max() <= 0.8 + 1e-12
    assert abs(r.pow(2).mean().item() - 0.6 * 0.64) < 0.01  # E r^2 = 3 R^2 / 5 when uniform in the ball
    assert abs((r < 0.4).double().mean().item() - 1 / 8) < 0.01  # volume fraction of the inner half-radius ball
    assert b.mean(0).abs().max() < 0.02  # isotropic
    assert samplers.sample_ball(7, batch=(2, 3)).shape == (2, 3, 7, 3)
    assert samplers.sample_ball(3).dtype == torch.float32


def test_determinism():
    for fn in (samplers.sample_ball, samplers.sample_disk, samplers.sample_box):
        assert torch.equal(fn(50, 1.0, gen(3)), fn(50, 1.0, gen(3)))
        assert not torch.equal(fn(50, 1.0, gen(3)), fn(50, 1.0, gen(4)))
        # a seed gives the same points in every dtype
        assert torch.equal(fn(50, 1.0, gen(3), torch.float64).float(), fn(50, 1.0, gen(3), torch.float32))
    assert torch.equal(samplers.sample_box(10, 1.0, gen(1)), samplers.sample_box(10, 1.0, gen(1), dim=2))


def test_box_3d():
    b = samplers.sample_box(5000, 0.5, gen(), dim=3)
    assert b.shape == (5000, 3) and b.abs().max() <= 0.5 and b.abs().max() > 0.49
    with pytest.raises(ValueError, match="dim"):
        samplers.sample_box(10, dim=4)


def test_near_surface_3d():
    for s in (shapes.icosahedron(), shapes.torus(), shapes.cube()):
        near = samplers.sample_near_surface(s, 300, sigma=0.0, generator=gen(), dtype=torch.float64)
        assert near.shape == (300, 3) and s.sdf(near).abs().max() < 1e-9, s.name
    jit = samplers.sample_near_surface(shapes.sphere(0.5), 2000, sigma=0.02, generator=gen(), dtype=torch.float64)
    d = shapes.sphere(0.5).sdf(jit)
    assert abs(d.std().item() - 0.02) < 0.003 and abs(d.mean().item()) < 0.003
    a = samplers.sample_near_surface(shapes.cube(), 50, generator=gen(5))
    assert a.dtype == torch.float32 and torch.equal(a, samplers.sample_near_surface(shapes.cube(), 50,
                                                                                    generator=gen(5)))


def test_errors():
    with pytest.raises(ValueError, match="positive"):
        samplers.sample_ball(0)
    with pytest.raises(ValueError, match="radius"):
        samplers.sample_ball(10, -1.0)
    assert samplers.SAMPLERS["ball"] is samplers.sample_ball and math.isfinite(samplers.sample_ball(1).sum())
