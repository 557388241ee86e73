"""symfast: read symmetries out of trained neural-network weights, fast."""
from symfast import shapes
from symfast._ext import cpp_available
from symfast.encodings import DyadicAxisPE, FourierPE, MultiAxisPE, RandomFourierPE, TriAxisPE
from symfast.ensemble import Ensemble
from symfast import nn
from symfast.ops.fourier_mlp import fourier_mlp, fourier_mlp_train_step
from symfast.groups import (Group, O2Element, cyclic, dihedral, identity, orthogonal_group, reflection,
                            rotation, rotation_sweep)
from symfast.readout import Readout, readout
from symfast.training import fit_sdf
# recurrent Schur ablations (papers/003)
from symfast import rnn
from symfast.ops.ordered_schur import OrderedSchur, ordered_schur, ordschur
from symfast.schur_ablation import schur_ablation
from symfast.schur_ablation import summarize as schur_ablation_summary
from symfast.layerwise import (GroupActions, LatentActions, LayerAction, MatchingScores, identifiable_submodel,
                               matching_scores, project_equivariant, recover_latent_actions)

__version__ = "0.1.0"

__all__ = [
    "shapes", "cpp_available",
    "FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE",
    "O2Element", "Group", "rotation", "reflection", "identity", "dihedral", "cyclic", "rotation_sweep",
    "orthogonal_group",
    "Ensemble", "fit_sdf", "readout", "Readout",
    "ordered_schur", "ordschur", "OrderedSchur", "schur_ablation", "schur_ablation_summary", "rnn",
    "recover_latent_actions", "matching_scores", "identifiable_submodel", "project_equivariant",
    "LatentActions", "LayerAction", "GroupActions", "MatchingScores",
    "nn", "fourier_mlp", "fourier_mlp_train_step",
]
