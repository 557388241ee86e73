"""3D shapes with exact signed distance functions and declared O(3) symmetry groups.

SDFs are negative inside; every solid is centred at the origin and, with default
parameters, fits in the unit ball (the default sampling domain). The regular
solids sit in the orientation of the `symfast.groups.o3` groups, so that each
declared group is exactly the matching `sf.o3` group: the cube's and
octahedron's 4-fold axes on x, y, z (O_h); the tetrahedron's vertices at
(1,1,1), (1,-1,-1), (-1,1,-1), (-1,-1,1) (T_d); the icosahedron's vertices at
the cyclic permutations of (0, +-1, +-phi) and the dodecahedron's at (+-1,+-1,+-1)
and the cyclic permutations of (0, +-1/phi, +-phi) (I_h, 2-fold axes on x, y, z).
Cylinders and tori have their axis on z (group `Dinfh`, O(2) x Z2).

Polyhedra take their distance from `symfast.shapes.mesh.triangle_distance`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch

from symfast.groups import Group, o3
from symfast.shapes.base import Shape, check_positive, recipe
from symfast.shapes.meshes import triangle_distance

__all__ = ["sphere", "box", "cube", "tetrahedron", "octahedron", "icosahedron", "dodecahedron", "polyhedron",
           "cylinder", "torus", "FACTORIES"]


@lru_cache(maxsize=None)
def _cached(name: str) -> tuple:
    """Elements of the named finite group (built once per process; closure of I_h takes ~0.5 s)."""
    return tuple({"Oh": o3.octahedral, "Td": o3.tetrahedral, "Ih": o3.icosahedral}[name]())


def _group(name: str) -> Group:
    return Group(_cached(name), name=name)


def _hull(vertices: np.ndarray):
    """Triangles [T, 3, 3] and outward face planes [T, 4] (n . x + d <= 0 inside) of the convex hull."""
    from scipy.spatial import ConvexHull

    hull = ConvexHull(vertices)
    return torch.as_tensor(vertices[hull.simplices]), torch.as_tensor(hull.equations)


def _convex_sdf(triangles: torch.Tensor, planes: torch.Tensor):
    def sdf(x):
        pl = planes.to(dtype=x.dtype, device=x.device)
        inside = x @ pl[:, :3].T + pl[:, 3]  # [..., T] signed plane distances
        worst = inside.max(dim=-1).values  # exact inside a convex body
        return torch.where(worst > 0, triangle_distance(x, triangles), worst)

    return sdf


@recipe("polyhedron")
def polyhedron(vertices, name: str = "polyhedron", group: Group | None = None) -> Shape:
    """Convex hull of `vertices` ([M, 3], M >= 4, not coplanar) with exact signed distance.

    Args:
        vertices: [M, 3] points; the hull of all of them is the solid.
        name: label used in tables.
        group: declared O(3) group, or None to find it numerically (`shape.true_group(candidates)`).
    """
    v = np.asarray(vertices, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != 3 or len(v) < 4:
        raise ValueError(f"vertices must be [M, 3] with M >= 4, got {list(v.shape)}")
    if not np.isfinite(v).all():
        raise ValueError("vertices must be finite")
    if np.linalg.matrix_rank(v[1:] - v[0], tol=1e-9 * np.abs(v).max()) < 3:
        raise ValueError("vertices are coplanar; a polyhedron needs volume")
    tri, planes = _hull(v)
    return Shape(name, _convex_sdf(tri, planes), group, {"kind": "polyhedron", "vertices": v.tolist(),
                                                         "name": name}, dim=3)


def _regular(name: str, vertices: np.ndarray, radius: float, group: str) -> Shape:
    check_positive(radius=radius)
    v = vertices * (radius / np.linalg.norm(vertices[0]))
    s = polyhedron(v, name, _group(group))
    s.params = {"kind": name, "radius": float(radius)}
    return s


def _cyclic_perms(rows) -> np.ndarray:
    return np.array([r[k:] + r[:k] for r in rows for k in range(3)], dtype=np.float64)


def _signs(*entries) -> list[list[float]]:
    """All sign choices of the non-zero entries."""
    out = [[]]
    for e in entries:
        out = [o + [s * e] for o in out for s in ((1.0, -1.0) if e != 0 else (1.0,))]
    return out


def tetrahedron(radius: float = 0.6) -> Shape:
    """Regular tetrahedron with circumradius `radius`, vertices along (1,1,1), (1,-1,-1), (-1,1,-1),
    (-1,-1,1); declared group T_d (`sf.o3.tetrahedral()`: 2-fold axes on x, y, z)."""
    v = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], dtype=np.float64)
    return _regular("tetrahedron", v, radius, "Td")


def octahedron(radius: float = 0.6) -> Shape:
    """Regular octahedron with vertices at +-radius on x, y, z; declared group O_h (`sf.o3.octahedral()`)."""
    return _regular("octahedron", np.vstack([np.eye(3), -np.eye(3)]), radius, "Oh")


def icosahedron(radius: float = 0.6) -> Shape:
    """Regular icosahedron with circumradius `radius`, vertices along the cyclic permutations of
    (0, +-1, +-phi); declared group I_h (`sf.o3.icosahedral()`: 2-fold axes on x, y, z)."""
    return _regular("icosahedron", _cyclic_perms(_signs(0, 1, o3.PHI)), radius, "Ih")


def dodecahedron(radius: float = 0.6) -> Shape:
    """Regular dodecahedron with circumradius `radius`, vertices along (+-1, +-1, +-1) and the cyclic
    permutations of (0, +-1/phi, +-phi) (the icosahedron's dual); declared group I_h."""
    v = np.vstack([_signs(1, 1, 1), _cyclic_perms(_signs(0, o3.PHI, 1 / o3.PHI))])
    return _regular("dodecahedron", v, radius, "Ih")


def _box_group(h: tuple) -> Group:
    """The signed permutations (elements of O_h) that map the box with half widths h onto itself."""
    h = np.asarray(h)
    keep = [g for g in _cached("Oh") if np.allclose(np.abs(g.matrix) @ h, h, rtol=0, atol=1e-12)]
    return Group(keep, name={48: "Oh", 16: "D4h", 8: "D2h"}[len(keep)])


def box(a: float = 0.6, b: float = 0.4, c: float = 0.25) -> Shape:
    """Axis-aligned box [-a, a] x [-b, b] x [-c, c] (half widths).

    Declared group: the signed permutations that preserve the half widths: D_2h (8, the sign
    flips) when a, b, c differ, D_4h (16) about the odd axis when two are equal, O_h (48) for a cube.
    """
    check_positive(a=a, b=b, c=c)
    h = (float(a), float(b), float(c))

    def sdf(x):
        q = x.abs() - torch.as_tensor(h, dtype=x.dtype, device=x.device)
        return q.clamp(min=0).norm(dim=-1) + q.max(dim=-1).values.clamp(max=0)

    return Shape("box", sdf, _box_group(h), {"kind": "box", "a": h[0], "b": h[1], "c": h[2]}, dim=3)


def cube(a: float = 0.5) -> Shape:
    """Cube [-a, a]^3 (half width a); declared group O_h (`sf.o3.octahedral()`, 4-fold axes on x, y, z)."""
    s = box(a, a, a)
    s.name, s.params = "cube", {"kind": "cube", "a": float(a)}
    return s


def sphere(r: float = 0.5) -> Shape:
    """Ball of radius r; declared group O(3) (every candidate passes)."""
    check_positive(r=r)
    return Shape("sphere", lambda x: x.norm(dim=-1) - r, o3.orthogonal_group(), {"kind": "sphere", "r": float(r)},
                 dim=3)


def cylinder(r: float = 0.4, h: float = 0.5) -> Shape:
    """Capped cylinder of radius r and half height h with axis z (exact distance to the caps' rims too).

    Declared group `Dinfh` (O(2) x Z2, continuous): a finite candidate passes iff it maps the
    z axis onto itself (g e_z = +-e_z): all of D_nh (`sf.o3.dihedral(n)`) and C_n about z, the 16
    elements of O_h that form D_4h about z, the 8 of I_h that form D_2h.
    """
    check_positive(r=r, h=h)

    def sdf(x):
        d = torch.stack((x[..., :2].norm(dim=-1) - r, x[..., 2].abs() - h), -1)
        return d.max(dim=-1).values.clamp(max=0) + d.clamp(min=0).norm(dim=-1)

    return Shape("cylinder", sdf, o3.cylindrical_group(), {"kind": "cylinder", "r": float(r), "h": float(h)},
                 dim=3)


def torus(R: float = 0.5, r: float = 0.2) -> Shape:
    """Torus with axis z: tube of radius r around the circle of radius R (R > r) in the xy plane.

    Declared group `Dinfh`, like `cylinder` (the same finite candidates pass).
    """
    check_positive(R=R, r=r)
    if r >= R:
        raise ValueError(f"tube radius r must be below R (a ring torus), got r={r} >= R={R}")

    def sdf(x):
        return torch.stack((x[..., :2].norm(dim=-1) - R, x[..., 2]), -1).norm(dim=-1) - r

    return Shape("torus", sdf, o3.cylindrical_group(), {"kind": "torus", "R": float(R), "r": float(r)}, dim=3)


FACTORIES = {"sphere": sphere, "box": box, "cube": cube, "tetrahedron": tetrahedron, "octahedron": octahedron,
             "icosahedron": icosahedron, "dodecahedron": dodecahedron, "cylinder": cylinder, "torus": torus}
for _kind, _factory in FACTORIES.items():
    recipe(_kind)(_factory)
