"""The solid population: each planar population member extruded into a prism whose O(3) group is known exactly.

Solid `index` of population `seed` is the planar member `symfast.shapes.population.draw(seed, index)`
(its cross-section, in the xy plane) extruded along z to half height h, drawn in [0.2, 0.4], and
shifted along z by `offset`. From a generator of its own, seeded by (seed, index, 3), so the planar
population is unchanged:

- **asymmetric** members always get an offset in [0.05, 0.1]; the other families get one with
  probability 1/2 (else offset 0).
- With offset 0 the prism is symmetric under the mirror z -> -z (`m[0,0,1]`): its group is the planar
  group G embedded in O(3) (rotations about z, mirrors in vertical planes) times {e, m[0,0,1]}, which
  adds the inversion (when G holds the half turn), rotoreflections about z and half turns about
  horizontal axes (the products of G's mirrors with m[0,0,1]). Named in Schoenflies style: planar D_n
  gives D_nh, C_n gives C_nh.
- With an offset the mirror z -> -z moves the prism by 2 offset >= 0.1: its group is G embedded,
  named C_nv (planar D_n) or C_n (planar C_n).

Near-symmetric members keep the planar epsilon: the perturbation moves the cross-section's boundary
radially by at most epsilon and the prism's lateral faces with it, so the base group's elements outside
the group move the solid's surface by exactly epsilon too.

The field: the planar member's tabulated SDF d (`population`'s polar table, exact to `TABLE_ERROR`)
extruded exactly: with w = |z - offset| - h, sdf = min(max(d, w), 0) + |(max(d, 0), max(w, 0))|. The
extrusion keeps d's planar group to rounding and, at offset 0, the mirror z -> -z exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symfast.groups import Group
from symfast.groups.elements import O3Element
from symfast.shapes import population as pop
from symfast.shapes.base import Shape, recipe

__all__ = ["SolidDraw", "draw_solid", "solid_shape", "embed", "HALF_HEIGHTS", "OFFSETS"]

HALF_HEIGHTS = (0.2, 0.4)  # the prism's half height h, uniform in this range
OFFSETS = (0.05, 0.1)  # the z shift that breaks z -> -z (moves the prism by 2 offset), uniform in this range
_FLIP = np.diag([1.0, 1.0, -1.0])


def _lift(g) -> np.ndarray:
    """The 3x3 matrix of a planar element acting on (x, y), fixing z."""
    m = np.eye(3)
    m[:2, :2] = g.matrix
    return m


def embed(group: Group, mirror_z: bool) -> Group:
    """A planar group as an O(3) group about the z axis, times {e, m[0,0,1]} when `mirror_z`."""
    mats = [_lift(g) for g in group]
    if mirror_z:
        mats += [_FLIP @ m for m in mats]
    n = sum(g.kind == "rotation" for g in group)
    dihedral = any(g.kind == "reflection" for g in group)
    name = f"{'D' if dihedral else 'C'}{n}h" if mirror_z else f"C{n}{'v' if dihedral else ''}"
    return Group([O3Element.from_matrix(m) for m in mats], name=name)


@dataclass(frozen=True)
class SolidDraw:
    """One solid of the population: the planar member `planar` extruded (see the module docstring).

    Attributes mirror `population.Draw` (seed, index, kind, n, epsilon, group, base_group; the groups in
    O(3)) so that sweeps and rates read either; half_height and offset place the prism along z."""

    planar: pop.Draw
    half_height: float
    offset: float
    group: Group
    base_group: Group

    seed = property(lambda self: self.planar.seed)
    index = property(lambda self: self.planar.index)
    kind = property(lambda self: self.planar.kind)
    n = property(lambda self: self.planar.n)
    epsilon = property(lambda self: self.planar.epsilon)

    @property
    def name(self) -> str:
        return f"solid{self.seed}-{self.index}"


def draw_solid(seed: int, index: int) -> SolidDraw:
    """Solid `index` of the population named by `seed` (see the module docstring)."""
    planar = pop.draw(seed, index)
    rng = np.random.default_rng([int(seed), int(index), 3])
    h = float(rng.uniform(*HALF_HEIGHTS))
    shifted = planar.kind == "asymmetric" or bool(rng.integers(0, 2))
    offset = float(rng.uniform(*OFFSETS)) if shifted else 0.0
    return SolidDraw(planar, h, offset, embed(planar.group, not shifted), embed(planar.base_group, not shifted))


class _Prism:
    """The extrusion of a planar member's tabulated SDF (a module-level class, so shapes pickle)."""

    def __init__(self, d: SolidDraw):
        self.section = pop.polar_table(d.planar)
        self.half_height, self.offset = d.half_height, d.offset

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        d = self.section(x[..., :2])
        w = (x[..., 2] - self.offset).abs() - self.half_height
        return torch.maximum(d, w).clamp(max=0) + torch.hypot(d.clamp(min=0), w.clamp(min=0))


@recipe("population_solid")
def solid_shape(seed: int, index: int) -> Shape:
    """Solid `index` of population `seed` as a 3D Shape (its group exact). It saves and pickles as its
    recipe {"kind": "population_solid", "seed", "index"}."""
    d = draw_solid(seed, index)
    return Shape(d.name, _Prism(d), d.group, {"kind": "population_solid", "seed": d.seed, "index": d.index}, dim=3)
