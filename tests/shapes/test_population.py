"""The shape population: every member's stated group holds exactly (read back off the polygon's vertices,
and numerically on the SDF), nothing outside it holds for these draws, near-symmetries have the stated
size, the interpolated SDF is within its stated error of the exact one, and draws are fixed by the seed."""
import math
import pickle

import numpy as np
import pytest
import torch

from symfast.groups import Group, dihedral, reflection, rotation, union
from symfast.shapes import Shape, polygon
from symfast.shapes import population as pop
from symfast.shapes.samplers import sample_disk

SEED = 3
MEMBERS = 40


@pytest.fixture(scope="module")
def draws():
    return [pop.draw(SEED, i) for i in range(MEMBERS)]


def _same(a: Group, b: Group) -> bool:
    return len(a) == len(b) and all(g in a for g in b)


def _points(n=4096, seed=0):
    return sample_disk(n, 1.0, torch.Generator().manual_seed(seed), torch.float64)


def test_every_kind_and_order_is_drawn():
    rows = pop.describe(0, 400)
    assert set(rows["kind"]) == set(pop.KINDS)
    assert set(rows.loc[rows["kind"] == "dihedral", "n"]) == set(range(1, pop.MAX_N + 1))
    assert set(rows.loc[rows["kind"] == "cyclic", "n"]) == set(range(2, pop.MAX_N + 1))
    assert set(rows.loc[rows["kind"] == "near", "epsilon"]) == set(pop.EPSILONS)
    assert (rows.loc[rows["kind"] != "near", "epsilon"] == 0).all()


def test_stated_group_is_exactly_the_polygons_group(draws):
    """The polygon's group read off its vertices (every rotation and mirror about the origin, any angle)
    equals the stated one: the stated elements hold and no other element of O(2) does."""
    for d in draws:
        found = polygon(d.vertices).group
        assert _same(found, d.group), (d.index, d.kind, d.n, found.names, d.group.names)
        assert d.group.is_closed()
        assert all(g in d.base_group for g in d.group)


def test_sdf_is_invariant_under_the_group_and_not_under_other_candidates(draws):
    """Numerically on the field used for training (the interpolated table): f(g^-1 x) = f(x) to rounding
    for the group's elements; every other candidate of D_n, D_2n, D4, D6 and D12 moves f by far more."""
    x = _points()
    for d in draws[:12]:
        s = pop.population_shape(SEED, d.index)
        f = s.sdf(x)
        cands = union([d.base_group, dihedral(4), dihedral(6), dihedral(12),
                       Group([rotation(math.pi / d.n), reflection(d.rotation + math.pi / (2 * d.n))])])
        for g in cands:
            err = (s.sdf(g.inverse()(x)) - f).abs().max().item()
            if g in d.group:
                assert err < 1e-9, (d.index, g.name, err)
            elif g in d.base_group:  # a near-symmetry: moved by at most about 2 epsilon
                assert 1e-4 < err < 2.2 * d.epsilon + 2 * pop.TABLE_ERROR, (d.index, g.name, err, d.epsilon)
            else:
                assert err > 1e-3, (d.index, d.kind, g.name, err)


def test_near_symmetry_size_is_the_largest_radial_displacement():
    near = [d for d in (pop.draw(SEED, i) for i in range(200)) if d.kind == "near"][:6]
    assert near
    x = _points(8192, 1)
    for d in near:
        radii = np.asarray(d.radii)
        # the base profile: the radii averaged over the base's n rotations (the perturbation has no harmonic
        # that is a multiple of n, so the average removes it exactly)
        m, shift = len(radii), len(radii) // d.n
        base_r = np.mean([np.roll(radii, k * shift) for k in range(d.n)], axis=0)
        assert np.abs(radii - base_r).max() == pytest.approx(d.epsilon, rel=1e-9)
        t = d.rotation + 2 * math.pi * np.arange(m) / m
        base_poly = polygon(np.stack([base_r * np.cos(t), base_r * np.sin(t)], 1))
        assert _same(base_poly.group, d.base_group)  # the perturbation is all that breaks the base group
        diff = (d.polygon().sdf(x) - base_poly.sdf(x)).abs().max().item()
        assert 0.3 * d.epsilon < diff <= d.epsilon * (1 + 1e-9), (d.index, diff, d.epsilon)


def test_table_is_within_its_stated_error_of_the_exact_sdf(draws):
    x = _points(20000, 2)
    for d in draws[:6]:
        err = (pop.population_shape(SEED, d.index).sdf(x) - d.polygon().sdf(x)).abs()
        assert err.max().item() < pop.TABLE_ERROR
        assert err.mean().item() < 1e-4
    far = torch.tensor([[1.6, 0.3], [-2.0, -1.0]], dtype=torch.float64)  # beyond the table: exact
    d = draws[0]
    assert torch.equal(pop.population_shape(SEED, 0).sdf(far), d.polygon().sdf(far))


def _bilinear_reference(table: torch.Tensor, rot: float, x: torch.Tensor) -> torch.Tensor:
    """The polar table's interpolant written plainly: float64, modulo for the angle, a 2D gather."""
    radii, angles = table.shape
    rho = torch.hypot(x[..., 0], x[..., 1])
    u = torch.remainder((torch.atan2(x[..., 1], x[..., 0]) - rot) * (angles / (2 * math.pi)), angles)
    j0 = u.floor().clamp(max=angles - 1)
    a, j0 = u - j0, j0.long()
    j1 = (j0 + 1) % angles
    v = (rho * ((radii - 1) / pop.RHO_MAX)).clamp(max=radii - 1)
    i0 = v.floor().clamp(max=radii - 2)
    b, i0 = v - i0, i0.long()
    return ((1 - b) * ((1 - a) * table[i0, j0] + a * table[i0, j1])
            + b * ((1 - a) * table[i0 + 1, j0] + a * table[i0 + 1, j1]))


def test_table_lookup_matches_the_plain_bilinear_reference(draws):
    """float64 points: the reference to 1e-12, on random points and on the edges (grid nodes, the angle
    seam at the table's rotation from both sides, the last radius); float32 points: the float64 values
    to float32 rounding."""
    for d in draws[:8]:
        f = pop.polar_table(d)
        theta = torch.tensor([0.0, 1e-12, -1e-12, math.pi, -math.pi, 2 * math.pi / f.angles, 1.0]) + d.rotation
        rho = torch.tensor([0.0, 0.3, pop.RHO_MAX * (1 - 1e-12), pop.RHO_MAX, 1.0, 0.5, 0.77], dtype=torch.float64)
        edges = torch.stack([rho * torch.cos(theta.double()), rho * torch.sin(theta.double())], -1)
        x = torch.cat([_points(4000, d.index), edges])
        fx = f(x)  # builds the table
        assert (fx - _bilinear_reference(f.table, d.rotation, x)).abs().max().item() < 1e-12, d.index
        x32 = x.float()
        assert (f(x32).double() - _bilinear_reference(f.table, d.rotation, x32.double())).abs().max().item() < 1e-5


def test_draws_are_fixed_by_the_seed_and_prefix_stable():
    a = pop.describe(7, 30)
    assert a.equals(pop.describe(7, 30))
    assert a.iloc[:10].equals(pop.describe(7, 10))
    assert not a.equals(pop.describe(8, 30))
    assert pop.draw(7, 5).radii == pop.draw(7, 5).radii
    assert [s.name for s in pop.population(7, 4)] == [f"pop7-{i}" for i in range(4)]


def test_shapes_save_and_pickle_through_their_recipe():
    s = pop.population_shape(2, 9)
    x = _points(256)
    for back in (Shape.from_dict(s.to_dict()), pickle.loads(pickle.dumps(s))):
        assert back.name == s.name and _same(back.group, s.group)
        assert torch.equal(back.sdf(x), s.sdf(x))
    assert s.to_dict()["params"] == {"kind": "population", "seed": 2, "index": 9}
    assert s.sdf(x.float()).dtype == torch.float32


@pytest.mark.parametrize("args,match", [((-1, 0), "seed"), ((0, -1), "index"), ((1.5, 0), "seed must be an integer"),
                                        ((True, 0), "seed must be an integer")])
def test_bad_seed_or_index(args, match):
    with pytest.raises(ValueError, match=match):
        pop.draw(*args)
    with pytest.raises(ValueError, match="size"):
        pop.population(0, 0)
