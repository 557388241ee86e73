"""`Shape`: a named 2D or 3D shape with an exact signed distance function and a declared
symmetry group; and the registry of recipes that rebuild shapes from plain data.

SDFs are negative inside. Every shape is centred at the origin and fits in
the unit disk (2D) or unit ball (3D), the default sampling domains. `shape.symmetries(candidates)`
checks f(g^-1 x) = f(x) numerically, which must agree with `shape.group`.

A shape built by a factory (`symfast.shapes.planar`, `.solids`, `.mesh`) also carries `params`, the data-only recipe that
rebuilds it (`{"kind": "polygon", "vertices": [...]}`, `{"kind": "circle", "radius": r}`,
...); `shape.to_dict()` / `Shape.from_dict(d)` round-trip name, recipe and group
through plain lists and numbers, which is how a saved `Ensemble` stores its shapes.
A `Shape` made from an arbitrary callable saves its name and group only.

Shapes pickle (and so `copy`, `torch.save` and multiprocessing workers take them) through the same
recipe: a shape with one is pickled as `Shape.from_dict(shape.to_dict())`, plain data only; a shape
built from your own callable pickles when that callable does (a module-level function does, a
lambda or closure does not: pickling it raises TypeError naming the shape).
"""
from __future__ import annotations

import copy
import math
import pickle
from typing import Callable

import torch

from symfast.groups import Group, as_element
from symfast.shapes.samplers import sample_ball, sample_disk

__all__ = ["Shape", "RECIPES", "recipe"]

# kind -> factory: the recipes `Shape.from_dict` may call (filled by `recipe` in the factory modules).
RECIPES: dict[str, Callable[..., "Shape"]] = {}


def recipe(kind: str):
    """Register a factory as the recipe `{"kind": kind, ...}` that `Shape.from_dict` rebuilds from."""
    def register(factory):
        RECIPES[kind] = factory
        return factory
    return register


class Shape:
    """A named 2D or 3D shape: `.sdf(x)` for x: [..., dim] -> [...], and its declared `.group`.

    Args:
        name: label used in tables.
        sdf: callable x [..., dim] -> [...] (None for a shape loaded without its field).
        group: the declared symmetry group, or None to find it numerically with
            `symmetries(candidates)` when a readout needs it (see `true_group`).
        params: data-only recipe for `to_dict` (set by the factories of this module and of
            `symfast.shapes.solids`).
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
        if not isinstance(params, dict) or params.get("kind") not in RECIPES:
            raise ValueError(f"malformed shape recipe {params!r}; kinds are {sorted(RECIPES)}")
        args = {k: v for k, v in params.items() if k != "kind"}
        try:
            made = RECIPES[params["kind"]](**args)
        except TypeError as e:
            raise ValueError(f"malformed shape recipe {params!r}: {e}") from None
        return Shape(d["name"], made._sdf, group, made.params, made.dim)

    # -- pickling: through the recipe --------------------------------------------------------
    def __reduce_ex__(self, protocol):
        """Pickle as `Shape.from_dict(self.to_dict())` where the recipe rebuilds the field (or there
        is no field); else pickle the callable itself, with a clear TypeError when it cannot be."""
        if self._sdf is None or (isinstance(self.params, dict) and self.params.get("kind") in RECIPES):
            return (Shape.from_dict, (self.to_dict(),))
        try:
            pickle.dumps(self._sdf, protocol)
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            raise TypeError(f"cannot pickle shape {self.name!r}: its field is a callable without a recipe that "
                            f"pickle cannot store ({e}); define the SDF as a module-level function, or build the "
                            "shape with a factory of symfast.shapes (polygon, mesh, ...), whose recipe pickles") from None
        return (_rebuild, (self.name, self._sdf, self.group, self.params, self.dim))

    def __copy__(self) -> "Shape":
        return _rebuild(self.name, self._sdf, self.group, self.params, self.dim)

    def __deepcopy__(self, memo) -> "Shape":
        # the field is shared (it is never mutated), so a lambda-built shape deep-copies too
        return _rebuild(self.name, self._sdf, copy.deepcopy(self.group, memo), copy.deepcopy(self.params, memo),
                        self.dim)

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


def _rebuild(name, sdf, group, params, dim) -> Shape:
    """A Shape from its fields as stored, without validation (for copy and pickle)."""
    out = Shape.__new__(Shape)
    out.name, out._sdf, out.group, out.params, out.dim = name, sdf, group, params, dim
    return out


def check_positive(**kw):
    for k, val in kw.items():
        if not (val > 0 and math.isfinite(val)):
            raise ValueError(f"{k} must be positive and finite, got {val}")
