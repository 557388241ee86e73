import math
import sys

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import symfast as sf
import symfast.shapes as shapes
from symfast.shapes import meshes, samplers, solids
from symfast.groups import Group, union

o3 = sf.o3
# The candidates every solid is checked against: O_h, I_h (sharing T_h), D_5h, D_6h and a sweep of
# rotations about an axis no solid has (7 steps: only the identity is a symmetry).
CANDIDATES = union([o3.octahedral(), o3.icosahedral(), o3.dihedral(5), o3.dihedral(6),
                    o3.rotation_sweep((1, 2, 3), 7)])
POLYHEDRA = ("tetrahedron", "octahedron", "icosahedron", "dodecahedron")
EXPECTED_GROUP = {"sphere": "O(3)", "box": "D2h", "cube": "Oh", "tetrahedron": "Td", "octahedron": "Oh",
                  "icosahedron": "Ih", "dodecahedron": "Ih", "cylinder": "Dinfh", "torus": "Dinfh"}


def points(n, seed=0, radius=1.0):
    return samplers.sample_ball(n, radius, torch.Generator().manual_seed(seed), torch.float64)


def test_names_and_dims():
    assert set(shapes.NAMES_3D) == set(EXPECTED_GROUP)
    assert all(shapes.by_name(n).dim == 2 for n in shapes.NAMES)
    assert all(shapes.by_name(n).dim == 3 for n in shapes.NAMES_3D)
    assert sf.shapes.cube().name == "cube" and sf.shapes.icosahedron().group.name == "Ih"


@pytest.mark.parametrize("name", list(EXPECTED_GROUP))
def test_symmetries_agree_with_declared_group(name):
    s = shapes.by_name(name)
    assert s.group.name == EXPECTED_GROUP[name] and s.group.dim == 3
    found = set(s.symmetries(CANDIDATES, num_points=512))
    declared = {g for g in CANDIDATES if g in s.group}
    assert found == declared, (name, sorted(g.name for g in found ^ declared))
    if name != "sphere":  # non-symmetries are rejected
        assert len(found) < len(CANDIDATES) and o3.rotation((1, 2, 3), 2 * math.pi / 7) not in found
    if not s.group.continuous:  # the declared finite group is the matching sf.o3 group, all of it
        assert set(s.group) <= set(CANDIDATES) and len(found) == len(s.group)


def test_box_groups_follow_equal_sides():
    assert shapes.box(0.6, 0.4, 0.25).group.name == "D2h" and set(shapes.box().group) == set(o3.dihedral(2))
    d4z = shapes.box(0.5, 0.5, 0.3).group
    assert d4z.name == "D4h" and set(d4z) == set(o3.dihedral(4))
    d4x = shapes.box(0.3, 0.5, 0.5).group
    assert d4x.name == "D4h" and o3.rotation((1, 0, 0), math.pi / 2) in d4x and o3.rotation((0, 0, 1), math.pi / 2) \
        not in d4x
    assert set(shapes.box(0.5, 0.5, 0.5).group) == set(o3.octahedral())
    # the declared group is what the field shows
    s = shapes.box(0.3, 0.5, 0.5)
    assert set(s.symmetries(o3.octahedral(), num_points=1024)) == set(d4x)


def _closest_on_triangle(p, a, b, c):
    """Closest point of triangle abc to p (Ericson, Real-Time Collision Detection, 5.1.5), scalar numpy."""
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = ab @ ap, ac @ ap
    if d1 <= 0 and d2 <= 0:
        return a
    bp = p - b
    d3, d4 = ab @ bp, ac @ bp
    if d3 >= 0 and d4 <= d3:
        return b
    vc = d1 * d4 - d3 * d2
    if vc <= 0 and d1 >= 0 and d3 <= 0:
        return a + d1 / (d1 - d3) * ab
    cp = p - c
    d5, d6 = ab @ cp, ac @ cp
    if d6 >= 0 and d5 <= d6:
        return c
    vb = d5 * d2 - d1 * d6
    if vb <= 0 and d2 >= 0 and d6 <= 0:
        return a + d2 / (d2 - d6) * ac
    va = d3 * d6 - d5 * d4
    if va <= 0 and d4 - d3 >= 0 and d5 - d6 >= 0:
        return b + (d4 - d3) / ((d4 - d3) + (d5 - d6)) * (c - b)
    denom = 1 / (va + vb + vc)
    return a + ab * vb * denom + ac * vc * denom


def brute_sdf(x, vertices):
    """Reference: min over hull triangles of the scalar closest-point distance, signed by Delaunay
    containment (no code shared with symfast.shapes.solids)."""
    from scipy.spatial import ConvexHull, Delaunay

    tri = vertices[ConvexHull(vertices).simplices]
    dist = np.array([min(np.linalg.norm(p - _closest_on_triangle(p, *t)) for t in tri) for p in x])
    inside = Delaunay(vertices).find_simplex(x) >= 0
    return np.where(inside, -dist, dist)


@pytest.mark.parametrize("name", POLYHEDRA + ("cube",))
def test_polyhedron_sdf_is_exact(name):
    s = shapes.by_name(name)
    x = torch.cat([points(150, seed=1), points(50, seed=2, radius=0.3)])  # outside and inside points
    if name == "cube":
        v = np.array([[i, j, k] for i in (-0.5, 0.5) for j in (-0.5, 0.5) for k in (-0.5, 0.5)])
    else:
        v = {  # the vertices of the docstrings, written out independently
            "tetrahedron": np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1.0]]),
            "octahedron": np.vstack([np.eye(3), -np.eye(3)]),
            "icosahedron": _perms_signs((0, 1, o3.PHI)),
            "dodecahedron": np.array([*_perms_signs((1, 1, 1)), *_perms_signs((0, o3.PHI, 1 / o3.PHI))])}[name]
        v = v * (0.6 / np.linalg.norm(v[0]))
    ref = brute_sdf(x.numpy(), v)
    got = s.sdf(x)
    assert np.abs(got.numpy() - ref).max() < 1e-12, name
    assert (got > 0).any() and (got < 0).any()


def _perms_signs(r):
    out = []
    for k in range(3):
        rr = r[k:] + r[:k]
        for sx in (1, -1):
            for sy in (1, -1):
                for sz in (1, -1):
                    out.append((sx * rr[0], sy * rr[1], sz * rr[2]))
    return np.unique(np.array(out, dtype=np.float64), axis=0)


def test_max_over_planes_is_not_the_distance_outside():
    s = shapes.cube(0.5)
    corner = torch.tensor([[0.8, 0.8, 0.8]], dtype=torch.float64)
    assert abs(s.sdf(corner).item() - math.sqrt(3) * 0.3) < 1e-15  # the plane bound would say 0.3
    poly = shapes.polyhedron([[i, j, k] for i in (-0.5, 0.5) for j in (-0.5, 0.5) for k in (-0.5, 0.5)])
    x = points(500, seed=3)
    assert (poly.sdf(x) - s.sdf(x)).abs().max() < 1e-12
    assert poly.group is None and set(poly.symmetries(o3.octahedral(), num_points=512)) == set(o3.octahedral())


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["tetrahedron", "dodecahedron", "cube", "cylinder", "torus", "sphere", "box"]),
       st.integers(0, 2 ** 31 - 1))
def test_eikonal(name, seed):
    """An exact SDF has unit gradient almost everywhere."""
    s = shapes.by_name(name)
    x = points(64, seed=seed).requires_grad_(True)
    (g,) = torch.autograd.grad(s.sdf(x).sum(), x)
    assert (g.norm(dim=-1) - 1).abs().max() < 1e-9


def test_cylinder_and_torus_values():
    c = shapes.cylinder(0.4, 0.5)
    t = torch.tensor([[0, 0, 0], [1.4, 0, 0], [0.7, 0, 0.9], [0, 0.3, 0.6]], dtype=torch.float64)
    torch.testing.assert_close(c.sdf(t), torch.tensor([-0.4, 1.0, 0.5, 0.1], dtype=torch.float64))
    tor = shapes.torus(0.5, 0.2)
    torch.testing.assert_close(tor.sdf(t), torch.tensor([0.3, 0.7, math.hypot(0.2, 0.9) - 0.2,
                                                         math.hypot(0.2, 0.6) - 0.2], dtype=torch.float64))


@pytest.mark.parametrize("name", list(EXPECTED_GROUP))
def test_round_trip(name):
    s = shapes.by_name(name)
    back = shapes.Shape.from_dict(s.to_dict())
    x = points(100, seed=4)
    assert back.dim == 3 and back.name == s.name and back.group.name == s.group.name
    assert set(back.group) == set(s.group) and (back.sdf(x) - s.sdf(x)).abs().max() == 0


def test_errors():
    with pytest.raises(ValueError, match=r"\[\.\.\., 3\]"):
        shapes.cube().sdf(torch.zeros(4, 2))
    with pytest.raises(ValueError, match=r"\[\.\.\., 2\]"):
        shapes.square().sdf(torch.zeros(4, 3))
    with pytest.raises(ValueError, match="3D"):
        shapes.cube().symmetries(sf.dihedral(4))
    with pytest.raises(ValueError, match="3D"):
        shapes.Shape("x", lambda x: x.norm(dim=-1), o3.octahedral())  # 2D shape with a 3D group
    with pytest.raises(ValueError, match="coplanar"):
        shapes.polyhedron([[0, 0, 0], [1, 0, 0], [0, 1, 0], [1, 1, 0]])
    with pytest.raises(ValueError, match="tube"):
        shapes.torus(0.2, 0.3)
    with pytest.raises(ValueError, match="positive"):
        shapes.box(0.5, -1, 0.5)
    with pytest.raises(ValueError, match="unknown shape.*icosahedron"):
        shapes.by_name("blob")


# --- meshes (need the optional trimesh) ---

def test_mesh_box_matches_exact_box():
    trimesh = pytest.importorskip("trimesh")
    m = shapes.mesh(trimesh.creation.box(extents=(1.2, 0.8, 0.5)), normalize=False)
    exact = shapes.box(0.6, 0.4, 0.25)
    x = points(3000, seed=5)
    assert m.dim == 3 and m.name == "mesh" and m.group is None
    assert (m.sdf(x) - exact.sdf(x)).abs().max() < 1e-12
    assert set(m.symmetries(o3.octahedral(), num_points=1024)) == set(exact.group)
    # normalising moves the volume centroid to the origin and scales the circumradius to 0.6
    moved = trimesh.creation.box(extents=(1.2, 0.8, 0.5))
    moved.apply_translation((0.3, -0.2, 0.1))
    n = shapes.mesh(moved, name="moved")
    scale = 0.6 / math.sqrt(0.6 ** 2 + 0.4 ** 2 + 0.25 ** 2)
    assert n.name == "moved" and (n.sdf(x) - scale * exact.sdf(x / scale)).abs().max() < 1e-12


def test_mesh_against_trimesh_reference(tmp_path):
    trimesh = pytest.importorskip("trimesh")
    pytest.importorskip("rtree")  # trimesh.proximity needs it
    ico = trimesh.creation.icosphere(subdivisions=1, radius=0.6)
    ico.apply_transform(trimesh.transformations.rotation_matrix(0.3, (1, 2, 3)))
    path = tmp_path / "ball.stl"
    ico.export(path)
    s = shapes.mesh(str(path), normalize=False)
    assert s.name == "ball"
    x = points(400, seed=6)
    ref = -trimesh.proximity.signed_distance(trimesh.load(path), x.numpy())  # trimesh: positive inside
    assert np.abs(s.sdf(x).numpy() - ref).max() < 1e-9
    # a saved mesh shape rebuilds from its recipe without the file
    back = shapes.Shape.from_dict(s.to_dict())
    assert (back.sdf(x) - s.sdf(x)).abs().max() == 0 and back.dim == 3


def test_mesh_sign_and_culling_against_references():
    trimesh = pytest.importorskip("trimesh")
    m = trimesh.creation.torus(0.5, 0.2, major_sections=24, minor_sections=12)  # not convex; 576 faces
    s = shapes.mesh(m, normalize=False)
    x = torch.cat([points(1500, seed=8), samplers.sample_near_surface(shapes.torus(0.5, 0.2), 500, sigma=0.01,
                                                                        generator=torch.Generator().manual_seed(9),
                                                                        dtype=torch.float64)])
    tri = torch.as_tensor(np.asarray(m.vertices)[m.faces])
    got = s.sdf(x)
    # sign: the pseudonormal test against the generalised winding number
    assert torch.equal(got < 0, meshes.winding_number(x, tri).abs() > 0.5)
    # distance: the culled search against all pairs (the brute-force minimum)
    brute = torch.stack([meshes._point_triangle(x, *tri[t]) for t in range(len(tri))]).min(0).values
    assert (got.abs() - brute).abs().max() < 1e-15
    assert (got - shapes.torus(0.5, 0.2).sdf(x)).abs().max() < 0.02  # a coarse torus mesh


def test_mesh_icosahedron_group_found_numerically():
    trimesh = pytest.importorskip("trimesh")
    s = shapes.mesh(trimesh.creation.icosahedron(), radius=0.6)
    x = points(1000, seed=7)
    assert (s.sdf(x) - shapes.icosahedron(0.6).sdf(x)).abs().max() < 1e-12
    assert set(s.symmetries(union([o3.icosahedral(), o3.octahedral()]), num_points=512)) == set(o3.icosahedral())


def test_mesh_errors(monkeypatch):
    trimesh = pytest.importorskip("trimesh")
    open_box = trimesh.creation.box()
    open_box.update_faces(np.arange(len(open_box.faces)) != 0)
    with pytest.raises(ValueError, match="watertight"):
        shapes.mesh(open_box)
    closed = trimesh.creation.box()
    flipped = np.r_[closed.faces[:1, [0, 2, 1]], closed.faces[1:]]  # one face oriented the wrong way
    with pytest.raises(ValueError, match="consistently oriented"):
        meshes._mesh_shape(closed.vertices, flipped)
    monkeypatch.setitem(sys.modules, "trimesh", None)
    with pytest.raises(ImportError, match=r"symfast\[mesh\]"):
        shapes.mesh("any.stl")


def test_group_of_found_symmetries_is_a_group():
    found = shapes.tetrahedron().symmetries(CANDIDATES, num_points=512)
    assert isinstance(found, Group) and Group(found).is_closed() and len(found) == 24
