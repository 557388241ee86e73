"""Shapes with exact signed distance functions and declared symmetry groups: the targets the
neural fields are fitted to.

Modules: `base` (`Shape` and its recipe registry), `planar` (2D shapes, O(2) groups), `solids`
(3D shapes, O(3) groups), `meshes` (watertight triangle meshes and the exact triangle distance),
`samplers` (points in the disk, ball, box or near a surface), `population` (seeded random planar
shapes with groups known by construction, exact and near-symmetric), `population_solids` (the same members
extruded into prisms with known O(3) groups).
"""
from symfast.shapes import population, population_solids, samplers
from symfast.shapes.base import Shape
from symfast.shapes.meshes import mesh
from symfast.shapes.planar import (circle, ellipse, hexagon, pentagon, polygon, rectangle, regular_polygon, square,
                                   star, triangle)
from symfast.shapes.planar import FACTORIES as _PLANAR
from symfast.shapes.solids import (box, cube, cylinder, dodecahedron, icosahedron, octahedron, polyhedron, sphere,
                                   tetrahedron, torus)
from symfast.shapes.solids import FACTORIES as _SOLIDS

__all__ = ["Shape", "circle", "square", "rectangle", "ellipse", "regular_polygon", "triangle", "pentagon",
           "hexagon", "star", "polygon", "by_name", "NAMES", "NAMES_3D", "samplers", "population",
           "population_solids",
           "sphere", "box", "cube", "tetrahedron", "octahedron", "icosahedron", "dodecahedron", "polyhedron",
           "cylinder", "torus", "mesh"]

NAMES = tuple(_PLANAR)  # the 2D shapes
NAMES_3D = tuple(_SOLIDS)  # the 3D shapes with default parameters (not `mesh`, which needs a file)


def by_name(name: str) -> Shape:
    """A shape with default parameters by name (one of `NAMES` (2D) or `NAMES_3D`)."""
    factory = _PLANAR.get(name) or _SOLIDS.get(name)
    if factory is None:
        raise ValueError(f"unknown shape {name!r}; choose from {', '.join(NAMES + NAMES_3D)}")
    return factory()
