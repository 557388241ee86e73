"""O(2): its elements by construction and its subgroups, the candidate symmetries of 2D shapes.

A rotation `r<deg>` turns counter-clockwise by theta; a reflection `m<deg>` mirrors across the
line through the origin at angle theta (`symfast.groups.elements.O2Element`).
"""
from __future__ import annotations

import math

from symfast.groups.elements import O2Element
from symfast.groups.group import Group

__all__ = ["rotation", "reflection", "identity", "cyclic", "dihedral", "rotation_sweep", "orthogonal_group"]


def rotation(theta: float) -> O2Element:
    """Rotation by theta radians (counter-clockwise)."""
    return O2Element("rotation", float(theta))


def reflection(theta: float) -> O2Element:
    """Reflection across the line through the origin at angle theta radians."""
    return O2Element("reflection", float(theta))


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
