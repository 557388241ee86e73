"""symfast: read symmetries out of trained neural-network weights, fast."""
from symfast import shapes
from symfast._ext import cpp_available
from symfast.encodings import DyadicAxisPE, FourierPE, MultiAxisPE, RandomFourierPE, TriAxisPE
from symfast import nn
from symfast.ops.fourier_mlp import fourier_mlp, fourier_mlp_train_step
from symfast.groups import (Group, O2Element, cyclic, dihedral, identity, orthogonal_group, reflection,
                            rotation, rotation_sweep)

__version__ = "0.1.0"

__all__ = [
    "shapes", "cpp_available",
    "FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE",
    "O2Element", "Group", "rotation", "reflection", "identity", "dihedral", "cyclic", "rotation_sweep",
    "orthogonal_group",
    "nn", "fourier_mlp", "fourier_mlp_train_step",
]
