"""symfast: read symmetries out of trained neural-network weights, fast.

Layout: shared kernels in `symfast.ops` (one folder per op: public function and
dispatch, PyTorch reference, CPU and Triton kernels); the three studies above
them in `symfast.readout`, `symfast.layerwise` and `symfast.schur`; the command
line in `symfast.commands`. The public names below are re-exported here.
"""
import sys as _sys

from symfast._ext import cpp_available
from symfast import nn
from symfast.ops.fourier_mlp import fourier_mlp, fourier_mlp_train_step
from symfast.ops.ordered_schur import OrderedSchur, ordered_schur, ordschur
# symmetry readout from neural fields
from symfast import readout  # the package; calling it runs `symfast.readout.readout.readout`
from symfast.readout import (DyadicAxisPE, Ensemble, FourierPE, Group, MultiAxisPE, O2Element, RandomFourierPE,
                             Readout, TriAxisPE, cyclic, dihedral, fit_sdf, identity, orthogonal_group, reflection,
                             rotation, rotation_sweep, samplers, shapes, sweeps)
from symfast.readout import o3  # O(3) elements and finite groups: sf.o3.octahedral(), ...
# layerwise equivariance
from symfast.layerwise import (GroupActions, LatentActions, LayerAction, MatchingScores, identifiable_submodel,
                               matching_scores, project_equivariant, recover_latent_actions)
# recurrent Schur ablations
from symfast.schur import rnn, schur_ablation, schur_ablation_summary

# The one place the version is written: the build reads it from here into the package metadata.
__version__ = "0.1.0"

# `import symfast.shapes` / `symfast.sweeps` / `symfast.rnn` keep working as short names for the
# study modules.
for _name, _mod in (("o3", o3), ("shapes", shapes), ("samplers", samplers), ("sweeps", sweeps), ("rnn", rnn)):
    _sys.modules.setdefault(f"symfast.{_name}", _mod)

__all__ = [
    "shapes", "samplers", "sweeps", "o3", "cpp_available",
    "FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE",
    "O2Element", "Group", "rotation", "reflection", "identity", "dihedral", "cyclic", "rotation_sweep",
    "orthogonal_group",
    "Ensemble", "fit_sdf", "readout", "Readout",
    "ordered_schur", "ordschur", "OrderedSchur", "schur_ablation", "schur_ablation_summary", "rnn",
    "recover_latent_actions", "matching_scores", "identifiable_submodel", "project_equivariant",
    "LatentActions", "LayerAction", "GroupActions", "MatchingScores",
    "nn", "fourier_mlp", "fourier_mlp_train_step",
]
