"""Fourier positional encodings and their exact lifts of O(2) elements.

Features are sin/cos(w_j . x + b_j), interleaved per frequency. Since
w . (g x) = (g^T w) . x, an element g lifts exactly (phi(g x) = rho(g) phi(x)
for all x) iff g^T maps the frequency multiset onto itself up to sign; the
phase difference is then absorbed by a 2x2 block, so rho(g) is a permutation
of 2x2 orthogonal blocks. It is found by matching
frequencies, not by fitting.

The frequencies and phases are float64 buffers (saved in `state_dict`) that module casts
(`.float()`, `.half()`, `.to(dtype)`) never touch: they move between devices with the
module but stay float64, so the lifts stay exact whatever dtype the model around them runs
in. The features are computed in the input's dtype.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from symfast.readout.groups import as_element
from symfast.ops.fourier_features import fourier_features

__all__ = ["FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE"]


class FourierPE(torch.nn.Module):
    """Generic Fourier positional encoding phi: R^2 -> R^d, d = 2m.

    Args:
        frequencies: [m, 2] frequency vectors w_j.
        phases: [m] phases b_j (default zeros).
        name: short name used in tables ("dyadic", "triaxis", "rff", ...).
    """

    def __init__(self, frequencies, phases=None, name: str = "fourier"):
        super().__init__()
        for arg, value in (("frequencies", frequencies), ("phases", phases)):
            if value is not None and (value.is_complex() if isinstance(value, torch.Tensor)
                                      else np.iscomplexobj(value)):
                raise TypeError(f"{arg} must be real, got a complex array")
        w = torch.as_tensor(np.asarray(frequencies, dtype=np.float64))
        if w.ndim != 2 or w.shape[1] != 2 or w.shape[0] < 1:
            raise ValueError(f"frequencies must be [m, 2] with m >= 1, got {list(w.shape)}")
        b = torch.zeros(w.shape[0], dtype=torch.float64) if phases is None else torch.as_tensor(
            np.asarray(phases, dtype=np.float64))
        if b.shape != (w.shape[0],):
            raise ValueError(f"phases must be [{w.shape[0]}], got {list(b.shape)}")
        if not (torch.isfinite(w).all() and torch.isfinite(b).all()):
            raise ValueError("frequencies and phases must be finite")
        self.register_buffer("frequencies", w)
        self.register_buffer("phases", b)
        self.name = name

    @property
    def dim(self) -> int:
        return 2 * self.frequencies.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., 2] (float32/float64, any device) -> [..., d] in x's dtype."""
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(x)
        if not x.is_floating_point() and not x.is_complex():  # complex: fourier_features raises
            x = x.to(torch.get_default_dtype())
        return fourier_features(x, self.frequencies, self.phases)

    def _apply(self, fn, recurse=True):
        """Module casts move the float64 frequencies/phases to the new device but keep them
        float64 (a float32 copy of 2^k pi would break phi(gx) = rho(g) phi(x))."""
        exact = {"frequencies": self.frequencies, "phases": self.phases}
        super()._apply(fn, recurse)
        for name, master in exact.items():
            moved = getattr(self, name)
            setattr(self, name, master.to(device=moved.device, dtype=torch.float64))
        return self

    def extra_repr(self) -> str:
        return f"name={self.name!r}, dim={self.dim}"

    def config(self) -> dict:
        """Everything needed to rebuild this encoding (see `FourierPE.from_config`)."""
        return {"name": self.name, "frequencies": self.frequencies.cpu().tolist(),
                "phases": self.phases.cpu().tolist()}

    @staticmethod
    def from_config(cfg: dict) -> "FourierPE":
        return FourierPE(cfg["frequencies"], cfg["phases"], name=cfg.get("name", "fourier"))

    # -- lifts ---------------------------------------------------------------------------
    def lift(self, g, tol: float = 1e-9) -> np.ndarray | None:
        """Exact lift rho(g) as a [d, d] float64 array, or None when g is not liftable.

        phi(g x) = rho(g) phi(x) for all x. Found by matching g^T w_j = s w_i (s = +-1).
        """
        g = as_element(g)
        w = self.frequencies.cpu().numpy()
        b = self.phases.cpu().numpy()
        m = w.shape[0]
        scale = max(1.0, float(np.abs(w).max()))
        target = w @ g.matrix  # row j: (g^T w_j)^T
        used = np.zeros(m, dtype=bool)
        rho = np.zeros((2 * m, 2 * m))
        for j in range(m):
            match = None
            for s in (1.0, -1.0):
                dist = np.abs(target[j][None, :] - s * w).max(axis=1) / scale
                for i in np.flatnonzero((dist < tol) & ~used):
                    match = (int(i), s)
                    break
                if match:
                    break
            if match is None:
                return None
            i, s = match
            used[i] = True
            c = b[j] - s * b[i]
            cc, sc = math.cos(c), math.sin(c)
            # [sin(s a + c), cos(s a + c)] = block @ [sin a, cos a], a = w_i . x + b_i
            rho[2 * j: 2 * j + 2, 2 * i: 2 * i + 2] = [[s * cc, sc], [-s * sc, cc]]
        return rho

    def is_liftable(self, g) -> bool:
        return self.lift(g) is not None

    def lift_lstsq(self, g, num_samples: int = 4096, radius: float = 1.0, seed: int = 0,
                   orthogonal: bool = False):
        """Least-squares lift on samples, for any g (exact when g is liftable).

        rho_hat = argmin_rho ||phi(g X) - rho phi(X)||_F over X uniform in the disk of
        `radius` (the training domain, invariant under O(2)). With `orthogonal=True` the
        minimiser is taken over orthogonal matrices (orthogonal Procrustes), like the exact
        lifts, so scores rho^T Phi rho stay on the scale of exact ones.

        Returns:
            (rho_hat [d, d] float64 numpy, relative residual ||phi(gX) - rho_hat phi(X)|| / ||phi(gX)||).
        """
        from symfast.readout.samplers import sample_disk

        g = as_element(g)
        key = (num_samples, radius, seed)
        if getattr(self, "_lstsq_cache", (None,))[0] != key:  # samples and phi(X) reused across a sweep
            x = sample_disk(num_samples, radius=radius, generator=torch.Generator().manual_seed(seed),
                            dtype=torch.float64)
            self._lstsq_cache = (key, x, self(x.to(self.frequencies.device)).cpu().numpy())
        _, x, a = self._lstsq_cache
        target = self(g(x).to(self.frequencies.device)).cpu().numpy()
        if orthogonal:  # Procrustes: sol = U V^T from the SVD of a^T target
            u, _, vt = np.linalg.svd(a.T @ target)
            sol = u @ vt
        else:
            sol, *_ = np.linalg.lstsq(a, target, rcond=None)  # a @ sol ~ target, sol = rho^T
        resid = np.linalg.norm(a @ sol - target) / np.linalg.norm(target)
        return sol.T.copy(), float(resid)


def _axis_frequencies(angles, K: int) -> np.ndarray:
    """Dyadic frequencies 2^k pi v for unit axes v at `angles`, k outer, axis inner."""
    axes = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    axes[np.abs(axes) < 1e-15] = 0.0
    return np.concatenate([(2.0 ** k) * math.pi * axes for k in range(K)], axis=0)


def _check_positive(**kw):
    for k, v in kw.items():
        if int(v) != v or v < 1:
            raise ValueError(f"{k} must be a positive integer, got {v}")


class DyadicAxisPE(FourierPE):
    """Axis-separable dyadic PE (paper): per k, sin/cos(2^k pi x1), sin/cos(2^k pi x2); d = 4K."""

    def __init__(self, K: int = 12):
        _check_positive(K=K)
        super().__init__(_axis_frequencies(np.array([0.0, math.pi / 2]), K), name="dyadic")
        self.K = K


class TriAxisPE(FourierPE):
    """Three axes v_j = R(2 pi j / 3)(1, 0), j = 0, 1, 2 (paper); d = 6K. Lifts D6."""

    def __init__(self, K: int = 8):
        _check_positive(K=K)
        super().__init__(_axis_frequencies(2 * math.pi * np.arange(3) / 3, K), name="triaxis")
        self.K = K


class MultiAxisPE(FourierPE):
    """`num_axes` axes at angles pi j / num_axes with dyadic frequencies; d = 2 num_axes K.

    Lifts exactly D_{2 num_axes} (num_axes = 2 gives DyadicAxisPE's D4).
    """

    def __init__(self, num_axes: int = 3, K: int = 8):
        _check_positive(num_axes=num_axes, K=K)
        super().__init__(_axis_frequencies(math.pi * np.arange(num_axes) / num_axes, K),
                         name=f"multiaxis{num_axes}")
        self.num_axes, self.K = num_axes, K


class RandomFourierPE(FourierPE):
    """Random Fourier features: w_j ~ N(0, scale^2 I_2), b_j ~ U[0, 2 pi); d = 2n.

    In general position only the identity and the rotation by pi lift exactly.
    """

    def __init__(self, n: int = 24, scale: float = 10.0, seed: int = 0):
        _check_positive(n=n)
        if not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be positive, got {scale}")
        rng = np.random.default_rng(seed)
        w = rng.normal(0.0, scale, size=(n, 2))
        b = rng.uniform(0.0, 2 * math.pi, size=n)
        super().__init__(w, b, name="rff")
        self.n, self.scale, self.seed = n, scale, seed


def encoding_by_name(name: str) -> FourierPE:
    """The paper's encodings with default settings: "dyadic", "triaxis", "rff"."""
    table = {"dyadic": DyadicAxisPE, "triaxis": TriAxisPE, "rff": RandomFourierPE}
    if name not in table:
        raise ValueError(f"unknown encoding {name!r}; choose from {sorted(table)}")
    return table[name]()
