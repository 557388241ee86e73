import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import symfast as sf
from symfast.groups import Group, as_element, union

o3 = sf.o3

FINITE = {
    "Oh": (o3.octahedral, 48), "Td": (o3.tetrahedral, 24), "Ih": (o3.icosahedral, 120),
    "O": (lambda: o3.octahedral(proper=True), 24), "T": (lambda: o3.tetrahedral(proper=True), 12),
    "I": (lambda: o3.icosahedral(proper=True), 60),
    "D1h": (lambda: o3.dihedral(1), 4), "D4h": (lambda: o3.dihedral(4), 16), "D5h": (lambda: o3.dihedral(5), 20),
    "D6h": (lambda: o3.dihedral(6), 24), "C3": (lambda: o3.cyclic(3, (1, 1, 1)), 3),
    "C7": (lambda: o3.cyclic(7), 7),
}
_CACHE = {}


def group(name):
    if name not in _CACHE:
        _CACHE[name] = FINITE[name][0]()
    return _CACHE[name]


axes = st.tuples(*[st.floats(-1, 1, allow_nan=False)] * 3).filter(lambda v: np.linalg.norm(v) > 1e-3)
angles = st.floats(-10, 10, allow_nan=False)


@st.composite
def elements(draw):
    g = o3.rotation(draw(axes), draw(angles))
    if draw(st.booleans()):
        g = o3.reflection(draw(axes)) * g
    return g


def test_names_and_matrices():
    assert o3.identity().name == "e" and o3.identity().is_identity
    assert o3.inversion().name == "i"
    assert o3.rotation((1, 1, 1), 2 * math.pi / 3).name == "r120[1,1,1]"
    assert o3.rotation((-1, -1, -1), 2 * math.pi / 3).name == "r240[1,1,1]"  # same element, canonical axis
    assert o3.rotation((0, 0, 2), math.pi / 2).name == "r90[0,0,1]"
    assert o3.reflection((0, 0, -3)).name == "m[0,0,1]"
    assert o3.reflection((1, -1, 0)).name == "m[1,-1,0]"
    assert o3.rotoreflection((0, 0, 1), math.pi / 2).name == "s90[0,0,1]"
    assert o3.rotation((1, 2, 0), 1.0).name.endswith("[1,2,0]")
    # exact entries: quarter turns are signed permutations, 120 degrees about a diagonal permutes axes
    np.testing.assert_array_equal(o3.rotation((0, 0, 1), math.pi / 2).matrix, [[0, -1, 0], [1, 0, 0], [0, 0, 1]])
    np.testing.assert_array_equal(o3.rotation((1, 1, 1), 2 * math.pi / 3).matrix,
                                  [[0, 0, 1], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(o3.reflection((0, 0, 1)).matrix, np.diag([1.0, 1, -1]))
    assert o3.rotation((0, 0, 1), math.pi / 3).matrix[0, 0] == 0.5  # snapped to the exact value
    assert o3.rotation((0, 0, 1), 0.3).det == 1.0 and o3.reflection((1, 2, 3)).det == -1.0
    with pytest.raises(ValueError):
        o3.rotation((0, 0, 1), math.pi).matrix[0, 0] = 2.0  # read-only
    # right-handed: a quarter turn about z takes x to y
    np.testing.assert_allclose(o3.rotation((0, 0, 1), math.pi / 2)(np.array([1.0, 0, 0])), [0, 1, 0])


def test_apply_numpy_and_torch():
    g = o3.rotation((1, 2, 3), 0.7) * o3.reflection((0, 1, 0))
    x = torch.randn(4, 5, 3, dtype=torch.float64)
    np.testing.assert_allclose(g(x).numpy(), x.numpy() @ g.matrix.T)
    np.testing.assert_allclose(g(x.numpy()), x.numpy() @ g.matrix.T)
    assert g(x.float()).dtype == torch.float32
    with pytest.raises(ValueError, match=r"\[\.\.\., 3\]"):
        g(torch.zeros(4, 2))


def test_errors():
    with pytest.raises(ValueError, match="orthogonal"):
        o3.O3Element.from_matrix(np.ones((3, 3)))
    with pytest.raises(ValueError, match="orthogonal"):
        o3.O3Element.from_matrix(np.eye(3) * 1.01)
    with pytest.raises(ValueError, match="orthogonal"):
        o3.O3Element.from_matrix(np.eye(2))
    with pytest.raises(ValueError, match="orthogonal"):
        o3.O3Element.from_matrix(np.full((3, 3), np.nan))
    with pytest.raises(ValueError, match="non-zero"):
        o3.rotation((0, 0, 0), 1.0)
    with pytest.raises(ValueError, match="non-zero"):
        o3.reflection((0, 0, 0))
    with pytest.raises(ValueError, match="finite"):
        o3.rotation((0, 0, 1), float("inf"))
    with pytest.raises(ValueError, match="positive"):
        o3.dihedral(0)
    with pytest.raises(ValueError, match="positive"):
        o3.rotation_sweep((0, 0, 1), 0)
    with pytest.raises(ValueError, match="parse"):
        as_element("r120[1,1]")
    with pytest.raises(ValueError, match="parse"):
        as_element("m90[0,0,1]")
    with pytest.raises(ValueError, match="more than"):
        o3.closure([o3.rotation((0, 0, 1), 1.0)], "irrational", max_order=50)
    with pytest.raises(ValueError, match="mixes"):
        Group([sf.rotation(0.5), o3.identity()])


@pytest.mark.parametrize("name", list(FINITE))
def test_finite_groups(name):
    g = group(name)
    assert len(g) == FINITE[name][1] and len(set(g)) == len(g)
    assert g.is_closed() and g.dim == 3 and g[0].is_identity
    assert len(set(g.names)) == len(g), "names must be unique within a group"
    for n, e in zip(g.names, g):  # names parse back: exactly with integer axes and degrees, else to 4 digits
        assert as_element(n) == e if "." not in n else np.allclose(as_element(n).matrix, e.matrix, atol=2e-3)
    for e in g:
        np.testing.assert_allclose(e.matrix.T @ e.matrix, np.eye(3), rtol=0, atol=1e-12)
    dets = sorted({e.det for e in g})
    assert dets == ([1.0] if name in ("O", "T", "I", "C3", "C7") else [-1.0, 1.0])
    back = Group.from_dict(json.loads(json.dumps(g.to_dict())))
    assert back.name == g.name and list(back) == list(g) and back.names == g.names


def test_group_axes_convention():
    oh, td, ih = group("Oh"), group("Td"), group("Ih")
    assert {"r90[1,0,0]", "r90[0,1,0]", "r90[0,0,1]", "r120[1,1,1]", "i", "m[1,-1,0]"} <= set(oh.names)
    assert {"r180[1,0,0]", "m[1,-1,0]", "s90[0,0,1]"} <= set(td.names) and "i" not in td
    assert "r90[0,0,1]" not in td
    assert {"r180[1,0,0]", "r120[1,1,1]", "i", "m[0,0,1]"} <= set(ih.names)
    assert o3.rotation((0, 1, o3.PHI), 2 * math.pi / 5) in ih and o3.rotation((0, 0, 1), math.pi / 2) not in ih
    # subgroup relations
    assert all(g in oh for g in td) and all(g in oh for g in o3.dihedral(4)) and all(g in ih for g in o3.dihedral(2))
    assert o3.rotations_only(oh).name == "O" and o3.rotations_only(o3.dihedral(4)).name == "D4"
    assert len(union([oh, ih])) == 48 + 120 - 24  # they share T_h (24 elements)
    assert {g.name for g in o3.dihedral(2)} == {"e", "i", "r180[1,0,0]", "r180[0,1,0]", "r180[0,0,1]",
                                               "m[1,0,0]", "m[0,1,0]", "m[0,0,1]"}


def test_sweep_cyclic_and_continuous():
    s = o3.rotation_sweep((1, 1, 1), 360)
    assert len(s) == 360 and s[1] == o3.rotation((1, 1, 1), math.radians(1)) and s.name == "sweep360[1,1,1]"
    assert o3.cyclic(4, (1, 0, 0)).is_closed()
    assert o3.reflection((1, 2, 3)) in o3.orthogonal_group() and sf.rotation(0.3) not in o3.orthogonal_group()
    cyl = o3.cylindrical_group()
    assert cyl.dim == 3 and o3.rotation((0, 0, 1), 0.123) in cyl and o3.reflection((0, 0, 1)) in cyl
    assert o3.reflection((1, 1, 0)) in cyl and o3.rotation((1, 0, 0), math.pi) in cyl
    assert o3.rotation((1, 0, 0), math.pi / 2) not in cyl
    assert Group.from_dict(cyl.to_dict()).dim == 3
    # 2D behaviour is unchanged
    assert sf.rotation(1.0) in sf.orthogonal_group() and sf.orthogonal_group().dim == 2 and sf.dihedral(3).dim == 2
    assert as_element(np.eye(3)) == o3.identity() and as_element(np.eye(2)) == sf.identity()


@settings(max_examples=60, deadline=None)
@given(elements(), elements(), elements())
def test_group_axioms(a, b, c):
    for g in (a, b, c, a * b):
        np.testing.assert_allclose(g.matrix.T @ g.matrix, np.eye(3), rtol=0, atol=1e-12)
        assert abs(abs(np.linalg.det(g.matrix)) - 1) < 1e-12 and g.det == np.sign(np.linalg.det(g.matrix))
    assert (a * b) * c == a * (b * c)
    assert (a * a.inverse()).is_identity and (a.inverse() * a).is_identity
    np.testing.assert_allclose((a * b).matrix, a.matrix @ b.matrix, atol=1e-12)
    assert (a * b).det == a.det * b.det
    assert o3.O3Element(a.matrix + 1e-13) == a and o3.O3Element(a.matrix + 1e-13 * np.eye(3)[0]) in Group([a])
    # the name describes the element: it parses back to the same matrix (4-digit axes: to ~1e-3)
    np.testing.assert_allclose(as_element(a.name).matrix, a.matrix, atol=2e-3)


@settings(max_examples=60, deadline=None)
@given(axes, angles)
def test_rotation_fixes_axis_and_matches_rodrigues(axis, angle):
    g = o3.rotation(axis, angle)
    n = np.asarray(axis) / np.linalg.norm(axis)
    np.testing.assert_allclose(g(n), n, atol=1e-12)
    np.testing.assert_allclose(np.trace(g.matrix), 1 + 2 * math.cos(angle), atol=1e-12)
    m = o3.reflection(axis)
    np.testing.assert_allclose(m(n), -n, atol=1e-12)
    assert (m * m).is_identity


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(-2, 2, allow_nan=False), min_size=9, max_size=9), st.floats(1e-6, 1.0))
def test_from_matrix_rejects_non_orthogonal(entries, eps):
    q = np.linalg.qr(np.asarray(entries).reshape(3, 3) + 3 * np.eye(3))[0]
    assert o3.O3Element.from_matrix(q) == o3.O3Element.from_matrix(q + 1e-12)
    bad = q.copy()
    bad[0] *= 1 + eps
    with pytest.raises(ValueError, match="orthogonal"):
        o3.O3Element.from_matrix(bad)
