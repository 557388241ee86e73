"""O(2): its elements by construction and its subgroups, the candidate symmetries of 2D shapes.

A rotation `r<deg>` turns counter-clockwise by theta; a reflection `m<deg>` mirrors across the
line through the origin at angle theta (`symfast.groups.elements.O2Element`).
"""
from __future__ import annotations

import math
import warnings

from symfast.groups.elements import O2Element
from symfast.groups.group import Group

__all__ = ["rotation", "reflection", "identity", "cyclic", "dihedral", "rotation_sweep", "orthogonal_group"]


def _angle(fn: str, theta, deg) -> float:
    """theta in radians, or deg in degrees (exactly one of them)."""
    if (theta is None) == (deg is None):
        raise TypeError(f"{fn}() takes an angle in radians (positional, {fn}(math.pi / 3)) or in degrees "
                        f"({fn}(deg=60)), exactly one of them")
    if deg is not None:
        return math.radians(float(deg))
    if isinstance(theta, int) and not isinstance(theta, bool) and abs(theta) > 2 * math.pi:
        warnings.warn(f"{fn}({theta}) is {theta} radians ({math.degrees(theta) % 360:.4g} degrees mod 360); "
                      f"for degrees write {fn}(deg={theta})", stacklevel=3)
    return float(theta)


def rotation(theta: float | None = None, *, deg: float | None = None) -> O2Element:
    """Rotation by theta radians, or by `deg` degrees (counter-clockwise): `rotation(math.pi / 2)` and
    `rotation(deg=90)` are the same element, named "r90" (names are in degrees and parse back with
    `as_element`). An integer theta above 2 pi warns (it is most likely degrees)."""
    return O2Element("rotation", _angle("rotation", theta, deg))


def reflection(theta: float | None = None, *, deg: float | None = None) -> O2Element:
    """Reflection across the line through the origin at angle theta radians, or `deg` degrees:
    `reflection(deg=30)` is "m30"."""
    return O2Element("reflection", _angle("reflection", theta, deg))


def identity() -> O2Element:
    return rotation(0.0)


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
