"""Elements and finite subgroups of O(3), the candidate symmetries of 3D shapes.

An element is an orthogonal 3x3 matrix acting on column vectors; composition
`g * h` applies h first, then g, like matrix products. Names say what an
element does:

- `e`: the identity; `i`: the inversion x -> -x;
- `r<deg>[a,b,c]`: rotation by deg degrees (right-handed) about the axis (a, b, c);
- `m[a,b,c]`: reflection across the plane with normal (a, b, c);
- `s<deg>[a,b,c]`: rotoreflection, rotation by deg about the axis then reflection
  across the plane normal to it.

Axes are printed as short integer vectors when they are rational directions
(`[1,1,1]`, `[1,-1,0]`), otherwise as unit vectors to 4 digits; the sign is
fixed so that the first non-zero component is positive (so `r240[1,1,1]`, not
`r120[-1,-1,-1]`).

Axes convention of the finite groups (the orientation of the regular solids in
`symfast.readout.solids` matches it): the cube's 4-fold axes lie on x, y, z and its
3-fold axes on the diagonals (+-1, +-1, +-1); the regular tetrahedron with vertices
(1,1,1), (1,-1,-1), (-1,1,-1), (-1,-1,1) has its 2-fold axes on x, y, z; the
icosahedron with vertices the cyclic permutations of (0, +-1, +-phi) has 2-fold
axes on x, y, z, 3-fold axes on the diagonals and a 5-fold axis through
(0, 1, phi); D_nh and C_n have their principal axis on z (C_n: any chosen axis).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Iterable

import numpy as np
import torch

from symfast.readout.groups import Group

__all__ = [
    "O3Element", "rotation", "reflection", "inversion", "identity", "rotoreflection", "from_name",
    "octahedral", "tetrahedral", "icosahedral", "dihedral", "cyclic", "rotations_only", "rotation_sweep",
    "orthogonal_group", "cylindrical_group", "closure", "PHI",
]

PHI = (1 + math.sqrt(5)) / 2  # golden ratio: icosahedral coordinates
_TOL = 1e-9
_ORTHO_TOL = 1e-8  # how far from orthogonal an input matrix may be (it is then projected onto O(3))
# Entries snapped to one canonical double: the cos/sin values of the crystallographic and icosahedral
# groups, so that every product path gives the same bits (0, +-1/2, +-1 are then exact).
_EXACT = np.array(sorted({s * v for s in (1.0, -1.0) for v in (
    0.0, 0.5, 1.0, math.sqrt(0.5), math.sqrt(3) / 2, PHI / 2, 1 / (2 * PHI), 1 / math.sqrt(3),
    math.sqrt(2.0 / 3.0), 1 / math.sqrt(6))}))
_SNAP_TOL = 1e-13


def _snap(m: np.ndarray) -> np.ndarray:
    idx = np.abs(m[..., None] - _EXACT).argmin(-1)
    near = _EXACT[idx]
    out = np.where(np.abs(m - near) < _SNAP_TOL, near, m)
    return out + 0.0  # no negative zeros


def _fmt_deg(deg: float) -> str:
    if abs(deg - round(deg)) < 1e-6:
        return str(int(round(deg)) % 360)
    return f"{deg:.4g}"


def _canonical_axis(n: np.ndarray) -> tuple[np.ndarray, bool]:
    """Unit axis with its first non-zero component positive; and whether it was flipped."""
    n = n / np.linalg.norm(n)
    for c in n:
        if abs(c) > 1e-9:
            return (n, False) if c > 0 else (-n, True)
    raise ValueError("zero axis")


def _fmt_axis(n: np.ndarray) -> str:
    """`[1,1,1]` for rational directions with small integers, else the unit vector to 4 digits."""
    nz = np.abs(n[np.abs(n) > 1e-9])
    for k in range(1, 7):
        u = n / nz.min() * k
        r = np.round(u)
        if np.abs(u - r).max() < 1e-7 and np.abs(r).max() <= 12:
            g = math.gcd(*(int(abs(v)) for v in r))
            return "[" + ",".join(str(int(v) // g) for v in r) + "]"
    return "[" + ",".join(f"{v:.4g}" if abs(v) > 1e-9 else "0" for v in n) + "]"


def _rotation_axis_angle(r: np.ndarray) -> tuple[np.ndarray, float]:
    """Canonical (axis, angle in (0, 2pi)) of a proper rotation that is not the identity."""
    theta = math.acos(min(1.0, max(-1.0, (np.trace(r) - 1) / 2)))
    w = np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    if np.linalg.norm(w) > 1e-6:
        axis = w
    else:  # theta = pi: r = 2 n n^T - I
        s = (r + np.eye(3)) / 2
        axis = s[:, int(np.argmax(np.diag(s)))]
    axis, flipped = _canonical_axis(axis)
    if np.linalg.norm(w) <= 1e-6:
        flipped = False  # a half turn is its own reverse
    return axis, (2 * math.pi - theta) if flipped else theta


@dataclass(frozen=True, eq=False)
class O3Element:
    """An element of O(3): a float64 [3, 3] orthogonal `.matrix` acting on column vectors.

    The input matrix is checked (orthogonal to 1e-8, else ValueError), projected onto
    O(3) (polar factor) and its entries snapped to exact values where representable
    (0, +-1/2, +-1, and a few canonical cosines), so signed permutations act exactly.
    The stored matrix is read-only.
    """

    matrix: np.ndarray

    def __post_init__(self):
        m = np.array(self.matrix, dtype=np.float64)
        if m.shape != (3, 3) or not np.isfinite(m).all() or not np.allclose(m.T @ m, np.eye(3), rtol=0,
                                                                           atol=_ORTHO_TOL):
            raise ValueError(f"matrix is not an orthogonal 3x3 matrix: {m.tolist()}")
        u, _, vt = np.linalg.svd(m)
        m = _snap(u @ vt)
        m.setflags(write=False)
        object.__setattr__(self, "matrix", m)

    @classmethod
    def from_matrix(cls, m) -> "O3Element":
        """The element with orthogonal matrix `m` ([3, 3]); ValueError if m is not in O(3)."""
        return cls(np.asarray(m, dtype=np.float64))

    @property
    def det(self) -> float:
        """+1 for rotations, -1 for reflections, the inversion and rotoreflections."""
        return 1.0 if np.linalg.det(self.matrix) > 0 else -1.0

    @property
    def is_identity(self) -> bool:
        return bool(np.allclose(self.matrix, np.eye(3), rtol=0, atol=_TOL))

    @cached_property
    def name(self) -> str:
        """`e`, `i`, `r<deg>[axis]`, `m[normal]` or `s<deg>[axis]` (see the module docstring)."""
        if self.det > 0:
            if self.is_identity:
                return "e"
            axis, angle = _rotation_axis_angle(self.matrix)
            return f"r{_fmt_deg(math.degrees(angle))}{_fmt_axis(axis)}"
        r = -self.matrix  # a proper rotation: g = -r = mirror(n) rot(n, alpha + pi)
        if np.allclose(r, np.eye(3), rtol=0, atol=_TOL):
            return "i"
        axis, alpha = _rotation_axis_angle(r)
        if abs(alpha - math.pi) < 1e-9:
            return f"m{_fmt_axis(axis)}"
        return f"s{_fmt_deg(math.degrees(alpha + math.pi) % 360)}{_fmt_axis(axis)}"

    def __mul__(self, other: "O3Element") -> "O3Element":
        if not isinstance(other, O3Element):
            return NotImplemented
        return O3Element(self.matrix @ other.matrix)

    def inverse(self) -> "O3Element":
        return O3Element(self.matrix.T)

    def __call__(self, x):
        """Apply to points x: [..., 3] (numpy array or torch tensor); same type and shape back."""
        if x.shape[-1] != 3:
            raise ValueError(f"points must be [..., 3], got {list(x.shape)}")
        if isinstance(x, torch.Tensor):
            return x @ torch.tensor(self.matrix.T, dtype=x.dtype, device=x.device)
        return np.asarray(x) @ self.matrix.T

    def __eq__(self, other) -> bool:
        if not isinstance(other, O3Element):
            return NotImplemented
        return bool(np.allclose(self.matrix, other.matrix, rtol=0.0, atol=_TOL))

    def __hash__(self) -> int:
        # consistent with __eq__ away from rounding boundaries (entries kept to 1e-7)
        return hash(tuple((np.round(self.matrix, 7) + 0.0).ravel().tolist()))

    def __repr__(self) -> str:
        return f"<O3Element {self.name}>"


def _axis(axis) -> np.ndarray:
    n = np.asarray(axis, dtype=np.float64)
    if n.shape != (3,) or not np.isfinite(n).all():
        raise ValueError(f"axis must be 3 finite numbers, got {np.asarray(axis).tolist()}")
    norm = np.linalg.norm(n)
    if norm < 1e-12:
        raise ValueError(f"axis must be non-zero, got {n.tolist()}")
    return n / norm


def _rotation_matrix(n: np.ndarray, angle: float) -> np.ndarray:
    # Rodrigues; cos/sin snapped so quarter and half turns about coordinate axes are exact
    c, s = math.cos(angle), math.sin(angle)
    c, s = (float(_snap(np.array(v))) for v in (c, s))
    k = np.array([[0, -n[2], n[1]], [n[2], 0, -n[0]], [-n[1], n[0], 0]])
    return np.eye(3) * c + s * k + (1 - c) * np.outer(n, n)


def rotation(axis, angle: float) -> O3Element:
    """Rotation by `angle` radians (right-handed) about `axis` (3 numbers, normalised here).

    Raises:
        ValueError: for a zero or non-finite axis, or a non-finite angle.
    """
    if not math.isfinite(angle):
        raise ValueError(f"angle must be finite, got {angle}")
    return O3Element(_rotation_matrix(_axis(axis), float(angle)))


def reflection(normal) -> O3Element:
    """Reflection across the plane through the origin with normal `normal` (3 numbers)."""
    n = _axis(normal)
    return O3Element(np.eye(3) - 2 * np.outer(n, n))


def rotoreflection(axis, angle: float) -> O3Element:
    """Rotation by `angle` about `axis`, then reflection across the plane normal to the axis."""
    return reflection(axis) * rotation(axis, angle)


def inversion() -> O3Element:
    """x -> -x."""
    return O3Element(-np.eye(3))


def identity() -> O3Element:
    """The identity element `e`."""
    return O3Element(np.eye(3))


_NAME_RE = re.compile(r"^(?P<kind>[rsm])(?P<deg>[-+0-9.eE]*)\[(?P<axis>[^\]]+)\]$")


def from_name(name: str) -> O3Element:
    """Parse a name written by `O3Element.name` (`e`, `i`, `r120[1,1,1]`, `m[0,0,1]`, `s90[0,0,1]`).

    Axes printed to 4 digits parse back to within ~1e-4 of the element; integer axes exactly.
    """
    if name == "e":
        return identity()
    if name == "i":
        return inversion()
    m = _NAME_RE.match(name)
    try:
        axis = [float(v) for v in m["axis"].split(",")] if m else None
        deg = float(m["deg"]) if m and m["kind"] != "m" else None
    except ValueError:
        m = None
    if m is None or len(axis) != 3 or (m["kind"] == "m") != (m["deg"] == ""):
        raise ValueError(f"cannot parse O(3) element {name!r}; expected e.g. 'e', 'i', 'r120[1,1,1]', "
                         "'m[0,0,1]' or 's90[0,0,1]'")
    if m["kind"] == "m":
        return reflection(axis)
    if m["kind"] == "r":
        return rotation(axis, math.radians(deg))
    return rotoreflection(axis, math.radians(deg))


def closure(generators: Iterable[O3Element], name: str = "", order: int | None = None,
            max_order: int = 10000) -> Group:
    """The finite group generated by `generators` (identity first, then breadth-first products).

    Args:
        generators: O3Elements.
        name: the group's name.
        order: when given, the expected number of elements (ValueError if the closure has
            another size).
        max_order: stop with ValueError beyond this many elements (the generators then
            generate an infinite group, e.g. an irrational rotation).
    """
    gens = list(generators)
    elems = [identity()]
    seen = {hash(elems[0]): [elems[0]]}
    frontier = list(elems)
    while frontier:
        new = []
        for a in frontier:
            for g in gens:
                b = g * a
                bucket = seen.setdefault(hash(b), [])
                if not any(b == c for c in bucket):
                    bucket.append(b)
                    elems.append(b)
                    new.append(b)
                    if len(elems) > max_order:
                        raise ValueError(f"generators of {name or 'group'} generate more than {max_order} "
                                         "elements (an infinite group?)")
        frontier = new
    if order is not None and len(elems) != order:
        raise ValueError(f"closure of {name or 'group'} has {len(elems)} elements, expected {order}")
    return Group(elems, name=name)


def rotations_only(group: Group, name: str | None = None) -> Group:
    """The proper rotations (det +1) of a finite group: O from O_h, T from T_d, I from I_h, D_n
    from D_nh. The default name drops a trailing h/d/v (`Oh` -> `O`, `D4h` -> `D4`)."""
    if group.continuous:
        raise ValueError(f"rotations_only needs a finite group, got {group.name}")
    if name is None:
        name = group.name[:-1] if group.name[-1:] in ("h", "d", "v") else f"{group.name}+"
    return Group([g for g in group if g.det > 0], name=name)


def _proper(group: Group, proper: bool) -> Group:
    return rotations_only(group) if proper else group


def octahedral(proper: bool = False) -> Group:
    """O_h (48 elements), the cube's and octahedron's group, 4-fold axes on x, y, z; or its
    rotations O (24) with `proper=True`."""
    g = closure([rotation((0, 0, 1), math.pi / 2), rotation((1, 1, 1), 2 * math.pi / 3), inversion()], "Oh", 48)
    return _proper(g, proper)


def tetrahedral(proper: bool = False) -> Group:
    """T_d (24 elements), the group of the tetrahedron with vertices (1,1,1), (1,-1,-1), (-1,1,-1),
    (-1,-1,1): 2-fold axes on x, y, z, mirrors x = +-y, y = +-z, z = +-x; or its rotations T (12)."""
    g = closure([rotation((1, 1, 1), 2 * math.pi / 3), rotation((0, 0, 1), math.pi), reflection((1, -1, 0))],
                "Td", 24)
    return _proper(g, proper)


def icosahedral(proper: bool = False) -> Group:
    """I_h (120 elements), the icosahedron's and dodecahedron's group: 2-fold axes on x, y, z,
    3-fold on the diagonals, 5-fold through (0, 1, phi); or its rotations I (60)."""
    g = closure([rotation((0, 0, 1), math.pi), rotation((1, 1, 1), 2 * math.pi / 3),
                 rotation((0, 1, PHI), 2 * math.pi / 5), inversion()], "Ih", 120)
    return _proper(g, proper)


def _positive_int(n, what: str = "n") -> int:
    if int(n) != n or n < 1:
        raise ValueError(f"{what} must be a positive integer, got {n}")
    return int(n)


def dihedral(n: int) -> Group:
    """D_nh (4n elements): rotations by 2 pi k / n about z, half turns about n axes in the xy
    plane (one on x), the mirror z -> -z, and their products (D_2h is the 8 sign flips)."""
    n = _positive_int(n)
    return closure([rotation((0, 0, 1), 2 * math.pi / n), rotation((1, 0, 0), math.pi), reflection((0, 0, 1))],
                   f"D{n}h", 4 * n)


def cyclic(n: int, axis=(0, 0, 1)) -> Group:
    """C_n: rotations by 2 pi k / n, k = 0..n-1, about `axis`."""
    n = _positive_int(n)
    a = _axis(axis)
    return Group([rotation(a, 2 * math.pi * k / n) for k in range(n)], name=f"C{n}")


def rotation_sweep(axis=(0, 0, 1), num: int = 360) -> Group:
    """`num` rotations about `axis`, evenly spaced over [0, 2 pi): the candidates of a sweep."""
    num = _positive_int(num, "num")
    a = _axis(axis)
    return Group([rotation(a, 2 * math.pi * k / num) for k in range(num)], name=f"sweep{num}{_fmt_axis(a)}")


def orthogonal_group() -> Group:
    """O(3) itself (every 3D element is a member), the symmetry group of a sphere."""
    return Group([], name="O(3)", continuous=True)


def cylindrical_group() -> Group:
    """D_inf_h = O(2) x Z2 about z (name `Dinfh`): the elements mapping the z axis onto itself
    (g e_z = +-e_z), the group of a cylinder or torus with axis z."""
    return Group([], name="Dinfh", continuous=True)

