"""Fourier features: C++ kernel vs the PyTorch reference (N points, dyadic PE d = 48)."""
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

    def time_features(self, impl, n):
        self.fn()


class FourierFeaturesRatio:
    """reference / symfast time, measured side by side in one run."""
    params = [4096, 262144]
    param_names = ["n"]

    def setup(self, n):
        pe = sf.DyadicAxisPE()
        self.x = torch.rand(n, 2) * 2 - 1
        self.w, self.b = pe.frequencies.float(), pe.phases.float()

    def track_speedup(self, n):
        return ratio(lambda: reference.fourier_features(self.x, self.w, self.b),
                     lambda: fourier_features(self.x, self.w, self.b, backend="cpu"))

    track_speedup.unit = "x"


if __name__ == "__main__":
    for n in FourierFeaturesRatio.params:
        b = FourierFeaturesRatio()
        b.setup(n)
        print(f"fourier_features n={n}: symfast {b.track_speedup(n):.2f}x faster than reference")
