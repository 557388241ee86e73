"""Symmetry readout from neural-field weights.

Fourier-encoded MLPs fitted to signed distance functions; exact lifts of O(2)
elements through the encoding; Gram observables of the weights; the hierarchy
G_obs ⊆ G_lift ∩ G_true (Chiba,
Sugiyama, Uranishi, arXiv 2607.03108).

Modules: `groups` (O(2) elements, `Group`), `o3` (O(3) elements and finite groups),
`shapes` (exact SDFs), `solids` (3D shapes and meshes), `samplers`,
`encodings` (Fourier PEs and their lifts), `ensemble` (the trained-model
container), `training` (`fit_sdf`), `observables`, `decision` (the test behind
"observed"), `readout` (the three sets per shape and encoding), `calibration` (measured
error rates), `budget` (adaptive training rounds), `plots`, `sweeps` (grids of trainings).
"""
import sys as _sys
import types as _types

from symfast.readout import o3, samplers, shapes, solids, sweeps
from symfast.readout.encodings import DyadicAxisPE, FourierPE, MultiAxisPE, RandomFourierPE, TriAxisPE
from symfast.readout.ensemble import Ensemble
from symfast.readout.groups import (Group, O2Element, cyclic, dihedral, identity, orthogonal_group, reflection,
                                    rotation, rotation_sweep)
from symfast.readout.readout import Readout, readout
from symfast.readout.training import fit_sdf

__all__ = [
    "o3", "samplers", "shapes", "solids", "sweeps", "FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE",
    "Ensemble", "Group", "O2Element", "cyclic", "dihedral", "identity", "orthogonal_group", "reflection",
    "rotation", "rotation_sweep", "Readout", "readout", "fit_sdf",
]


class _CallableModule(_types.ModuleType):
    """`symfast.readout` is the study's package and, called, the `readout` function, so that both
    `sf.readout(ensemble)` and `import symfast.readout.shapes` work."""

    def __call__(self, *args, **kwargs):
        return readout(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
