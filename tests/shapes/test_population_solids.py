"""The solid population: each prism's stated O(3) group is exactly the group its construction gives (built here
independently, from the cross-section's polygon and the prism's placement along z), its field is invariant
under that group and under nothing else among the candidates, near-symmetries move it by the planar epsilon,
the field is the exact extrusion of the cross-section to the table's error, and draws are fixed by the seed."""
import pickle

import numpy as np
import pytest
import torch

from symfast.groups import Group, o3, union
from symfast.groups.elements import O3Element
from symfast.shapes import Shape, polygon
from symfast.shapes import population as pop
from symfast.shapes import population_solids as ps
from symfast.shapes.samplers import sample_ball

SEED = 3
MEMBERS = 24


@pytest.fixture(scope="module")
def draws():
    return [ps.draw_solid(SEED, i) for i in range(MEMBERS)]


def _points(n=4096, seed=0):
    return sample_ball(n, 1.0, torch.Generator().manual_seed(seed), torch.float64)


def _same(a: Group, b: Group) -> bool:
    return len(a) == len(b) and all(g in a for g in b)


def _expected_group(d) -> Group:
    """The prism's group from first principles: an orthogonal map of a prism with a non-circular cross-section
    keeps the z axis, so it is (planar part A, z sign s) with A in the cross-section's polygon group and
    s = -1 allowed only when the prism is centred (offset 0)."""
    planar = polygon(d.planar.vertices).group  # read off the vertices, not the stated group
    signs = (1.0, -1.0) if d.offset == 0 else (1.0,)
    mats = []
    for g in planar:
        for s in signs:
            m = np.zeros((3, 3))
            m[:2, :2], m[2, 2] = g.matrix, s
            mats.append(O3Element.from_matrix(m))
    return Group(mats)


def _extruded_exact(d, x):
    """The exact SDF of the prism: the exact polygon SDF extruded (not the table)."""
    sec = polygon(d.planar.vertices).sdf(x[..., :2])
    w = (x[..., 2] - d.offset).abs() - d.half_height
    outside = torch.stack([sec.clamp(min=0), w.clamp(min=0)], -1).norm(dim=-1)
    return torch.maximum(sec, w).clamp(max=0) + outside


def test_every_family_is_drawn_and_placed_as_stated():
    kinds = {}
    for i in range(200):
        d = ps.draw_solid(0, i)
        kinds.setdefault(d.kind, []).append(d.offset)
        assert ps.HALF_HEIGHTS[0] <= d.half_height <= ps.HALF_HEIGHTS[1]
        assert d.offset == 0 or ps.OFFSETS[0] <= d.offset <= ps.OFFSETS[1]
        assert (d.kind, d.n, d.epsilon) == (pop.draw(0, i).kind, pop.draw(0, i).n, pop.draw(0, i).epsilon)
    assert set(kinds) == set(pop.KINDS)
    assert all(o > 0 for o in kinds["asymmetric"])  # an asymmetric cross-section on a shifted prism: group {e}
    for k in ("dihedral", "cyclic", "near"):  # both placements occur in every other family
        assert 0 < sum(o == 0 for o in kinds[k]) < len(kinds[k])


def test_stated_group_is_the_prisms_group(draws):
    for d in draws:
        assert _same(d.group, _expected_group(d)), (d.index, d.kind, d.group.names)
        assert d.group.is_closed() and all(g in d.base_group for g in d.group)
        assert d.group.dim == 3
        centred = d.offset == 0
        assert (o3.reflection([0, 0, 1]) in d.group) == centred
        dihedral = any(g.kind == "reflection" for g in d.planar.group)
        n = 1 if d.kind == "near" else d.n
        want = (f"D{n}h" if dihedral else f"C{n}h") if centred else (f"C{n}v" if dihedral else f"C{n}")
        assert d.group.name == want, (d.group.name, want)
    assert any(g.kind == "inversion" for d in draws for g in d.group)
    assert any(g.kind == "rotoreflection" for d in draws for g in d.group)


def test_field_is_invariant_under_the_group_and_moved_by_every_other_candidate(draws):
    """On the field that is trained: every stated element leaves it unchanged to rounding; every other
    element of O_h, I_h and the base group (its near-symmetries moved by at most about 2 epsilon) moves it."""
    x = _points()
    for d in draws[:10]:
        s = ps.solid_shape(SEED, d.index)
        f = s.sdf(x)
        for g in union([d.base_group, o3.octahedral(), o3.icosahedral()]):
            err = (s.sdf(g.inverse()(x)) - f).abs().max().item()
            if g in d.group:
                assert err < 1e-9, (d.index, g.name, err)
            elif g in d.base_group:
                assert 1e-4 < err < 2.2 * d.epsilon + 2 * pop.TABLE_ERROR, (d.index, g.name, err, d.epsilon)
            else:
                assert err > 1e-3, (d.index, d.kind, g.name, err)


def test_field_is_the_exact_extrusion_to_the_tables_error(draws):
    x = _points(20000, 2)
    for d in draws[:4]:
        err = (ps.solid_shape(SEED, d.index).sdf(x) - _extruded_exact(d, x)).abs()
        assert err.max().item() < pop.TABLE_ERROR and err.mean().item() < 1e-4
    d = draws[0]
    above = torch.tensor([[0.0, 0.0, d.offset + d.half_height + 0.1]], dtype=torch.float64)
    assert ps.solid_shape(SEED, 0).sdf(above).item() == pytest.approx(0.1, abs=1e-12)  # straight above the top


def test_near_symmetries_move_the_solid_by_the_planar_epsilon():
    near = [d for d in (ps.draw_solid(SEED, i) for i in range(200)) if d.kind == "near"][:4]
    assert near
    x = _points(8192, 1)
    for d in near:
        exact = _extruded_exact(d, x)
        moved = [(_extruded_exact(d, g.inverse()(x)) - exact).abs().max().item()
                 for g in d.base_group if g not in d.group]
        assert moved and max(moved) <= 2 * d.epsilon * (1 + 1e-9), (d.index, moved, d.epsilon)
        assert min(moved) > 0.2 * d.epsilon


def test_draws_are_fixed_by_the_seed_and_the_planar_population_is_unchanged():
    a, b = ps.draw_solid(7, 5), ps.draw_solid(7, 5)
    assert (a.half_height, a.offset, a.group.names) == (b.half_height, b.offset, b.group.names)
    assert a.planar == pop.draw(7, 5) and a.name == "solid7-5"
    assert [ps.draw_solid(8, i).half_height for i in range(5)] != [ps.draw_solid(7, i).half_height for i in range(5)]


def test_solids_save_and_pickle_through_their_recipe():
    s = ps.solid_shape(2, 9)
    x = _points(256)
    for back in (Shape.from_dict(s.to_dict()), pickle.loads(pickle.dumps(s))):
        assert back.name == s.name and back.dim == 3 and _same(back.group, s.group)
        assert torch.equal(back.sdf(x), s.sdf(x))
    assert s.to_dict()["params"] == {"kind": "population_solid", "seed": 2, "index": 9}
    assert s.sdf(x.float()).dtype == torch.float32


def test_bad_seed_or_index():
    with pytest.raises(ValueError, match="seed"):
        ps.draw_solid(-1, 0)
    with pytest.raises(ValueError, match="index"):
        ps.solid_shape(0, -3)
