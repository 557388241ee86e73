"""Layerwise equivariance: recover hidden-layer group actions of MLPs, CNNs and attention blocks.

After "Identifiable Equivariant Networks are Layerwise Equivariant" (Shahverdi, Marchetti, Bökman, Kohn).
Public entry points are re-exported in `symfast`; the latent group of each activation is in
`symfast.activations`, the matching of neurons under it in `symfast.layerwise.neuron_matching`.
"""
from symfast.layerwise.recovery import LatentActions, LayerAction, data_errors, recover_latent_actions
from symfast.layerwise.group import GroupActions, HomomorphismReport, homomorphism_check
from symfast.layerwise.reduction import Reduction, identifiable_submodel, near_linear_fraction
from symfast.ops.matching import match_rows
from symfast.layerwise.network import MLP, as_mlp
from symfast.layerwise.planted import planted_mlp
from symfast.layerwise.projection import equivariance_error, project_equivariant, projection_report

__all__ = [
    "recover_latent_actions", "LatentActions", "LayerAction", "GroupActions", "HomomorphismReport",
    "homomorphism_check", "data_errors", "match_rows", "MLP", "as_mlp",
    "planted_mlp", "identifiable_submodel", "Reduction", "near_linear_fraction", "project_equivariant",
    "projection_report", "equivariance_error",
]
