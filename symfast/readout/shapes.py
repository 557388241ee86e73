"""2D shapes with exact signed distance functions and declared symmetry groups; the 3D ones
(`sphere`, `cube`, `icosahedron`, `mesh`, ...) live in `symfast.readout.solids` and are
re-exported here.

SDFs are negative inside. Every shape is centred at the origin and fits in
the unit disk (2D) or unit ball (3D), the default sampling domains. `shape.symmetries(candidates)`
checks f(g^-1 x) = f(x) numerically, which must agree with `shape.group`.

A shape built by a factory here also carries `params`, the data-only recipe that
rebuilds it (`{"kind": "polygon", "vertices": [...]}`, `{"kind": "circle", "radius": r}`,
...); `shape.to_dict()` / `Shape.from_dict(d)` round-trip name, recipe and group
through plain lists and numbers, which is how a saved `Ensemble` stores its shapes.
A `Shape` made from an arbitrary callable saves its name and group only.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np
import torch

from symfast.readout.groups import Group, as_element, dihedral, orthogonal_group, reflection, rotation, union

__all__ = ["Shape", "circle", "square", "rectangle", "ellipse", "regular_polygon", "triangle", "pentagon",
           "hexagon", "star", "polygon", "by_name", "NAMES", "NAMES_3D",
           # 3D, from symfast.readout.solids
           "sphere", "box", "cube", "tetrahedron", "octahedron", "icosahedron", "dodecahedron", "polyhedron",
           "cylinder", "torus", "mesh"]


class Shape:
    """A named 2D or 3D shape: `.sdf(x)` for x: [..., dim] -> [...], and its declared `.group`.

    Args:
        name: label used in tables.
        sdf: callable x [..., dim] -> [...] (None for a shape loaded without its field).
        group: the declared symmetry group, or None to find it numerically with
            `symmetries(candidates)` when a readout needs it (see `true_group`).
        params: data-only recipe for `to_dict` (set by the factories of this module and of
            `symfast.readout.solids`).
        dim: 2 (points in the plane, O(2) groups) or 3 (points in space, O(3) groups).
    """

    def __init__(self, name: str, sdf: Callable[[torch.Tensor], torch.Tensor] | None, group: Group | None = None,
                 params: dict | None = None, dim: int = 2):
        if group is not None and not isinstance(group, Group):
            raise ValueError(f"group must be a symfast Group or None, got {type(group).__name__}")
        if dim not in (2, 3):
            raise ValueError(f"dim must be 2 or 3, got {dim!r}")
        if group is not None and group.dim not in (None, dim):
            raise ValueError(f"a {dim}D shape needs a group of {dim}D elements, got {group.name} ({group.dim}D)")
        self.dim = dim
        self.name = str(name)
        self._sdf = sdf
        self.group = group
        self.params = params

    def true_group(self, candidates) -> Group:
        """The declared group, or (when none was declared) the candidates the field is invariant under."""
        return self.group if self.group is not None else self.symmetries(candidates)

    def to_dict(self) -> dict:
        """{"name", "params", "group", "dim"} as plain data (`torch.load(weights_only=True)` reads it)."""
        return {"name": self.name, "params": self.params,
                "group": None if self.group is None else self.group.to_dict(), "dim": self.dim}

    @staticmethod
    def from_dict(d: dict) -> "Shape":
        """Rebuild a shape saved by `to_dict`: its field from the recipe (if one was saved), its
        name and group as saved. Raises ValueError on malformed data."""
        if not isinstance(d, dict) or not {"name", "params", "group"} <= set(d):
            raise ValueError(f"malformed shape data {d!r}")
        group = None if d["group"] is None else Group.from_dict(d["group"])
        params = d["params"]
        dim = d.get("dim", 2)  # data saved before 3D shapes existed is 2D
        if params is None:
            return Shape(d["name"], None, group, dim=dim)
        if not isinstance(params, dict) or params.get("kind") not in _RECIPES:
            raise ValueError(f"malformed shape recipe {params!r}; kinds are {sorted(_RECIPES)}")
        args = {k: v for k, v in params.items() if k != "kind"}
        try:
            made = _RECIPES[params["kind"]](**args)
        except TypeError as e:
            raise ValueError(f"malformed shape recipe {params!r}: {e}") from None
        return Shape(d["name"], made._sdf, group, made.params, made.dim)

    def sdf(self, x) -> torch.Tensor:
        """Signed distance (negative inside) at x: [..., dim]; numpy input gives float64."""
        if self._sdf is None:
            raise ValueError(f"shape {self.name!r} was saved without its field (a custom callable); "
                             "only its name and group are known")
        x = torch.as_tensor(x)
        if x.shape[-1] != self.dim:
            raise ValueError(f"x must be [..., {self.dim}] for the {self.dim}D shape {self.name!r}, "
                             f"got {list(x.shape)}")
        if not x.is_floating_point():
            x = x.to(torch.float64)
        return self._sdf(x)

    __call__ = sdf

    def symmetries(self, candidates, num_points: int = 4096, tol: float = 1e-6, seed: int = 0) -> Group:
        """The candidates g with f(g^-1 x) = f(x) (max abs error < tol) on points in the unit disk
        (2D) or unit ball (3D). Candidates must act in the shape's dimension (ValueError otherwise)."""
        from symfast.readout.samplers import sample_ball, sample_disk

        domain = sample_disk if self.dim == 2 else sample_ball
        x = domain(num_points, 1.0, torch.Generator().manual_seed(seed), torch.float64)
        f = self.sdf(x)
        cands = [as_element(c) for c in candidates]
        wrong = [g.name for g in cands if g.matrix.shape[0] != self.dim]
        if wrong:
            raise ValueError(f"candidates {wrong[:3]} do not act in {self.dim}D, the dimension of {self.name!r}")
        keep = [g for g in cands if (self.sdf(g.inverse()(x)) - f).abs().max().item() < tol]
        return Group(keep, name=f"sym({self.name})")

    def __repr__(self) -> str:
        return f"<Shape {self.name} {self.dim}D group={'?' if self.group is None else self.group.name}>"


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


def _vertex_symmetries(v: np.ndarray, name: str) -> Group:
    """Elements of O(2) (among D_k, k <= len(v)) mapping the vertex set onto itself."""
    cands = union([dihedral(k) for k in range(1, len(v) + 1)])
    scale = np.abs(v).max()
    keep = []
    for g in cands:
        gv = v @ g.matrix.T
        dist = np.abs(gv[:, None, :] - v[None, :, :]).max(-1)
        if (dist.min(1) < 1e-9 * scale).all():
            keep.append(g)
    return Group(keep, name=name)


def _rotated_dihedral(n: int, rot: float) -> Group:
    """D_n whose mirror lines sit at rot + pi k / n."""
    elems = [rotation(2 * math.pi * k / n) for k in range(n)] + [reflection(rot + math.pi * k / n)
                                                                  for k in range(n)]
    return Group(elems, name=f"D{n}")


def circle(radius: float = 0.5) -> Shape:
    """Disk of `radius`; group O(2)."""
    _pos(radius=radius)
    return Shape("circle", lambda x: x.norm(dim=-1) - radius, orthogonal_group(),
                 {"kind": "circle", "radius": float(radius)})


def square(half_width: float = 0.5) -> Shape:
    """Axis-aligned square [-h, h]^2; group D4."""
    _pos(half_width=half_width)
    return Shape("square", lambda x: _box_sdf(x, half_width, half_width), dihedral(4),
                 {"kind": "square", "half_width": float(half_width)})


def rectangle(half_width: float = 0.6, half_height: float = 0.35) -> Shape:
    """Axis-aligned rectangle; group D2 = {e, r180, m0, m90}."""
    _pos(half_width=half_width, half_height=half_height)
    if abs(half_width - half_height) < 1e-12:
        raise ValueError("rectangle with equal sides is a square; use square()")
    return Shape("rectangle", lambda x: _box_sdf(x, half_width, half_height), dihedral(2),
                 {"kind": "rectangle", "half_width": float(half_width), "half_height": float(half_height)})


def ellipse(a: float = 0.6, b: float = 0.35, iterations: int = 6) -> Shape:
    """Axis-aligned ellipse with semi-axes a (x) and b (y); group D2.

    Distance by the fixed-point iteration for the closest boundary point (converges to
    ~1e-12 in a few steps away from the centre), signed by the implicit equation.
    """
    _pos(a=a, b=b)
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


def polygon(vertices, name: str = "polygon", group: Group | None = None) -> Shape:
    """Simple polygon with exact signed distance; the group is read off the vertices if not given."""
    v = np.asarray(vertices, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != 2 or len(v) < 3:
        raise ValueError(f"vertices must be [M, 2] with M >= 3, got {list(v.shape)}")
    if not np.isfinite(v).all():
        raise ValueError("vertices must be finite")
    vt = torch.as_tensor(v)
    return Shape(name, lambda x: _polygon_sdf(x, vt), group if group is not None else _vertex_symmetries(v, "sym"),
                 {"kind": "polygon", "vertices": v.tolist()})


def regular_polygon(n: int, radius: float = 0.6, rotation: float = 0.0, name: str | None = None) -> Shape:
    """Regular n-gon with circumradius `radius`, a vertex at angle `rotation` (default on the
    x-axis, so mirror lines sit at multiples of pi / n); group D_n."""
    if int(n) != n or n < 3:
        raise ValueError(f"n must be an integer >= 3, got {n}")
    _pos(radius=radius)
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
    _pos(outer=outer, inner=inner)
    if inner >= outer:
        raise ValueError(f"inner radius must be below outer, got {inner} >= {outer}")
    t = rotation + math.pi * np.arange(2 * n) / n
    r = np.where(np.arange(2 * n) % 2 == 0, outer, inner)
    v = np.stack([r * np.cos(t), r * np.sin(t)], 1)
    return polygon(v, "star" if n == 5 else f"star{n}", _rotated_dihedral(int(n), rotation))


def _pos(**kw):
    for k, val in kw.items():
        if not (val > 0 and math.isfinite(val)):
            raise ValueError(f"{k} must be positive and finite, got {val}")


# 3D shapes (their module imports `Shape` from this one, which is defined by now)
from symfast.readout.solids import (box, cube, cylinder, dodecahedron, icosahedron, mesh, octahedron,  # noqa: E402
                                    polyhedron, sphere, tetrahedron, torus)
from symfast.readout import solids as _solids  # noqa: E402

_FACTORIES = {"circle": circle, "square": square, "rectangle": rectangle, "ellipse": ellipse,
              "triangle": triangle, "pentagon": pentagon, "hexagon": hexagon, "star": star}
NAMES = tuple(_FACTORIES)  # the 2D shapes
NAMES_3D = tuple(_solids.FACTORIES)  # the 3D shapes with default parameters (not `mesh`, which needs a file)
# Recipes `Shape.from_dict` may call (all other 2D factories build polygons).
_RECIPES = {"circle": circle, "square": square, "rectangle": rectangle, "ellipse": ellipse, "polygon": polygon,
            **_solids.RECIPES}


def by_name(name: str) -> Shape:
    """A shape with default parameters by name (one of `NAMES` (2D) or `NAMES_3D`)."""
    factory = _FACTORIES.get(name) or _solids.FACTORIES.get(name)
    if factory is None:
        raise ValueError(f"unknown shape {name!r}; choose from {', '.join(NAMES + NAMES_3D)}")
    return factory()
