"""Elements and subgroups of O(2), the candidate symmetries of 2D shapes; and `Group`, which
holds elements of O(2) or of O(3) (`symfast.readout.o3`).

An element is a rotation `r<deg>` (counter-clockwise by theta) or a reflection
`m<deg>` (across the line through the origin at angle theta). Composition
`g * h` applies h first, then g, like matrix products.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch

__all__ = [
    "O2Element", "Group", "rotation", "reflection", "identity", "dihedral", "cyclic",
    "rotation_sweep", "orthogonal_group", "as_element",
]

_TOL = 1e-9


def _snap(v: float) -> float:
    """Round cos/sin of multiples of 30 and 45 degrees to their exact values where they are
    representable (0, +-1/2, +-1), so signed permutations act exactly on coordinates."""
    for exact in (0.0, 0.5, -0.5, 1.0, -1.0):
        if abs(v - exact) < 1e-15:
            return exact
    return v


def _fmt_deg(rad: float) -> str:
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
            c, s = _snap(math.cos(self.angle)), _snap(math.sin(self.angle))
            return np.array([[c, -s], [s, c]])
        c, s = _snap(math.cos(2 * self.angle)), _snap(math.sin(2 * self.angle))
        return np.array([[c, s], [s, -c]])

    @property
    def name(self) -> str:
        return ("r" if self.kind == "rotation" else "m") + _fmt_deg(self.angle)

    @property
    def is_identity(self) -> bool:
        return self == identity()

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


def rotation(theta: float) -> O2Element:
    """Rotation by theta radians (counter-clockwise)."""
    return O2Element("rotation", float(theta))


def reflection(theta: float) -> O2Element:
    """Reflection across the line through the origin at angle theta radians."""
    return O2Element("reflection", float(theta))


def identity() -> O2Element:
    return rotation(0.0)


def as_element(g):
    """Accept an O2Element or O3Element; a 2D name like "r120"/"m30" (degrees) or a 3D name like
    "r120[1,1,1]", "m[0,0,1]", "i", "e" (see `symfast.readout.o3`); or a 2x2 / 3x3 matrix.

    Returns:
        O2Element for 2D input, O3Element for 3D input.
    """
    from symfast.readout.o3 import O3Element, from_name

    if isinstance(g, (O2Element, O3Element)):
        return g
    if isinstance(g, str):
        if "[" in g or g in ("e", "i"):
            return from_name(g)
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


def _fixes_z_axis(g) -> bool:
    return g.matrix.shape == (3, 3) and abs(abs(g.matrix[2, 2]) - 1.0) < _TOL


# Continuous groups by name: dimension and membership test (the one place these facts live).
_CONTINUOUS = {
    "O(2)": (2, lambda g: isinstance(g, O2Element)),
    "O(3)": (3, lambda g: g.matrix.shape == (3, 3)),
    "Dinfh": (3, _fixes_z_axis),  # O(2) x Z2 about z: cylinders, tori
}


class Group(tuple):
    """A finite list of O(2) or O(3) elements with a name (e.g. "D4", "Oh"); or a continuous
    group known by name: "O(2)", "O(3)", or "Dinfh" (O(2) x Z2 about the z axis).

    `g in group` tests membership up to tolerance; iterating yields the elements. All
    elements have one dimension (`.dim`, 2 or 3; None for an empty finite group).
    """

    def __new__(cls, elements: Iterable, name: str = "", continuous: bool = False):
        elems = tuple(as_element(g) for g in elements)
        if len({type(g) for g in elems}) > 1:
            raise ValueError(f"group {name!r} mixes 2D and 3D elements")
        obj = super().__new__(cls, elems)
        obj.name = name
        obj.continuous = continuous
        # all matrices in one array: membership is one vectorised comparison (is_closed on I_h is 14400)
        obj._stack = np.stack([g.matrix for g in elems]) if elems else None
        return obj

    @property
    def dim(self) -> int | None:
        """2 for O(2) elements, 3 for O(3) elements (None: empty finite or unknown continuous group)."""
        if self.continuous:
            return _CONTINUOUS.get(self.name, (None, None))[0]
        return self[0].matrix.shape[0] if len(self) else None

    def __contains__(self, g) -> bool:
        g = as_element(g)
        if self.continuous:
            # unknown continuous names keep the old meaning: every element is a member
            return _CONTINUOUS.get(self.name, (None, lambda _: True))[1](g)
        if self._stack is None or self._stack.shape[1:] != g.matrix.shape:
            return False
        return bool((np.abs(self._stack - g.matrix).max(axis=(1, 2)) <= _TOL).any())  # as O2/O3Element.__eq__

    @property
    def names(self) -> list[str]:
        return [g.name for g in self]

    def is_closed(self) -> bool:
        """True when the finite set is closed under composition and inverse."""
        return all((a * b) in self for a in self for b in self) and all(a.inverse() in self for a in self)

    def to_dict(self) -> dict:
        """Plain data (str, float, list) that `torch.load(weights_only=True)` and JSON can read.

        Elements are `[kind, angle]` in 2D and `["o3", [9 matrix entries, row-major]]` in 3D."""
        return {"name": self.name, "continuous": bool(self.continuous),
                "elements": [["o3", [float(v) for v in g.matrix.ravel()]] if g.matrix.shape == (3, 3)
                             else [g.kind, float(g.angle)] for g in self]}

    @staticmethod
    def from_dict(d: dict) -> "Group":
        """Inverse of `to_dict`; raises ValueError on malformed data."""
        from symfast.readout.o3 import O3Element

        try:
            elements = [O3Element(np.asarray(val, dtype=np.float64).reshape(3, 3)) if kind == "o3"
                        else O2Element(str(kind), float(val)) for kind, val in d["elements"]]
            return Group(elements, name=str(d["name"]), continuous=bool(d["continuous"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"malformed group data {d!r}: {e}") from None

    def __repr__(self) -> str:
        if self.continuous:
            return f"<Group {self.name}>"
        return f"<Group {self.name}: {', '.join(self.names)}>"


def cyclic(n: int) -> Group:
    """C_n: rotations by 2 pi k / n, k = 0..n-1."""
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    return Group([rotation(2 * math.pi * k / n) for k in range(int(n))], name=f"C{n}")


def dihedral(n: int) -> Group:
    """D_n (2n elements): rotations by 2 pi k/n and reflections across the lines at pi k/n."""
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer, got {n}")
    rot = [rotation(2 * math.pi * k / n) for k in range(int(n))]
    ref = [reflection(math.pi * k / n) for k in range(int(n))]
    return Group(rot + ref, name=f"D{n}")


def rotation_sweep(num: int = 360) -> Group:
    """`num` rotations evenly spaced over [0, 2 pi): the candidates of a rotation sweep."""
    if int(num) != num or num < 1:
        raise ValueError(f"num must be a positive integer, got {num}")
    return Group([rotation(2 * math.pi * k / num) for k in range(int(num))], name=f"sweep{num}")


def orthogonal_group() -> Group:
    """O(2) itself (every element is a member), the symmetry group of a circle."""
    return Group([], name="O(2)", continuous=True)


def union(groups: Sequence[Group], name: str = "") -> Group:
    """Elements of several groups (all 2D or all 3D) without duplicates, in first-seen order."""
    out: list = []
    for grp in groups:
        for g in grp:
            if g not in out:
                out.append(g)
    return Group(out, name=name)
