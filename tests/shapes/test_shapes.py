import math

import pytest
import torch

import symfast as sf
import symfast.shapes as shapes
from symfast.shapes import samplers
from symfast.groups import union

CANDIDATES = union([sf.dihedral(24), sf.dihedral(10), sf.dihedral(7)])


@pytest.mark.parametrize("name", shapes.NAMES)
def test_symmetries_agree_with_declared_group(name):
    s = shapes.by_name(name)
    found = set(s.symmetries(CANDIDATES))
    declared = {g for g in CANDIDATES if g in s.group}
    assert found == declared, (name, sorted(g.name for g in found ^ declared))


def test_polygon_sdf_is_exact():
    sq = shapes.square(0.5)
    poly = shapes.polygon([[0.5, 0.5], [-0.5, 0.5], [-0.5, -0.5], [0.5, -0.5]])
    x = samplers.sample_box(2000, 1.0, torch.Generator().manual_seed(0), torch.float64)
    assert (sq.sdf(x) - poly.sdf(x)).abs().max() < 1e-12
    assert {g.name for g in poly.group} == {g.name for g in sf.dihedral(4)}
    # clockwise vertex order gives the same field
    cw = shapes.polygon([[0.5, -0.5], [-0.5, -0.5], [-0.5, 0.5], [0.5, 0.5]])
    assert (cw.sdf(x) - poly.sdf(x)).abs().max() < 1e-12
    # a regular 400-gon approaches the circle
    assert (shapes.regular_polygon(400, 0.5).sdf(x) - shapes.circle(0.5).sdf(x)).abs().max() < 1e-4


def test_ellipse_distance_matches_dense_boundary():
    e = shapes.ellipse(0.6, 0.35)
    t = torch.linspace(0, 2 * math.pi, 200001, dtype=torch.float64)
    boundary = torch.stack((0.6 * torch.cos(t), 0.35 * torch.sin(t)), 1)
    x = samplers.sample_disk(200, 1.0, torch.Generator().manual_seed(1), torch.float64)
    brute = torch.cdist(x, boundary).min(1).values
    assert (e.sdf(x).abs() - brute).abs().max() < 1e-6
    assert (e.sdf(torch.zeros(1, 2)) < 0).all() and (e.sdf(torch.tensor([[0.9, 0.0]])) > 0).all()


def test_sign_and_presets():
    for s in (shapes.triangle(), shapes.hexagon(), shapes.star(), shapes.circle(), shapes.rectangle()):
        assert s.sdf(torch.zeros(1, 2, dtype=torch.float64)).item() < 0
        assert s.sdf(torch.tensor([[0.99, 0.0]], dtype=torch.float64)).item() > 0
    tri = shapes.triangle()
    assert tri.group.name == "D3" and sf.reflection(0.0) in tri.group  # a vertex on the x-axis
    rot = shapes.regular_polygon(4, 0.5, rotation=math.pi / 4)  # axis-aligned square
    assert (rot.sdf(torch.tensor([[0.3535533905932738, 0.0]], dtype=torch.float64)).abs() < 1e-12).all()


def test_bad_shape_arguments():
    with pytest.raises(ValueError, match="unknown shape"):
        shapes.by_name("blob")
    with pytest.raises(ValueError, match="positive"):
        shapes.circle(-1)
    with pytest.raises(ValueError, match="vertices"):
        shapes.polygon([[0, 0], [1, 0]])
    with pytest.raises(ValueError, match="inner"):
        shapes.star(5, 0.3, 0.5)


def test_samplers():
    g = torch.Generator().manual_seed(0)
    d = samplers.sample_disk(5000, 0.8, g)
    assert d.shape == (5000, 2) and d.norm(dim=1).max() <= 0.8 + 1e-6
    assert abs(d.norm(dim=1).pow(2).mean().item() - 0.32) < 0.02  # E r^2 = R^2 / 2 when uniform
    b = samplers.sample_box(100, 0.5, g)
    assert b.abs().max() <= 0.5
    near = samplers.sample_near_surface(shapes.hexagon(), 500, sigma=0.0, generator=g, dtype=torch.float64)
    assert shapes.hexagon().sdf(near).abs().max() < 1e-9
    with pytest.raises(ValueError, match="positive"):
        samplers.sample_disk(0)
