"""`polygon(vertices)` reads its symmetry group off the vertices exactly: rotations and mirrors about
the origin at any angle, checked against the known groups and against the SDF numerically."""
import math

import numpy as np
import pytest

from symfast.groups import Group, reflection, rotation
from symfast.shapes import polygon


def _ngon(n: int, radius: float, turn: float) -> np.ndarray:
    t = turn + 2 * math.pi * np.arange(n) / n
    return radius * np.stack([np.cos(t), np.sin(t)], 1)


def _turned(v, turn: float) -> np.ndarray:
    c, s = math.cos(turn), math.sin(turn)
    return np.asarray(v, dtype=np.float64) @ np.array([[c, -s], [s, c]]).T


def _dihedral_about(n: int, mirror: float, rotations_only: bool = False) -> Group:
    """D_n (or C_n) whose mirror lines sit at mirror + pi k / n."""
    rots = [rotation(2 * math.pi * k / n) for k in range(n)]
    return Group(rots if rotations_only else rots + [reflection(mirror + math.pi * k / n) for k in range(n)])


def _same(found: Group, expected: Group) -> bool:
    return len(found) == len(expected) and all(g in found for g in expected)


def _sdf_invariant(shape, group: Group) -> bool:
    """Numerically: f(g x) = f(x) for every element (the SDF is independent of the vertex matching)."""
    return _same(shape.symmetries(group, num_points=2048), group)


@pytest.mark.parametrize("n,turn", [(3, math.radians(20)), (3, 1.0), (4, math.sqrt(2)), (5, math.pi / math.e),
                                    (6, 0.123456789)], ids=["tri20", "tri1rad", "square-sqrt2", "penta-pi/e", "hexa"])
def test_rotated_regular_polygons_get_their_full_dihedral_group(n, turn):
    shape = polygon(_ngon(n, 0.6, turn))
    expected = _dihedral_about(n, turn)  # a mirror through each vertex (and, n even, each edge midpoint)
    assert shape.group.name == f"D{n}"
    assert _same(shape.group, expected), shape.group.names
    assert _sdf_invariant(shape, expected)


def test_triangle_rotated_by_20_degrees_has_its_mirrors():
    names = set(polygon(_ngon(3, 0.6, math.radians(20))).group.names)
    assert {"m20", "m80", "m140", "r120", "r240"} <= names


def test_chiral_pinwheel_has_rotations_only():
    base = np.array([[0.6, 0.0], [0.3 * math.cos(math.radians(30)), 0.3 * math.sin(math.radians(30))]])
    v = np.concatenate([_turned(base, math.pi / 2 * k) for k in range(4)])
    for turn in (0.0, 0.7):
        shape = polygon(_turned(v, turn))
        assert shape.group.name == "C4"
        assert _same(shape.group, _dihedral_about(4, 0.0, rotations_only=True))
        # no mirror at all: not one of the 2 x 8 candidate lines through vertices
        mirrors = Group([reflection(turn + math.pi * k / 8) for k in range(8)])
        assert not any(g in shape.group for g in mirrors)
        assert shape.symmetries(mirrors, num_points=2048) == Group([])


def test_kite_has_one_mirror_at_any_angle():
    kite = np.array([[0.6, 0.0], [0.0, 0.3], [-0.4, 0.0], [0.0, -0.3]])
    for turn in (0.0, math.sqrt(3)):
        shape = polygon(_turned(kite, turn))
        assert shape.group.name == "D1" and _same(shape.group, Group([rotation(0.0), reflection(turn)]))
        assert _sdf_invariant(shape, shape.group)


def test_rectangle_has_d2_at_any_angle():
    rect = np.array([[0.6, 0.35], [-0.6, 0.35], [-0.6, -0.35], [0.6, -0.35]])
    turn = math.e / 3
    shape = polygon(_turned(rect, turn))
    assert shape.group.name == "D2" and _same(shape.group, _dihedral_about(2, turn))
    assert _sdf_invariant(shape, shape.group)


def test_random_polygons_have_the_trivial_group():
    rng = np.random.default_rng(7)
    for _ in range(20):
        t = np.sort(rng.uniform(0, 2 * math.pi, 7))
        r = rng.uniform(0.2, 0.8, 7)
        shape = polygon(np.stack([r * np.cos(t), r * np.sin(t)], 1))
        assert shape.group.name == "C1" and shape.group.names == ["r0"]


def test_a_vertex_set_symmetry_that_breaks_the_edges_is_rejected():
    # the six vertices of a regular hexagon joined in another order: r60 maps the vertex set onto
    # itself but not the edges; what remains agrees with the SDF checked numerically over D6
    from symfast.groups import dihedral

    shape = polygon(_ngon(6, 0.6, 0.0)[[0, 1, 3, 2, 4, 5]])
    assert rotation(math.pi / 3) not in shape.group and len(shape.group) < 12
    assert _same(shape.symmetries(dihedral(6), num_points=2048), shape.group), shape.group.names
