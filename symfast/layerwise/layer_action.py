"""One hidden layer's latent action: a signed / scaled permutation of neurons."""
from __future__ import annotations

import math

from dataclasses import dataclass

import numpy as np

__all__ = ["LayerAction", "DEFAULT_THRESHOLD"]

# A neuron counts as matched when ||a_i - s_i b_pi(i)|| < 0.5 ||a_i||; pairing unrelated rows
# gives ~1.1-1.4 (the random baseline), a filter fixed at 0.5 has antisymmetric/symmetric parts ~1:4.
DEFAULT_THRESHOLD = 0.5


def check_threshold(threshold) -> float:
    """A residual threshold as a float; ValueError for NaN, infinite, negative or non-numbers."""
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        raise ValueError(f"threshold must be a number, got {threshold!r}") from None
    if isinstance(threshold, bool) or not math.isfinite(t) or t < 0:
        raise ValueError(f"threshold must be finite and >= 0, got {threshold!r}")
    return t


@dataclass
class LayerAction:
    """A signed / scaled permutation acting on one hidden layer: (rho h)_i = scale_i h_{index_i}.

    Attributes:
        index: [H] int permutation; scale: [H] signs (+-1) or positive scalings;
        residual: [H] per-neuron relative matching residual (nan when not from a matching).
    """

    index: np.ndarray
    scale: np.ndarray
    residual: np.ndarray = None

    def __post_init__(self):
        self.index = np.asarray(self.index, dtype=np.int64)
        self.scale = np.asarray(self.scale, dtype=np.float64)
        if self.residual is None:
            self.residual = np.full(self.index.shape, np.nan)

    @property
    def size(self) -> int:
        return int(self.index.shape[0])

    @property
    def matrix(self) -> np.ndarray:
        """[H, H] matrix R with R[i, index_i] = scale_i."""
        R = np.zeros((self.size, self.size))
        R[np.arange(self.size), self.index] = self.scale
        return R

    def compose(self, other: "LayerAction") -> "LayerAction":
        """self @ other (apply `other` first)."""
        return LayerAction(other.index[self.index], self.scale * other.scale[self.index])

    def inverse(self) -> "LayerAction":
        inv = np.empty_like(self.index)
        inv[self.index] = np.arange(self.size)
        return LayerAction(inv, 1.0 / self.scale[inv])

    @classmethod
    def from_matrix(cls, R) -> "LayerAction":
        """Inverse of `.matrix` for a matrix with one non-zero per row and column."""
        R = np.asarray(R, dtype=np.float64)
        idx = np.abs(R).argmax(1)
        if sorted(idx.tolist()) != list(range(R.shape[0])) or (np.abs(R) > 0).sum() != R.shape[0]:
            raise ValueError("matrix is not a scaled permutation")
        return cls(idx, R[np.arange(R.shape[0]), idx])

    def restricted_to_order(self, k: int) -> "LayerAction":
        """The nearest action with R^k = I: cycles whose length does not divide k (or whose sign
        product makes R^k = -I there) become fixed neurons with scale 1; positive scales on the other
        cycles are divided by the cycle's geometric-mean scale (R^k = I exactly, conjugate to a permutation).
        """
        idx, sc = np.arange(self.size), np.ones(self.size)
        for cyc in self.cycles():
            m = len(cyc)
            p = float(np.prod(self.scale[cyc]))
            if k % m or (p < 0 and (k // m) % 2):
                continue
            idx[cyc] = self.index[cyc]
            sc[cyc] = self.scale[cyc] / (abs(p) ** (1.0 / m))
        return LayerAction(idx, sc, self.residual)

    def distance(self, other: "LayerAction") -> float:
        """||R_self - R_other||_F / sqrt(H): 0 iff equal."""
        return float(np.linalg.norm(self.matrix - other.matrix) / np.sqrt(max(self.size, 1)))

    def cycles(self) -> list:
        """Cycles of the permutation (lists of neuron indices)."""
        seen, out = np.zeros(self.size, bool), []
        for s in range(self.size):
            if seen[s]:
                continue
            cyc, j = [], s
            while not seen[j]:
                seen[j] = True
                cyc.append(j)
                j = int(self.index[j])
            out.append(cyc)
        return out

    def counts(self, threshold: float = DEFAULT_THRESHOLD, residual=None) -> dict:
        """Neurons fixed (+), fixed with sign -1, in longer cycles, and unmatched.

        A neuron counts only if its matching residual (and that of every neuron of its cycle)
        is below `threshold`; the rest are "unmatched". `residual` ([H]) overrides the weight-level
        residual (e.g. the data-level one).
        """
        threshold = check_threshold(threshold)
        res = np.nan_to_num(self.residual if residual is None else residual, nan=0.0)
        c = {"fixed": 0, "antisymmetric": 0, "cycled": 0, "cycles": 0, "unmatched": 0}
        for cyc in self.cycles():
            if (res[cyc] >= threshold).any():
                c["unmatched"] += len(cyc)
            elif len(cyc) == 1:
                c["fixed" if self.scale[cyc[0]] > 0 else "antisymmetric"] += 1
            else:
                c["cycled"] += len(cyc)
                c["cycles"] += 1
        return c

    def orbit_labels(self, threshold: float = DEFAULT_THRESHOLD, residual=None) -> np.ndarray:
        """[H] labels "symmetric" / "antisymmetric" / "paired" (cycle) / "unmatched"."""
        res = np.nan_to_num(self.residual if residual is None else residual, nan=0.0)
        lab = np.empty(self.size, dtype=object)
        for cyc in self.cycles():
            if (res[cyc] >= threshold).any():
                lab[cyc] = "unmatched"
            elif len(cyc) == 1:
                lab[cyc] = "symmetric" if self.scale[cyc[0]] > 0 else "antisymmetric"
            else:
                lab[cyc] = "paired"
        return lab
