"""Elements of O(2) and O(3): the candidate symmetries of 2D shapes and 3D solids.

An element is an orthogonal matrix (`.matrix`, float64) acting on column vectors; composition
`g * h` applies h first, then g, like matrix products. What an element is (`.kind`) is read
from its matrix; its `.name` says what it does:

- O(2): `r<deg>` rotation counter-clockwise by deg degrees, `m<deg>` reflection across the line
  through the origin at angle deg;
- O(3): `e` the identity, `i` the inversion x -> -x, `r<deg>[a,b,c]` rotation by deg degrees
  (right-handed) about the axis (a, b, c), `m[a,b,c]` reflection across the plane with normal
  (a, b, c), `s<deg>[a,b,c]` rotoreflection (rotation by deg about the axis, then reflection
  across the plane normal to it).

O(3) axes are printed as short integer vectors when they are rational directions (`[1,1,1]`,
`[1,-1,0]`), otherwise as unit vectors to 4 digits; the sign is fixed so that the first
non-zero component is positive (so `r240[1,1,1]`, not `r120[-1,-1,-1]`). `as_element` parses
either kind of name, or takes a 2x2 / 3x3 matrix.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

__all__ = ["O2Element", "O3Element", "as_element", "o3_from_name", "PHI"]

_TOL = 1e-9  # two elements are equal when their matrices agree to this (max abs difference)


# ---- O(2) ----

def _snap2(v: float) -> float:
    """Round cos/sin of multiples of 30 and 45 degrees to their exact values where they are
    representable (0, +-1/2, +-1), so signed permutations act exactly on coordinates."""
    for exact in (0.0, 0.5, -0.5, 1.0, -1.0):
        if abs(v - exact) < 1e-15:
            return exact
    return v


def _fmt_rad(rad: float) -> str:
    deg = math.degrees(rad)
    if abs(deg - round(deg)) < 1e-6:
        return str(int(round(deg)))
    return f"{deg:.4g}"


@dataclass(frozen=True, eq=False)
class O2Element:
    """An element of O(2) with a float64 2x2 `.matrix`.

    Attributes:
        kind: "rotation" or "reflection".
        angle: rotation angle in [0, 2pi), or the mirror line's angle in [0, pi).
    """

    kind: str
    angle: float

    def __post_init__(self):
        if self.kind not in ("rotation", "reflection"):
            raise ValueError(f"kind must be 'rotation' or 'reflection', got {self.kind!r}")
        if not math.isfinite(self.angle):
            raise ValueError(f"angle must be finite, got {self.angle}")
        period = 2 * math.pi if self.kind == "rotation" else math.pi
        a = math.fmod(self.angle, period)
        if a < 0:
            a += period
        if period - a < 1e-12:  # snap 359.999999999... to 0
            a = 0.0
        object.__setattr__(self, "angle", a)

    @property
    def matrix(self) -> np.ndarray:
        """[2, 2] float64 matrix acting on column vectors."""
        if self.kind == "rotation":
            c, s = _snap2(math.cos(self.angle)), _snap2(math.sin(self.angle))
            return np.array([[c, -s], [s, c]])
        c, s = _snap2(math.cos(2 * self.angle)), _snap2(math.sin(2 * self.angle))
        return np.array([[c, s], [s, -c]])

    @property
    def name(self) -> str:
        return ("r" if self.kind == "rotation" else "m") + _fmt_rad(self.angle)

    @property
    def is_identity(self) -> bool:
        return self.kind == "rotation" and self.angle == 0.0

    @classmethod
    def from_matrix(cls, m: np.ndarray) -> "O2Element":
        """The element with orthogonal matrix `m` ([2, 2]); raises if m is not in O(2)."""
        m = np.asarray(m, dtype=np.float64)
        if m.shape != (2, 2) or not np.allclose(m.T @ m, np.eye(2), atol=1e-8):
            raise ValueError(f"matrix is not an orthogonal 2x2 matrix: {m.tolist()}")
        a = math.atan2(m[1, 0], m[0, 0])
        if np.linalg.det(m) > 0:
            return cls("rotation", a)
        return cls("reflection", a / 2)

    def __mul__(self, other: "O2Element") -> "O2Element":
        if not isinstance(other, O2Element):
            return NotImplemented
        return O2Element.from_matrix(self.matrix @ other.matrix)

    def inverse(self) -> "O2Element":
        return O2Element.from_matrix(self.matrix.T)

    def __call__(self, x):
        """Apply to points x: [..., 2] (numpy array or torch tensor)."""
        if isinstance(x, torch.Tensor):
            return x @ torch.as_tensor(self.matrix.T, dtype=x.dtype, device=x.device)
        return np.asarray(x) @ self.matrix.T

    def __eq__(self, other) -> bool:
        if not isinstance(other, O2Element):
            return NotImplemented
        return self.kind == other.kind and np.allclose(self.matrix, other.matrix, rtol=0.0, atol=_TOL)

    def __hash__(self) -> int:
        # consistent with __eq__ away from rounding boundaries (angles kept to 1e-7 rad)
        return hash((self.kind, round(self.matrix[0, 0], 7) + 0.0, round(self.matrix[1, 0], 7) + 0.0))

    def __repr__(self) -> str:
        return f"<O2Element {self.name}>"


# ---- O(3) ----

PHI = (1 + math.sqrt(5)) / 2  # golden ratio: icosahedral coordinates
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


def format_axis(n: np.ndarray) -> str:
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
    def kind(self) -> str:
        """"rotation" (the identity included), "reflection", "inversion" or "rotoreflection", read
        from the matrix: its determinant, and for improper g the rotation angle of -g."""
        if self.det > 0:
            return "rotation"
        r = -self.matrix  # a proper rotation: g = -r = mirror(n) rot(n, alpha + pi)
        if np.allclose(r, np.eye(3), rtol=0, atol=_TOL):
            return "inversion"
        _, alpha = _rotation_axis_angle(r)
        return "reflection" if abs(alpha - math.pi) < 1e-9 else "rotoreflection"

    @cached_property
    def name(self) -> str:
        """`e`, `i`, `r<deg>[axis]`, `m[normal]` or `s<deg>[axis]` (see the module docstring)."""
        kind = self.kind
        if kind == "rotation":
            if self.is_identity:
                return "e"
            axis, angle = _rotation_axis_angle(self.matrix)
            return f"r{_fmt_deg(math.degrees(angle))}{format_axis(axis)}"
        if kind == "inversion":
            return "i"
        axis, alpha = _rotation_axis_angle(-self.matrix)
        if kind == "reflection":
            return f"m{format_axis(axis)}"
        return f"s{_fmt_deg(math.degrees(alpha + math.pi) % 360)}{format_axis(axis)}"

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


def unit_axis(axis) -> np.ndarray:
    n = np.asarray(axis, dtype=np.float64)
    if n.shape != (3,) or not np.isfinite(n).all():
        raise ValueError(f"axis must be 3 finite numbers, got {np.asarray(axis).tolist()}")
    norm = np.linalg.norm(n)
    if norm < 1e-12:
        raise ValueError(f"axis must be non-zero, got {n.tolist()}")
    return n / norm


def axis_rotation_matrix(n: np.ndarray, angle: float) -> np.ndarray:
    # Rodrigues; cos/sin snapped so quarter and half turns about coordinate axes are exact
    c, s = math.cos(angle), math.sin(angle)
    c, s = (float(_snap(np.array(v))) for v in (c, s))
    k = np.array([[0, -n[2], n[1]], [n[2], 0, -n[0]], [-n[1], n[0], 0]])
    return np.eye(3) * c + s * k + (1 - c) * np.outer(n, n)


def axis_reflection_matrix(n: np.ndarray) -> np.ndarray:
    return np.eye(3) - 2 * np.outer(n, n)


_NAME_RE = re.compile(r"^(?P<kind>[rsm])(?P<deg>[-+0-9.eE]*)\[(?P<axis>[^\]]+)\]$")


def o3_from_name(name: str) -> O3Element:
    """Parse a name written by `O3Element.name` (`e`, `i`, `r120[1,1,1]`, `m[0,0,1]`, `s90[0,0,1]`).

    Axes printed to 4 digits parse back to within ~1e-4 of the element; integer axes exactly.
    """
    if name == "e":
        return O3Element(np.eye(3))
    if name == "i":
        return O3Element(-np.eye(3))
    m = _NAME_RE.match(name)
    try:
        axis = [float(v) for v in m["axis"].split(",")] if m else None
        deg = float(m["deg"]) if m and m["kind"] != "m" else None
    except ValueError:
        m = None
    if m is None or len(axis) != 3 or (m["kind"] == "m") != (m["deg"] == ""):
        raise ValueError(f"cannot parse O(3) element {name!r}; expected e.g. 'e', 'i', 'r120[1,1,1]', "
                         "'m[0,0,1]' or 's90[0,0,1]'")
    n = unit_axis(axis)
    if m["kind"] == "m":
        return O3Element(axis_reflection_matrix(n))
    if not math.isfinite(deg):
        raise ValueError(f"angle must be finite, got {deg}")
    rot = axis_rotation_matrix(n, math.radians(deg))
    return O3Element(rot if m["kind"] == "r" else axis_reflection_matrix(n) @ rot)


# ---- either ----

def as_element(g):
    """Accept an O2Element or O3Element; a 2D name like "r120"/"m30" (degrees) or a 3D name like
    "r120[1,1,1]", "m[0,0,1]", "i", "e" (see `symfast.groups.o3`); or a 2x2 / 3x3 matrix.

    Returns:
        O2Element for 2D input, O3Element for 3D input.
    """
    if isinstance(g, (O2Element, O3Element)):
        return g
    if isinstance(g, str):
        if "[" in g or g in ("e", "i"):
            return o3_from_name(g)
        kind = {"r": "rotation", "m": "reflection"}.get(g[:1])
        try:
            deg = float(g[1:])
        except ValueError:
            kind = None
        if kind is None:
            raise ValueError(f"cannot parse group element {g!r}; expected e.g. 'r120' or 'm30' (2D), "
                             "'r120[1,1,1]' or 'm[0,0,1]' (3D)")
        return O2Element(kind, math.radians(deg))
    m = np.asarray(g)
    if m.shape == (3, 3):
        return O3Element.from_matrix(m)
    return O2Element.from_matrix(m)
