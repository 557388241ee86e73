"""Layerwise equivariance: recover hidden-layer group actions of MLPs.

"Identifiable Equivariant Networks are Layerwise Equivariant",
Shahverdi, Marchetti, Bökman, Kohn. Public entry points are re-exported in `symfast`.
"""
from symfast.layerwise.actions import LatentActions, LayerAction, data_errors, recover_latent_actions
from symfast.layerwise.group import GroupActions, HomomorphismReport, homomorphism_check
from symfast.layerwise.identifiable import Reduction, identifiable_submodel, near_linear_fraction
from symfast.ops.matching import MatchingScores, match_rows, matching_scores
from symfast.layerwise.network import MLP, as_mlp
from symfast.layerwise.planted import planted_mlp
from symfast.layerwise.projection import equivariance_error, project_equivariant, projection_report

__all__ = [
    "recover_latent_actions", "LatentActions", "LayerAction", "GroupActions", "HomomorphismReport",
    "homomorphism_check", "data_errors", "matching_scores", "MatchingScores", "match_rows", "MLP", "as_mlp",
    "planted_mlp", "identifiable_submodel", "Reduction", "near_linear_fraction", "project_equivariant",
    "projection_report", "equivariance_error",
]
