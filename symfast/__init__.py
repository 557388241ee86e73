"""symfast: read symmetries out of trained neural-network weights, fast.

Layout, each layer importing only from the layers below it: shared kernels in `symfast.ops` (one
folder per op: public function and dispatch, PyTorch reference, CPU and Triton kernels); geometry
in `symfast.groups` (O(2)/O(3) elements and groups) and `symfast.shapes`; Fourier encodings and
neural fields in `symfast.nn`; the three studies in `symfast.readout`, `symfast.layerwise` and
`symfast.schur`; the report in `symfast.report`; the command line in `symfast.commands`. The
public names below are re-exported here; `symfast.readout(...)` is the readout function (its
study package is `import symfast.readout`).
"""
import sys as _sys

from symfast._ext import cpp_available
from symfast._version import __version__
from symfast import groups, nn, shapes
from symfast.groups import (Group, O2Element, cyclic, dihedral, identity, o3, orthogonal_group, reflection, rotation,
                            rotation_sweep)
from symfast.nn import DyadicAxisPE, Ensemble, FourierPE, MultiAxisPE, RandomFourierPE, TriAxisPE
from symfast.ops.fourier_mlp import fourier_mlp, fourier_mlp_train_step
from symfast.ops.ordered_schur import OrderedSchur, ordered_schur, ordschur
from symfast.shapes import samplers
# symmetry readout from neural fields
from symfast.readout import Readout, fit_sdf, sweeps
from symfast.readout.matching import MatchingScores, matching_scores
# layerwise equivariance
from symfast.layerwise import (GroupActions, LatentActions, LayerAction, identifiable_submodel, project_equivariant,
                               recover_latent_actions)
# recurrent Schur ablations
from symfast.schur import rnn, schur_ablation, schur_ablation_summary
# `symfast.readout` names the function; the package stays importable as `symfast.readout`
from symfast.readout import readout


# `import symfast.o3` / `symfast.samplers` / `symfast.sweeps` / `symfast.rnn` keep working as short
# names for the modules they name.
for _name, _mod in (("o3", o3), ("samplers", samplers), ("sweeps", sweeps), ("rnn", rnn)):
    _sys.modules.setdefault(f"symfast.{_name}", _mod)

__all__ = [
    "groups", "shapes", "samplers", "sweeps", "o3", "nn", "cpp_available",
    "FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE",
    "O2Element", "Group", "rotation", "reflection", "identity", "dihedral", "cyclic", "rotation_sweep",
    "orthogonal_group",
    "Ensemble", "fit_sdf", "readout", "Readout",
    "ordered_schur", "ordschur", "OrderedSchur", "schur_ablation", "schur_ablation_summary", "rnn",
    "recover_latent_actions", "matching_scores", "identifiable_submodel", "project_equivariant",
    "LatentActions", "LayerAction", "GroupActions", "MatchingScores",
    "fourier_mlp", "fourier_mlp_train_step",
]
