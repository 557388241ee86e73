import math

import numpy as np
import pytest
import torch

import symfast as sf
from symfast.groups import as_element, union


def test_names_and_matrices():
    assert sf.rotation(2 * math.pi / 3).name == "r120"
    assert sf.reflection(math.pi / 6).name == "m30"
    assert sf.reflection(math.pi / 8).name == "m22.5"
    np.testing.assert_allclose(sf.rotation(math.pi / 2).matrix, [[0, -1], [1, 0]])
    np.testing.assert_allclose(sf.reflection(0).matrix, [[1, 0], [0, -1]])
    # reflection across the line at theta fixes the direction (cos theta, sin theta)
    t = 0.37
    v = np.array([math.cos(t), math.sin(t)])
    np.testing.assert_allclose(sf.reflection(t).matrix @ v, v, atol=1e-15)
    assert sf.rotation(-math.pi / 2) == sf.rotation(3 * math.pi / 2)
    assert sf.rotation(2 * math.pi).is_identity


def test_composition_inverse_equality():
    r, m = sf.rotation(math.pi / 3), sf.reflection(0.0)
    assert (r * r * r) == sf.rotation(math.pi)
    assert (m * m).is_identity
    assert (r * r.inverse()).is_identity
    assert (m * r) == sf.reflection(-math.pi / 6)  # m0 after r60 is the mirror at -30 = 150
    np.testing.assert_allclose((m * r).matrix, m.matrix @ r.matrix)
    assert sf.rotation(0.1) != sf.rotation(0.1 + 1e-6)
    assert sf.rotation(0.1) == sf.rotation(0.1 + 1e-12)
    assert len({sf.rotation(0.5), sf.rotation(0.5 + 1e-13)}) == 1


@pytest.mark.parametrize("n", [1, 2, 3, 4, 6, 7])
def test_dihedral_cyclic(n):
    d = sf.dihedral(n)
    assert len(d) == 2 * n and len(set(d)) == 2 * n and d.is_closed() and d.name == f"D{n}"
    assert sf.cyclic(n).is_closed() and len(sf.cyclic(n)) == n
    assert all(sf.reflection(math.pi * k / n) in d for k in range(n))


def test_sweep_o2_parse_and_errors():
    s = sf.rotation_sweep(360)
    assert len(s) == 360 and s[1].name == "r1"
    assert sf.rotation(1.234) in sf.orthogonal_group()
    assert as_element("m45") == sf.reflection(math.pi / 4)
    assert as_element(sf.rotation(1.0).matrix) == sf.rotation(1.0)
    assert len(union([sf.dihedral(4), sf.dihedral(6)])) == 16
    with pytest.raises(ValueError, match="parse"):
        as_element("q12")
    with pytest.raises(ValueError, match="orthogonal"):
        as_element(np.ones((2, 2)))
    with pytest.raises(ValueError, match="positive"):
        sf.dihedral(0)
    with pytest.raises(ValueError, match="finite"):
        sf.rotation(float("nan"))


def test_apply_to_points():
    x = torch.randn(5, 2, dtype=torch.float64)
    g = sf.rotation(0.3)
    np.testing.assert_allclose(g(x).numpy(), x.numpy() @ g.matrix.T)
    np.testing.assert_allclose(g(x.numpy()), x.numpy() @ g.matrix.T)
