"""Fourier features: C++ kernel vs the PyTorch reference (N points, dyadic PE d = 48; 2D points,
and 3D points with 3 x 8 axis frequencies, also d = 48)."""
import math

import torch

import symfast as sf
from symfast.ops.fourier_features import fourier_features, reference

try:
    from ._timing import ratio
except ImportError:  # run as a script
    from _timing import ratio


class FourierFeatures:
    params = (["reference", "symfast"], [4096, 262144])
    param_names = ["impl", "n"]

    def setup(self, impl, n):
        pe = sf.DyadicAxisPE()
        self.x = torch.rand(n, 2) * 2 - 1
        self.w, self.b = pe.frequencies.float(), pe.phases.float()
        self.fn = (lambda: reference.fourier_features(self.x, self.w, self.b)) if impl == "reference" else (
            lambda: fourier_features(self.x, self.w, self.b, backend="cpu"))
        self.fn()  # warm-up: the first call pays for op registration and lazy initialisation

    def time_features(self, impl, n):
        self.fn()


def encoding(dim: int):
    """(frequencies [24, dim], phases [24]) float32: DyadicAxisPE() in 2D, 2^k pi e_i (k < 8) in 3D."""
    if dim == 2:
        pe = sf.DyadicAxisPE()
        return pe.frequencies.float(), pe.phases.float()
    f = torch.cat([2.0 ** k * math.pi * torch.eye(3) for k in range(8)])
    return f, torch.zeros(len(f))


class FourierFeaturesRatio:
    """reference / symfast time, measured side by side in one run."""
    params = ([4096, 262144], [2, 3])
    param_names = ["n", "dim"]

    def setup(self, n, dim):
        self.x = torch.rand(n, dim) * 2 - 1
        self.w, self.b = encoding(dim)

    def track_speedup(self, n, dim):
        return ratio(lambda: reference.fourier_features(self.x, self.w, self.b),
                     lambda: fourier_features(self.x, self.w, self.b, backend="cpu"))

    track_speedup.unit = "x"


if __name__ == "__main__":
    for dim in FourierFeaturesRatio.params[1]:
        for n in FourierFeaturesRatio.params[0]:
            b = FourierFeaturesRatio()
            b.setup(n, dim)
            print(f"fourier_features {dim}D n={n}: symfast {b.track_speedup(n, dim):.2f}x faster than reference")
