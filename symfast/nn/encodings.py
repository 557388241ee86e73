"""Fourier positional encodings of R^2 and R^3 and their exact lifts of O(2) / O(3) elements.

Features are sin/cos(w_j . x + b_j), interleaved per frequency; x and the frequencies w_j
have the encoding's input dimension D (`.input_dim`, 2 or 3). Since
w . (g x) = (g^T w) . x, an element g lifts exactly (phi(g x) = rho(g) phi(x)
for all x) iff g^T maps the frequency multiset onto itself up to sign; the
phase difference is then absorbed by a 2x2 block, so rho(g) is a permutation
of 2x2 orthogonal blocks. It is found by matching
frequencies, not by fitting.

The frequencies and phases are float64 buffers (saved in `state_dict`) that module casts
(`.float()`, `.half()`, `.to(dtype)`) never touch: they move between devices with the
module but stay float64, so the lifts stay exact whatever dtype the model around them runs
in. The features are computed in the input's dtype.

Learned frequencies: `pe.frequencies = nn.Parameter(...)` (or `pe.frequencies.requires_grad_(True)`)
makes them trainable. Casts keep such a Parameter float64 too (its data is replaced, the Parameter
object and its optimizer state stay), and every lift, fingerprint and config reads the current
values, detached: after training, `lift(g)` and the readout's G_lift come from the trained
frequency set. Meta device: the frequencies are data, not an initialisation, so under
`with torch.device("meta")` they are still built with their values (on the CPU); modules around
them can be built and run on meta tensors, and `module.to_empty(device=...)` keeps them.
"""
from __future__ import annotations

import hashlib
import math
import numbers
from collections import OrderedDict

import numpy as np
import torch

from symfast.groups import as_element
from symfast.shapes import samplers
from symfast.ops.fourier_features import fourier_features

__all__ = ["FourierPE", "DyadicAxisPE", "TriAxisPE", "MultiAxisPE", "RandomFourierPE", "encoding_by_name",
           "cube_axes", "icosahedron_axes", "ENCODINGS"]

_DIMS = (2, 3)
# Lifts kept by `FourierPE.best_lift`, across encodings: a sweep reads thousands of models with the
# same few encodings (the 144 default 3D candidates of ~28 encodings fit).
LIFT_CACHE_SIZE = 4096
_LIFT_CACHE: OrderedDict = OrderedDict()


def _element_matrix(g, dim: int) -> np.ndarray:
    """g's float64 [dim, dim] matrix: from an element (anything with `.matrix`), a name, or a matrix."""
    m = getattr(g, "matrix", None)
    if m is None:
        m = as_element(g).matrix if isinstance(g, str) else np.asarray(g, dtype=np.float64)
    m = np.array(m, dtype=np.float64)  # a writable copy
    if m.shape != (dim, dim):
        raise ValueError(f"this encoding acts on R^{dim}; the element's matrix is {list(m.shape)}, "
                         f"expected [{dim}, {dim}]")
    if not np.allclose(m.T @ m, np.eye(dim), atol=1e-8):
        raise ValueError(f"element matrix is not orthogonal: {m.tolist()}")
    return m


class FourierPE(torch.nn.Module):
    """Generic Fourier positional encoding phi: R^D -> R^d, d = 2m, D = 2 or 3.

    Args:
        frequencies: [m, D] frequency vectors w_j (D, the input dimension, is 2 or 3).
        phases: [m] phases b_j (default zeros).
        name: short name used in tables ("dyadic", "triaxis", "rff", ...).
    """

    def __init__(self, frequencies, phases=None, name: str = "fourier"):
        super().__init__()
        for arg, value in (("frequencies", frequencies), ("phases", phases)):
            if value is not None and (value.is_complex() if isinstance(value, torch.Tensor)
                                      else np.iscomplexobj(value)):
                raise TypeError(f"{arg} must be real, got a complex array")
        w_np = np.asarray(frequencies.detach().cpu() if isinstance(frequencies, torch.Tensor) else frequencies,
                          dtype=np.float64)
        b_np = np.zeros(w_np.shape[:1]) if phases is None else np.asarray(
            phases.detach().cpu() if isinstance(phases, torch.Tensor) else phases, dtype=np.float64)
        # finiteness is checked on the numpy arrays (no .item() on meta tensors); a meta default device
        # still gets real values (on the CPU), the encoding being data rather than an initialisation
        device = torch.get_default_device()
        device = torch.device("cpu") if device.type == "meta" else device
        w = torch.as_tensor(w_np, device=device)
        if w.ndim != 2 or w.shape[1] not in _DIMS or w.shape[0] < 1:
            raise ValueError(f"frequencies must be [m, D] with m >= 1 and D in {_DIMS}, got {list(w.shape)}")
        b = torch.as_tensor(b_np, device=device)
        if b.shape != (w.shape[0],):
            raise ValueError(f"phases must be [{w.shape[0]}], got {list(b.shape)}")
        if not (np.isfinite(w_np).all() and np.isfinite(b_np).all()):
            raise ValueError("frequencies and phases must be finite")
        self.register_buffer("frequencies", w)
        self.register_buffer("phases", b)
        self.name = name

    @property
    def dim(self) -> int:
        """The feature dimension d = 2m."""
        return 2 * self.frequencies.shape[0]

    @property
    def input_dim(self) -> int:
        """The dimension D of the points it encodes (2 or 3)."""
        return self.frequencies.shape[1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., D] (any float dtype, any device) -> [..., d] in x's dtype.

        float16 and bfloat16 points are encoded in float32 and the features rounded to x's dtype
        at the end: w.x rounded to 3 significant digits would put sin/cos off by up to 2.
        """
        if not isinstance(x, torch.Tensor):
            x = torch.as_tensor(x)
        if not x.is_floating_point() and not x.is_complex():  # complex: fourier_features raises
            x = x.to(torch.get_default_dtype())
        if x.dtype in (torch.float16, torch.bfloat16):
            return fourier_features(x.float(), self.frequencies, self.phases).to(x.dtype)
        return fourier_features(x, self.frequencies, self.phases)

    def _apply(self, fn, recurse=True):
        """Module casts move the float64 frequencies/phases to the new device but keep them
        float64 (a float32 copy of 2^k pi would break phi(gx) = rho(g) phi(x)). A learned
        nn.Parameter keeps its identity (optimizers hold it): its data (and grad) are set instead."""
        # .detach() aliases the current storage: super()._apply replaces a Parameter's .data and a
        # buffer's tensor, and these aliases keep the float64 values
        exact = {name: getattr(self, name) for name in ("frequencies", "phases")}
        saved = {name: (t.detach(), None if t.grad is None else t.grad.detach()) for name, t in exact.items()}
        super()._apply(fn, recurse)
        for name, (master, grad) in saved.items():
            moved = getattr(self, name)
            if master.device.type == "meta":  # nothing to restore from
                continue
            value = master.to(device=moved.device, dtype=torch.float64)
            if isinstance(moved, torch.nn.Parameter):
                moved.data = value
                if grad is not None:
                    moved.grad = grad.to(device=moved.device, dtype=torch.float64)
            else:
                setattr(self, name, value)
        return self

    def extra_repr(self) -> str:
        return f"name={self.name!r}, dim={self.dim}, input_dim={self.input_dim}"

    def config(self) -> dict:
        """Everything needed to rebuild this encoding (see `FourierPE.from_config`)."""
        return {"name": self.name, "frequencies": self.frequencies.detach().cpu().tolist(),
                "phases": self.phases.detach().cpu().tolist()}

    @staticmethod
    def from_config(cfg: dict) -> "FourierPE":
        return FourierPE(cfg["frequencies"], cfg["phases"], name=cfg.get("name", "fourier"))

    # -- lifts ---------------------------------------------------------------------------
    def lift(self, g, tol: float = 1e-9) -> np.ndarray | None:
        """Exact lift rho(g) as a [d, d] float64 numpy array (not a tensor: lifts are exact
        bookkeeping, `torch.from_numpy(rho)` when you need one), or None when g is not liftable.

        phi(g x) = rho(g) phi(x) for all x, for the current (detached) frequencies and phases. Found by matching g^T w_j = s w_i (s = +-1), each
        w_i used once, to `tol` relative to the largest frequency.

        Args:
            g: an element of O(D) (an `O2Element` / O(3) element, a name, or a [D, D] matrix).

        Raises:
            ValueError: when g does not act on R^D (D = `input_dim`).
        """
        mat = _element_matrix(g, self.input_dim)
        w = self.frequencies.detach().cpu().numpy()
        b = self.phases.detach().cpu().numpy()
        m = w.shape[0]
        scale = max(1.0, float(np.abs(w).max()))
        target = w @ mat  # row j: (g^T w_j)^T
        # candidates per j and sign, as [m, m] masks (vectorised: 3D groups have 120 elements)
        close = {s: np.abs(target[:, None, :] - s * w[None, :, :]).max(-1) < tol * scale for s in (1.0, -1.0)}
        used = np.zeros(m, dtype=bool)
        rho = np.zeros((2 * m, 2 * m))
        for j in range(m):
            match = None
            for s in (1.0, -1.0):
                free = np.flatnonzero(close[s][j] & ~used)
                if free.size:
                    match = (int(free[0]), s)
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

    def best_lift(self, g) -> tuple[np.ndarray, bool, float]:
        """(rho [d, d] float64, exact?, relative residual): the exact lift where the encoding has one,
        else the orthogonal least-squares lift (`lift_lstsq(g, orthogonal=True)`).

        Cached by the encoding's frequencies and phases and the element's matrix, for the
        `LIFT_CACHE_SIZE` most recently used pairs. The returned array is read-only.
        """
        mat = _element_matrix(g, self.input_dim)
        key = (self._fingerprint(), (np.round(mat, 10) + 0.0).tobytes())
        hit = _LIFT_CACHE.get(key)
        if hit is None:
            rho, exact, residual = self.lift(g), True, 0.0
            if rho is None:
                (rho, residual), exact = self.lift_lstsq(g, orthogonal=True), False
            rho.setflags(write=False)
            hit = (rho, exact, residual)
            _LIFT_CACHE[key] = hit
            if len(_LIFT_CACHE) > LIFT_CACHE_SIZE:
                _LIFT_CACHE.popitem(last=False)
        else:
            _LIFT_CACHE.move_to_end(key)
        return hit

    def _fingerprint(self) -> str:
        w, b = self.frequencies.detach().cpu().numpy(), self.phases.detach().cpu().numpy()
        return hashlib.sha1(str(w.shape).encode() + w.tobytes() + b.tobytes()).hexdigest()

    def is_liftable(self, g) -> bool:
        return self.lift(g) is not None

    def lift_lstsq(self, g, num_samples: int = 4096, radius: float = 1.0, seed: int = 0,
                   orthogonal: bool = False):
        """Least-squares lift on samples, for any g (exact when g is liftable).

        rho_hat = argmin_rho ||phi(g X) - rho phi(X)||_F over X uniform in the disk (D = 2) or
        ball (D = 3) of `radius` (the training domain, invariant under O(D)). With
        `orthogonal=True` the minimiser is taken over orthogonal matrices (orthogonal
        Procrustes), like the exact lifts, so scores rho^T Phi rho stay on the scale of exact ones.

        Returns:
            (rho_hat [d, d] float64 numpy, relative residual ||phi(gX) - rho_hat phi(X)|| / ||phi(gX)||).
        """
        mat = torch.as_tensor(_element_matrix(g, self.input_dim))
        # samples and phi(X) reused across a sweep, and recomputed when (learned) frequencies change
        key = (num_samples, radius, seed, self._fingerprint())
        with torch.no_grad():
            if getattr(self, "_lstsq_cache", (None,))[0] != key:
                sample = samplers.sample_disk if self.input_dim == 2 else samplers.sample_ball
                x = sample(num_samples, radius, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
                self._lstsq_cache = (key, x, self(x.to(self.frequencies.device)).cpu().numpy())
            _, x, a = self._lstsq_cache
            target = self((x @ mat.T).to(self.frequencies.device)).cpu().numpy()
        if orthogonal:  # Procrustes: sol = U V^T from the SVD of a^T target
            u, _, vt = np.linalg.svd(a.T @ target)
            sol = u @ vt
        else:
            sol, *_ = np.linalg.lstsq(a, target, rcond=None)  # a @ sol ~ target, sol = rho^T
        resid = np.linalg.norm(a @ sol - target) / np.linalg.norm(target)
        return sol.T.copy(), float(resid)


def _unit_axes(axes) -> np.ndarray:
    """[a, D] float64 unit vectors (D in 2, 3); zero or non-finite axes raise."""
    v = np.asarray(axes, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] not in _DIMS or v.shape[0] < 1:
        raise ValueError(f"axes must be [a, D] with a >= 1 and D in {_DIMS}, got {list(v.shape)}")
    n = np.linalg.norm(v, axis=1)
    if not (np.isfinite(v).all() and (n > 1e-12).all()):
        raise ValueError("axes must be finite and non-zero")
    return v / n[:, None]


def _dyadic(axes: np.ndarray, K: int) -> np.ndarray:
    """Dyadic frequencies 2^k pi v for unit axes v ([a, D]), k outer, axis inner: [K a, D]."""
    return np.concatenate([(2.0 ** k) * math.pi * axes for k in range(K)], axis=0)


def cube_axes() -> np.ndarray:
    """The 4 three-fold axes of the cube [-1, 1]^3 (its body diagonals), unit vectors [4, 3].

    Their lines are permuted by exactly the cube's group O_h (48 elements)."""
    return np.array([[1.0, 1.0, 1.0], [1.0, 1.0, -1.0], [1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]]) / math.sqrt(3.0)


def icosahedron_axes() -> np.ndarray:
    """The 6 five-fold axes of the icosahedron with vertices (0, +-1, +-phi) and their cyclic
    permutations (phi the golden ratio), unit vectors [6, 3]. Their lines are permuted by exactly
    the icosahedral group I_h (120 elements) of that orientation, whose 2-fold axes and mirror
    planes include the coordinate ones (I_h ∩ O_h = T_h, 24 elements)."""
    phi = (1.0 + math.sqrt(5.0)) / 2.0
    v = np.array([[0.0, 1.0, phi], [0.0, 1.0, -phi], [1.0, phi, 0.0], [1.0, -phi, 0.0],
                  [phi, 0.0, 1.0], [-phi, 0.0, 1.0]])
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# Largest octave count and random-feature count: 2^k pi stays exact and finite in float64 far
# beyond K = 64, but no float32/float64 field resolves such frequencies; the counts bound memory.
MAX_OCTAVES = 64
MAX_FEATURES = 1 << 16


def _check_positive(hi: int | None = None, **kw):
    for k, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or \
                not math.isfinite(v) or int(v) != v or v < 1:
            raise ValueError(f"{k} must be a positive integer, got {v!r}")
        if hi is not None and v > hi:
            raise ValueError(f"{k} must be at most {hi}, got {v}")


def _check_dim(dim):
    if dim not in _DIMS:
        raise ValueError(f"dim must be 2 or 3, got {dim!r}")


class DyadicAxisPE(FourierPE):
    """Axis-separable dyadic PE (paper): per k, sin/cos(2^k pi x_i) for each coordinate axis.

    d = 2 D K. In 2D (default K = 12, d = 48) it lifts exactly D4; in 3D (`dim=3`, default
    K = 8, d = 48, name "dyadic3") exactly the cube's group O_h (the 48 signed permutations).
    """

    def __init__(self, K: int | None = None, dim: int = 2):
        _check_dim(dim)
        K = (12 if dim == 2 else 8) if K is None else K
        _check_positive(MAX_OCTAVES, K=K)
        super().__init__(_dyadic(np.eye(dim), K), name="dyadic" if dim == 2 else "dyadic3")
        self.K = K


class TriAxisPE(FourierPE):
    """Three axes v_j = R(2 pi j / 3)(1, 0), j = 0, 1, 2 (paper); d = 6K. Lifts D6."""

    def __init__(self, K: int = 8):
        _check_positive(MAX_OCTAVES, K=K)
        t = 2 * math.pi * np.arange(3) / 3
        super().__init__(_dyadic(_planar_axes(t), K), name="triaxis")
        self.K = K


def _planar_axes(angles) -> np.ndarray:
    axes = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    axes[np.abs(axes) < 1e-15] = 0.0
    return axes


class MultiAxisPE(FourierPE):
    """Dyadic frequencies 2^k pi v, k = 0..K-1, along given axes v; d = 2 a K for a axes.

    Args:
        num_axes: an integer a (2D: a axes at angles pi j / a, lifting exactly D_{2a}; a = 2 is
            DyadicAxisPE's D4), or, positionally, an array of axes as for `axes`.
        K: number of octaves.
        name: table name (default "multiaxis<a>", with a "_3d" suffix for 3D axes).
        axes: an array [a, D] of axes in R^D (D = 2 or 3; normalised to unit length), instead of
            num_axes. The exact lifts are the elements of O(D) that permute the axes' lines; e.g.
            `cube_axes()` lifts O_h, `icosahedron_axes()` lifts I_h.
    """

    def __init__(self, num_axes=3, K: int = 8, name: str | None = None, *, axes=None):
        _check_positive(MAX_OCTAVES, K=K)
        if axes is None and not isinstance(num_axes, numbers.Integral):
            axes = num_axes  # MultiAxisPE(array, K)
        if axes is None:
            _check_positive(num_axes=num_axes)
            unit = _planar_axes(math.pi * np.arange(num_axes) / num_axes)
        else:
            unit = _unit_axes(axes)
        a, D = unit.shape
        super().__init__(_dyadic(unit, K), name=name or (f"multiaxis{a}" if D == 2 else f"multiaxis{a}_3d"))
        self.num_axes, self.K, self.axes = a, K, unit


class RandomFourierPE(FourierPE):
    """Random Fourier features: w_j ~ N(0, scale^2 I_D), b_j ~ U[0, 2 pi); d = 2n.

    In general position only the identity and the point reflection -I lift exactly (in 2D,
    -I is the rotation by pi; in 3D the inversion, an improper element). `dim=3` names it "rff3".
    """

    def __init__(self, n: int = 24, scale: float = 10.0, seed: int = 0, dim: int = 2):
        _check_positive(MAX_FEATURES, n=n)
        _check_dim(dim)
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not (scale > 0 and math.isfinite(scale)):
            raise ValueError(f"scale must be a positive finite number, got {scale!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        rng = np.random.default_rng(seed)
        w = rng.normal(0.0, scale, size=(n, dim))
        b = rng.uniform(0.0, 2 * math.pi, size=n)
        super().__init__(w, b, name="rff" if dim == 2 else "rff3")
        self.n, self.scale, self.seed = n, scale, seed


# Encodings by name, with default settings (d = 48 each, like the paper's):
#   2D: "dyadic" (x, y axes, K = 12; lifts D4), "triaxis" (3 axes at 120 degrees, K = 8; lifts D6),
#       "rff" (24 random frequencies; lifts {e, r180});
#   3D: "dyadic3" (x, y, z axes, K = 8; lifts O_h), "cube4" (the cube's 4 three-fold axes, K = 6;
#       lifts O_h), "ico6" (the icosahedron's 6 five-fold axes, K = 4; lifts I_h),
#       "rff3" (24 random frequencies in R^3; lifts {e, -I}).
ENCODINGS = {
    "dyadic": DyadicAxisPE,
    "triaxis": TriAxisPE,
    "rff": RandomFourierPE,
    "dyadic3": lambda: DyadicAxisPE(dim=3),
    "cube4": lambda: MultiAxisPE(axes=cube_axes(), K=6, name="cube4"),
    "ico6": lambda: MultiAxisPE(axes=icosahedron_axes(), K=4, name="ico6"),
    "rff3": lambda: RandomFourierPE(dim=3),
}


def encoding_by_name(name: str) -> FourierPE:
    """An encoding with default settings by name (a key of `ENCODINGS`, listed above it):
    "dyadic", "triaxis", "rff" (2D); "dyadic3", "cube4", "ico6", "rff3" (3D)."""
    if name not in ENCODINGS:
        raise ValueError(f"unknown encoding {name!r}; choose from {', '.join(ENCODINGS)}")
    return ENCODINGS[name]()
