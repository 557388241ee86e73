"""2D shapes with exact signed distance functions and declared O(2) groups.

SDFs are negative inside; every shape is centred at the origin and fits in the unit disk (the
default sampling domain).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from symfast.groups import Group, dihedral, orthogonal_group, reflection, rotation
from symfast.shapes.base import Shape, check_positive, recipe

__all__ = ["circle", "square", "rectangle", "ellipse", "regular_polygon", "triangle", "pentagon", "hexagon", "star",
           "polygon", "FACTORIES"]


def _box_sdf(x: torch.Tensor, hx: float, hy: float) -> torch.Tensor:
    q = x.abs() - torch.as_tensor([hx, hy], dtype=x.dtype, device=x.device)
    outside = q.clamp(min=0).norm(dim=-1)
    inside = q.max(dim=-1).values.clamp(max=0)
    return outside + inside


def _polygon_sdf(x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Exact signed distance to the closed polygon with vertices v: [M, 2] (any orientation).

    One pass per edge over [...] tensors (M is small): ~4x faster than broadcasting to
    [..., M, 2], which matters because the targets are recomputed every training step.
    """
    vs = v.to(dtype=torch.float64).tolist()
    px, py = x[..., 0], x[..., 1]
    fast = not (torch.is_grad_enabled() and x.requires_grad)  # in-place ops unless differentiating
    d2 = inside = None
    for k in range(len(vs)):
        (ax, ay), (bx, by) = vs[k], vs[k - 1]  # edge from vertex k to the previous vertex
        ex, ey = bx - ax, by - ay
        wx, wy = px - ax, py - ay
        t = ((wx * ex + wy * ey) * (1.0 / (ex * ex + ey * ey))).clamp(0, 1)
        dk = (wx - ex * t).square_().add_((wy - ey * t).square_()) if fast else \
            (wx - ex * t).square() + (wy - ey * t).square()
        d2 = dk if d2 is None else torch.minimum(d2, dk, out=d2) if fast else torch.minimum(d2, dk)
        c1, c2 = py >= ay, py < by
        c3 = ex * wy > ey * wx
        flip = (c1 == c2) & (c2 == c3)  # all three true or all three false (winding crossing)
        inside = flip if inside is None else inside ^ flip
    return torch.where(inside, -1.0, 1.0).to(x.dtype) * d2.sqrt()


def _maps_polygon(v: np.ndarray, m: np.ndarray, tol: float) -> bool:
    """Whether the orthogonal map `m` ([2, 2]) maps the closed polygon with vertices v ([M, 2]) onto
    itself: every vertex onto a vertex (one-to-one) and every edge onto an edge."""
    gv = v @ m.T
    dist = np.abs(gv[:, None, :] - v[None, :, :]).max(-1)
    sigma = dist.argmin(1)
    if not (dist[np.arange(len(v)), sigma] <= tol).all() or len(set(sigma.tolist())) != len(v):
        return False
    edges = {frozenset((k, (k + 1) % len(v))) for k in range(len(v))}
    return {frozenset((int(sigma[k]), int(sigma[(k + 1) % len(v)]))) for k in range(len(v))} == edges


def _vertex_symmetries(v: np.ndarray) -> Group:
    """The elements of O(2) (about the origin) that map the polygon with vertices v onto itself.

    Exact for any mirror line and rotation angle: a symmetry maps the vertex farthest from the origin
    onto a vertex at the same distance, so the candidates are the rotation and the mirror taking it
    to each such vertex (a mirror across the line at the mean of their angles); each candidate is kept
    when it maps vertices onto vertices and edges onto edges (to 1e-9 of the polygon's size). A
    symmetry fixes the vertex centroid, so a polygon whose centroid is off the origin has at most the
    identity and one mirror. Named Dn (n rotations, n mirrors) or Cn (rotations only).
    """
    tol = 1e-9 * np.abs(v).max()
    r, a = np.hypot(v[:, 0], v[:, 1]), np.arctan2(v[:, 1], v[:, 0])
    k0 = int(np.argmax(r))
    keep = [rotation(0.0)]
    for j in np.flatnonzero(np.abs(r - r[k0]) <= tol):
        for g in (rotation(a[j] - a[k0]), reflection((a[j] + a[k0]) / 2)):
            if g not in keep and _maps_polygon(v, g.matrix, tol):
                keep.append(g)
    n_rot = sum(g.kind == "rotation" for g in keep)
    return Group(keep, name=f"D{n_rot}" if len(keep) > n_rot else f"C{n_rot}")


def _rotated_dihedral(n: int, rot: float) -> Group:
    """D_n whose mirror lines sit at rot + pi k / n."""
    elems = [rotation(2 * math.pi * k / n) for k in range(n)] + [reflection(rot + math.pi * k / n)
                                                                  for k in range(n)]
    return Group(elems, name=f"D{n}")


@recipe("circle")
def circle(radius: float = 0.5) -> Shape:
    """Disk of `radius`; group O(2)."""
    check_positive(radius=radius)
    return Shape("circle", lambda x: x.norm(dim=-1) - radius, orthogonal_group(),
                 {"kind": "circle", "radius": float(radius)})


@recipe("square")
def square(half_width: float = 0.5) -> Shape:
    """Axis-aligned square [-h, h]^2; group D4."""
    check_positive(half_width=half_width)
    return Shape("square", lambda x: _box_sdf(x, half_width, half_width), dihedral(4),
                 {"kind": "square", "half_width": float(half_width)})


@recipe("rectangle")
def rectangle(half_width: float = 0.6, half_height: float = 0.35) -> Shape:
    """Axis-aligned rectangle; group D2 = {e, r180, m0, m90}."""
    check_positive(half_width=half_width, half_height=half_height)
    if abs(half_width - half_height) < 1e-12:
        raise ValueError("rectangle with equal sides is a square; use square()")
    return Shape("rectangle", lambda x: _box_sdf(x, half_width, half_height), dihedral(2),
                 {"kind": "rectangle", "half_width": float(half_width), "half_height": float(half_height)})


@recipe("ellipse")
def ellipse(a: float = 0.6, b: float = 0.35, iterations: int = 6) -> Shape:
    """Axis-aligned ellipse with semi-axes a (x) and b (y); group D2.

    Distance by the fixed-point iteration for the closest boundary point (converges to
    ~1e-12 in a few steps away from the centre), signed by the implicit equation.
    """
    check_positive(a=a, b=b)
    if abs(a - b) < 1e-12:
        raise ValueError("ellipse with a == b is a circle; use circle()")

    def sdf(x):
        p = x.abs()
        tx = torch.full_like(p[..., 0], math.sqrt(0.5))
        ty = tx.clone()
        for _ in range(iterations):
            ex = (a * a - b * b) * tx ** 3 / a
            ey = (b * b - a * a) * ty ** 3 / b
            rx, ry = a * tx - ex, b * ty - ey
            qx, qy = p[..., 0] - ex, p[..., 1] - ey
            r = torch.hypot(rx, ry)
            q = torch.hypot(qx, qy).clamp(min=1e-300)
            tx = ((qx * r / q + ex) / a).clamp(0, 1)
            ty = ((qy * r / q + ey) / b).clamp(0, 1)
            t = torch.hypot(tx, ty)
            tx, ty = tx / t, ty / t
        d = torch.hypot(p[..., 0] - a * tx, p[..., 1] - b * ty)
        inside = (p[..., 0] / a) ** 2 + (p[..., 1] / b) ** 2 < 1
        return torch.where(inside, -d, d)

    return Shape("ellipse", sdf, dihedral(2), {"kind": "ellipse", "a": float(a), "b": float(b),
                                                "iterations": int(iterations)})


@recipe("polygon")
def polygon(vertices, name: str = "polygon", group: Group | None = None) -> Shape:
    """Simple polygon with exact signed distance.

    Args:
        vertices: [M, 2] in order around the boundary (either orientation), centred at the origin.
        name: the shape's name.
        group: its symmetry group; if not given, read off the vertices exactly: every rotation and
            mirror (any angle, any line through the origin) mapping vertices onto vertices and edges
            onto edges (`_vertex_symmetries`).
    """
    v = np.asarray(vertices, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != 2 or len(v) < 3:
        raise ValueError(f"vertices must be [M, 2] with M >= 3, got {list(v.shape)}")
    if not np.isfinite(v).all():
        raise ValueError("vertices must be finite")
    vt = torch.as_tensor(v)
    return Shape(name, lambda x: _polygon_sdf(x, vt), group if group is not None else _vertex_symmetries(v),
                 {"kind": "polygon", "vertices": v.tolist()})


def regular_polygon(n: int, radius: float = 0.6, rotation: float = 0.0, name: str | None = None) -> Shape:
    """Regular n-gon with circumradius `radius`, a vertex at angle `rotation` (default on the
    x-axis, so mirror lines sit at multiples of pi / n); group D_n."""
    if int(n) != n or n < 3:
        raise ValueError(f"n must be an integer >= 3, got {n}")
    check_positive(radius=radius)
    t = rotation + 2 * math.pi * np.arange(n) / n
    v = radius * np.stack([np.cos(t), np.sin(t)], 1)
    return polygon(v, name or f"{n}-gon", _rotated_dihedral(int(n), rotation))


def triangle(radius: float = 0.6) -> Shape:
    return regular_polygon(3, radius, name="triangle")


def pentagon(radius: float = 0.6) -> Shape:
    return regular_polygon(5, radius, name="pentagon")


def hexagon(radius: float = 0.6) -> Shape:
    return regular_polygon(6, radius, name="hexagon")


def star(n: int = 5, outer: float = 0.65, inner: float = 0.3, rotation: float = 0.0) -> Shape:
    """n-pointed star (2n vertices alternating between radii outer and inner); group D_n."""
    if int(n) != n or n < 2:
        raise ValueError(f"n must be an integer >= 2, got {n}")
    check_positive(outer=outer, inner=inner)
    if inner >= outer:
        raise ValueError(f"inner radius must be below outer, got {inner} >= {outer}")
    t = rotation + math.pi * np.arange(2 * n) / n
    r = np.where(np.arange(2 * n) % 2 == 0, outer, inner)
    v = np.stack([r * np.cos(t), r * np.sin(t)], 1)
    return polygon(v, "star" if n == 5 else f"star{n}", _rotated_dihedral(int(n), rotation))


FACTORIES = {"circle": circle, "square": square, "rectangle": rectangle, "ellipse": ellipse,
             "triangle": triangle, "pentagon": pentagon, "hexagon": hexagon, "star": star}
