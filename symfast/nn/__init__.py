"""Fourier-encoded neural fields: the encodings, the trained-model data type and its nn.Modules.

Modules: `encodings` (`FourierPE` and its axis/random families, exact and least-squares lifts of
group elements), `ensemble` (`Ensemble`: B PE+MLP models as plain tensors, and its file format), `fields`
(`FourierMLPEnsemble` / `FourierMLP`: the trainable nn.Module form on the fused kernels;
`init_weights`), `sequential` (exact conversions to and from ordinary `nn.Sequential` models),
`layouts` (other libraries' Fourier encodings, NeRF/nerfstudio and tiny-cuda-nn, read exactly).
"""
from symfast.nn.encodings import (ENCODINGS, DyadicAxisPE, FourierPE, MultiAxisPE, RandomFourierPE, TriAxisPE,
                                  encoding_by_name)
from symfast.nn.ensemble import Ensemble
from symfast.nn.fields import FourierMLP, FourierMLPEnsemble, init_weights
from symfast.nn.layouts import LAYOUTS, from_sin_then_cos, nerf_frequencies, read_layout, tcnn_frequencies
from symfast.nn.sequential import ACTIVATION_MODULES, Sine

__all__ = ["FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE", "ENCODINGS",
           "encoding_by_name", "Ensemble", "FourierMLP", "FourierMLPEnsemble", "init_weights", "Sine",
           "ACTIVATION_MODULES", "from_sin_then_cos", "nerf_frequencies", "tcnn_frequencies", "read_layout", "LAYOUTS"]
