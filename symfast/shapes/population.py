"""A seeded population of random planar shapes whose symmetry groups are known exactly by construction.

Each shape is a star-shaped polygon whose vertex radii follow a random radial profile r(t), t = theta -
rotation, sampled at M = n * ceil(96 / n) equally spaced angles (so the vertex set is invariant under
the n-fold rotations and under the mirror at `rotation`):

- **dihedral** (D_n, n = 1..12): r(t) = r0 + c1 cos(n t) + c2 cos(2n t) (n = 1 adds c3 cos(3t)). Cosines
  only: mirror-symmetric about the line at `rotation`, with mirror lines at rotation + pi k / n.
- **cyclic** (C_n, n = 2..12): the same harmonics with phases, phi_2 = 2 phi_1 + delta, delta drawn in
  [pi/6, 5pi/6]: a mirror would need phi_2 = 2 phi_1 (mod pi), so there is none, by a margin.
- **asymmetric** (C_1): harmonics 1, 2, 3 with phases as for cyclic: no rotation, no mirror.
- **near**: a dihedral or cyclic base (n = 2..12) plus eps * p(t), p = cos(t - psi) + cos(3t - psi3)/2
  scaled so that max |p| over the vertex angles is 1. The first harmonic breaks every rotation; a
  dihedral base keeps psi = psi3 = 0 and with it the mirror at `rotation` (true group D1 =
  {r0, m<rotation>}), a cyclic base gets random phases (true group C1). The base group's other
  elements are **near-symmetries**: `epsilon` is exactly the largest radial displacement of a vertex.

Why polygons, and the field: the polygon is the shape (its exact signed distance is
`symfast.shapes.polygon`'s), so its group is a fact about the vertices, which tests read back exactly.
Training evaluates the SDF at every step, so `shape.sdf` is a bilinear interpolation of that exact
SDF tabulated on a polar grid aligned with the group (angles rotation + 2 pi j / T with n | T, radii
0..RHO_MAX): a rotation of the group shifts the table by T / n columns and the mirror at `rotation`
reverses them, so the interpolant has the shape's group to rounding. Its error against the exact
polygon SDF is measured in the tests (`TABLE_ERROR`). Points beyond RHO_MAX get the exact SDF. The lookup
runs in float32 for float32 points (training's) and in float64 for float64 points.

The global rotation is a multiple of ROTATION_STEP_DEG (7.5 degrees) so that mirror lines often meet
the lines the encodings lift (multiples of 45 and 30 degrees) and mirror misses are measurable.

A population is named by (seed, size): shape i is drawn from its own generator seeded by
(seed, i), so the first N shapes of a larger population are the population (seed, N).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from symfast.groups import Group, reflection, rotation
from symfast.shapes.base import Shape, recipe
from symfast.shapes.planar import polygon

__all__ = ["Draw", "draw", "population", "population_shape", "polar_table", "describe", "KINDS", "EPSILONS", "MAX_N",
           "ROTATION_STEP_DEG", "RHO_MAX", "TABLE_ERROR", "MAX_SEED", "MAX_SIZE"]

KINDS = ("dihedral", "cyclic", "near", "asymmetric")
KIND_WEIGHTS = (0.4, 0.3, 0.2, 0.1)
MAX_N = 12
EPSILONS = (0.002, 0.005, 0.01, 0.02, 0.05)  # near-symmetry sizes (largest radial displacement)
ROTATION_STEP_DEG = 7.5
MIN_VERTICES = 96
RHO_MAX = 1.5  # the table covers the unit disk and the corners of the [-1, 1]^2 box (sqrt 2)
TABLE_RADII, TABLE_ANGLES = 192, 720  # polar grid (angles rounded up to a multiple of n)
TABLE_ERROR = 5e-3  # the tests' bound on max |table - exact SDF| in the unit disk (measured: 2.7e-3, mean 3e-5)
MAX_SEED = 2**63 - 1
MAX_SIZE = 10**7


@dataclass(frozen=True)
class Draw:
    """One population member, as drawn: everything about it is a function of (seed, index).

    Attributes:
        seed, index: its name in the population.
        kind: "dihedral", "cyclic", "near" or "asymmetric".
        n: the base order (1 for asymmetric).
        rotation: the global rotation (radians, a multiple of ROTATION_STEP_DEG).
        epsilon: the near-symmetry size (0 for exact shapes).
        radii: [M] vertex radii at angles rotation + 2 pi k / M.
        group: the shape's symmetry group (exact).
        base_group: the base's group (= group when epsilon = 0); its elements outside `group` are the
            near-symmetries.
    """

    seed: int
    index: int
    kind: str
    n: int
    rotation: float
    epsilon: float
    radii: tuple
    group: Group
    base_group: Group

    @property
    def name(self) -> str:
        return f"pop{self.seed}-{self.index}"

    @property
    def vertices(self) -> np.ndarray:
        """[M, 2] float64 vertices, counter-clockwise."""
        r = np.asarray(self.radii)
        t = self.rotation + 2 * math.pi * np.arange(len(r)) / len(r)
        return np.stack([r * np.cos(t), r * np.sin(t)], 1)

    def polygon(self) -> Shape:
        """The shape with the exact polygon SDF (slower; what the table interpolates)."""
        return polygon(self.vertices, self.name, self.group)


def _check(seed, index=None, size=None) -> None:
    for name, v, hi in (("seed", seed, MAX_SEED), ("index", index, MAX_SIZE - 1), ("size", size, MAX_SIZE)):
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise ValueError(f"population {name} must be an integer, got {type(v).__name__} {v!r}")
        lo = 1 if name == "size" else 0
        if not lo <= v <= hi:
            raise ValueError(f"population {name} must be in {lo}..{hi}, got {v}")


def _dihedral(n: int, mirror: float) -> Group:
    return Group([rotation(2 * math.pi * k / n) for k in range(n)] +
                 [reflection(mirror + math.pi * k / n) for k in range(n)], name=f"D{n}")


def _cyclic(n: int) -> Group:
    return Group([rotation(2 * math.pi * k / n) for k in range(n)], name=f"C{n}")


def _harmonics(rng, n: int, r0: float, mirror: bool) -> list[tuple[int, float, float]]:
    """(k, amplitude, phase) of the base profile; phases are generic (no mirror) unless `mirror`."""
    orders = [1, 2, 3] if n == 1 else [n, 2 * n]
    amps = [r0 * rng.uniform(0.08, 0.25) / (j + 1) for j in range(len(orders))]
    if mirror:
        phases = [0.0] * len(orders)
    else:
        p1 = rng.uniform(0, 2 * math.pi)
        # phi_j = j phi_1 for all j is what a mirror needs; phi_2 is kept pi/6 or more away from it (mod pi)
        phases = [p1, 2 * p1 + rng.uniform(math.pi / 6, 5 * math.pi / 6)] + \
            [rng.uniform(0, 2 * math.pi) for _ in orders[2:]]
    return list(zip(orders, amps, phases))


def _profile(t: np.ndarray, r0: float, harmonics) -> np.ndarray:
    return r0 + sum(a * np.cos(k * t - p) for k, a, p in harmonics)


def draw(seed: int, index: int) -> Draw:
    """Member `index` of the population named by `seed` (see the module docstring)."""
    _check(seed, index)
    rng = np.random.default_rng([int(seed), int(index)])
    kind = KINDS[int(rng.choice(len(KINDS), p=KIND_WEIGHTS))]
    rot = math.radians(ROTATION_STEP_DEG * int(rng.integers(0, round(360 / ROTATION_STEP_DEG))))
    r0 = rng.uniform(0.45, 0.6)
    eps = 0.0
    if kind == "dihedral":
        n, base_mirror = int(rng.integers(1, MAX_N + 1)), True
    elif kind == "cyclic":
        n, base_mirror = int(rng.integers(2, MAX_N + 1)), False
    elif kind == "asymmetric":
        n, base_mirror = 1, False
    else:
        n, base_mirror = int(rng.integers(2, MAX_N + 1)), bool(rng.integers(0, 2))
        eps = float(EPSILONS[int(rng.integers(0, len(EPSILONS)))])
    m = n * math.ceil(MIN_VERTICES / n)
    t = 2 * math.pi * np.arange(m) / m
    radii = _profile(t, r0, _harmonics(rng, n, r0, base_mirror))
    base = _dihedral(n, rot) if base_mirror else _cyclic(n)
    group = base
    if kind == "near":
        psi = (0.0, 0.0) if base_mirror else tuple(rng.uniform(0, 2 * math.pi, 2))
        p = np.cos(t - psi[0]) + 0.5 * np.cos(3 * t - psi[1])
        radii = radii + eps * p / np.abs(p).max()
        group = Group([rotation(0.0), reflection(rot)], name="D1") if base_mirror else _cyclic(1)
    return Draw(int(seed), int(index), kind, n, rot, eps, tuple(float(r) for r in radii), group, base)


class _PolarTable:
    """Bilinear interpolation of a polygon's exact SDF on a polar grid (see the module docstring).

    Built on first use (drawing a population stays cheap); a module-level class, so shapes pickle.
    Evaluated in float64 for float64 points and in float32 otherwise: training samples float32 points at
    every step, and float32 makes the lookup about three times faster there (it changes the targets by
    rounding only, ~1e-7, far below TABLE_ERROR)."""

    def __init__(self, vertices: np.ndarray, rot: float, n: int):
        self.vertices, self.rot = np.asarray(vertices, dtype=np.float64), float(rot)
        self.angles = n * math.ceil(TABLE_ANGLES / n)
        self._rot_wrapped = math.remainder(self.rot, 2 * math.pi)  # in (-pi, pi]: theta - rot in (-2 pi, 2 pi)
        self.exact = polygon(self.vertices, "exact").sdf
        self.table = None
        self._flat = {}  # working dtype -> the table with its first angle column repeated last, flattened

    def _build(self) -> torch.Tensor:
        rho = torch.linspace(0, RHO_MAX, TABLE_RADII, dtype=torch.float64)
        th = self.rot + 2 * math.pi * torch.arange(self.angles, dtype=torch.float64) / self.angles
        pts = torch.stack([rho[:, None] * torch.cos(th)[None], rho[:, None] * torch.sin(th)[None]], -1)
        return self.exact(pts)  # [radii, angles]

    def _flat_table(self, dtype: torch.dtype) -> torch.Tensor:
        if dtype not in self._flat:
            if self.table is None:
                self.table = self._build()
            self._flat[dtype] = torch.cat([self.table, self.table[:, :1]], 1).to(dtype).reshape(-1)
        return self._flat[dtype]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        t, width = self._flat_table(dtype), self.angles + 1
        px, py = (c.contiguous() for c in x.to(dtype).unbind(-1))  # contiguous: strided math is ~4x slower
        rho = torch.hypot(px, py)
        # the column coordinate u in [0, angles]: one wrap suffices as theta - rot lies in (-2 pi, 2 pi)
        u = torch.atan2(py, px).sub_(self._rot_wrapped).mul_(self.angles / (2 * math.pi))
        u = torch.where(u < 0, u + self.angles, u)
        j0 = u.floor().clamp_(max=self.angles - 1)
        a = u - j0
        v = (rho * ((TABLE_RADII - 1) / RHO_MAX)).clamp_(max=TABLE_RADII - 1)
        i0 = v.floor().clamp_(max=TABLE_RADII - 2)
        b = v - i0
        k = (i0 * width + j0).long()
        inner = torch.lerp(t.take(k), t.take(k + 1), a)
        outer = torch.lerp(t.take(k + width), t.take(k + width + 1), a)
        out = torch.lerp(inner, outer, b)
        far = rho > RHO_MAX
        if far.any():
            out = torch.where(far, self.exact(x.to(torch.float64)).to(dtype), out)
        return out.to(x.dtype)


def polar_table(d: Draw) -> _PolarTable:
    """A member's field: its polygon's exact SDF, tabulated on the polar grid of its group."""
    return _PolarTable(d.vertices, d.rotation, d.n)


@recipe("population")
def population_shape(seed: int, index: int) -> Shape:
    """Member `index` of population `seed` as a Shape (its group exact; `.sdf` the interpolated table).
    It saves and pickles as its recipe {"kind": "population", "seed", "index"}."""
    d = draw(seed, index)
    return Shape(d.name, polar_table(d), d.group,
                 {"kind": "population", "seed": d.seed, "index": d.index})


def population(seed: int, size: int, start: int = 0) -> list[Shape]:
    """Shapes start..size-1 of the population named by (seed, size)."""
    _check(seed, size=size)
    return [population_shape(seed, i) for i in range(start, size)]


def describe(seed: int, size: int):
    """One row per member: index, name, kind, n, rotation_deg, epsilon, group, base_group (pandas DataFrame)."""
    import pandas as pd

    _check(seed, size=size)
    rows = []
    for i in range(size):
        d = draw(seed, i)
        rows.append(dict(index=i, name=d.name, kind=d.kind, n=d.n, rotation_deg=math.degrees(d.rotation),
                         epsilon=d.epsilon, group=d.group.name, base_group=d.base_group.name))
    return pd.DataFrame(rows)
