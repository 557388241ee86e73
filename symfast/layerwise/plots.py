"""Figures for the layerwise readout: layer-1 filters grouped by orbit of the recovered action.

The function draws into the caller's figure when given, else into a new one; writes a PNG when
`path` is given; returns the figure; never changes the matplotlib backend.
"""
from __future__ import annotations

import textwrap

import numpy as np

from symfast.layerwise.actions import LatentActions
from symfast.plotting import FONT, SMALL, finish

__all__ = ["plot_filters_by_orbit", "orbit_groups", "lit_pixels", "FILTER_CAPTION"]

_GROUPS = ("symmetric", "antisymmetric", "paired", "unmatched")

FILTER_CAPTION = (
    "Label 'i s+' / 'i s−': hidden unit i, which the recovered flip action maps to +1 / −1 times its partner "
    "(itself for a fixed unit). symmetric (s+): the mirrored filter equals the filter; antisymmetric (s−, "
    "odd activations such as tanh): the mirrored filter equals minus the filter; paired: units swapped by the "
    "flip (shown next to each other); unmatched: residual above the threshold. Colour: weight divided by the "
    "filter's largest |weight| on lit pixels; grey: pixels the data (almost) never lights, or whose mirror "
    "it does not light (weights there keep their random initialisation).")


def _resolve_level(result: LatentActions, level: str) -> str:
    if level == "auto":
        return "data" if result.data_residuals is not None else "weight"
    if level == "data" and result.data_residuals is None:
        raise ValueError("level='data' needs data-level residuals (recover_latent_actions(..., data=x))")
    if level not in ("data", "weight"):
        raise ValueError(f"level must be 'auto', 'weight' or 'data', got {level!r}")
    return level


def orbit_groups(result: LatentActions, threshold: float | None = None, level: str = "auto") -> dict:
    """Layer-1 units by orbit label: {"symmetric" | "antisymmetric" | "paired" | "unmatched": [unit indices]},
    members of one cycle adjacent.

    Args:
        result: LatentActions of the network (its first hidden action is used).
        threshold: residual threshold (default: the result's).
        level: "weight" or "data" residuals decide "unmatched"; "auto" = data when available.
    """
    level = _resolve_level(result, level)
    t = result.threshold if threshold is None else threshold
    act = result.actions[0]
    labels = act.orbit_labels(t, result.data_residuals[0] if level == "data" else None)
    groups = {k: [] for k in _GROUPS}
    for cyc in act.cycles():
        groups[labels[cyc[0]]].extend(cyc)
    return groups


def lit_pixels(x, min_fraction: float = 0.01) -> np.ndarray:
    """[D] bool: input pixels that are nonzero in at least `min_fraction` of the images x [N, D].

    Weights on pixels the data (almost) never lights get (almost) no gradient and keep their
    random initialisation (e.g. the border columns of the 8x8 digits, lit in < 1% of images).
    """
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"x must be [N, D] flattened images, got {list(x.shape)}")
    if not 0 <= min_fraction < 1:
        raise ValueError(f"min_fraction must be in [0, 1), got {min_fraction}")
    return (x != 0).mean(0) > min_fraction if min_fraction > 0 else np.abs(x).max(0) > 0


def plot_filters_by_orbit(W1, image_shape, result: LatentActions, path=None, threshold: float | None = None,
                          max_per_group: int = 48, cols: int = 16, title: str = "", level: str = "auto",
                          lit=None, fig=None):
    """Layer-1 filters (rows of W1) grouped as symmetric / antisymmetric / paired / unmatched.

    Args:
        W1: [H, C*h*w] first-layer weights (paper convention, one filter per row).
        image_shape: (C, h, w) of the input images.
        result: LatentActions of the network (its first hidden action is used).
        path: optional output .png path.
        threshold: residual threshold for the orbit labels (default: the result's).
        max_per_group: filters drawn per group (the title says how many of how many).
        cols: filters per row.
        level: "weight" or "data" residuals decide "unmatched"; "auto" = data when available (weights on
            pixels the data never excites keep their random init and hide symmetric filters).
        lit: optional [C*h*w] bool, pixels the data lights (`lit_pixels(x)`); the others, and those whose
            image under the input action (`result.rho_in`) is unlit, are grey.
        fig: optional empty Figure to draw into.

    Returns:
        the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    W1 = np.asarray(W1, dtype=np.float64)
    C, h, w = image_shape
    if W1.ndim != 2 or W1.shape[1] != C * h * w:
        raise ValueError(f"W1 must be [H, {C * h * w}] for images {tuple(image_shape)}, got {list(W1.shape)}")
    if lit is not None:
        lit = np.asarray(lit, dtype=bool).reshape(-1)
        if lit.size != C * h * w:
            raise ValueError(f"lit must have {C * h * w} entries (one per input pixel), got {lit.size}")
        rho = np.abs(np.asarray(result.rho_in, dtype=np.float64))
        if rho.shape == (lit.size, lit.size):  # grey a pixel whose mirror is unlit too: compare like with like
            lit = lit & (rho @ lit > 0.5)
        lit_img = lit.reshape(C, h, w).any(0)
    else:
        lit_img = np.ones((h, w), dtype=bool)
    level = _resolve_level(result, level)
    t = result.threshold if threshold is None else threshold
    groups = orbit_groups(result, t, level)
    shown = {k: v[:max_per_group] for k, v in groups.items() if v}
    nrows = {k: int(np.ceil(len(v) / cols)) for k, v in shown.items()}
    total_rows = max(sum(nrows.values()), 1)
    created = fig is None
    if created:
        fig = plt.figure(figsize=(cols * 0.75 + 1.0, total_rows * 0.95 + 0.45 * len(shown) + 1.2))
    gs = fig.add_gridspec(total_rows + len(shown), cols, hspace=0.45, wspace=0.1, right=0.9)
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="0.75")
    norm = Normalize(-1.0, 1.0)
    r = 0
    for name, idx in shown.items():
        ax = fig.add_subplot(gs[r, :])
        ax.axis("off")
        n = len(groups[name])
        head = f"{name}: {len(idx)} of {n} filters shown" if len(idx) < n else f"{name}: {n} filters"
        ax.text(0, 0.1, head, fontsize=FONT, weight="bold", transform=ax.transAxes)
        r += 1
        for k, i in enumerate(idx):
            ax = fig.add_subplot(gs[r + k // cols, k % cols])
            f = W1[i].reshape(C, h, w)
            img = f.mean(0) if C > 1 else f[0]
            v = max(np.abs(img[lit_img]).max() if lit_img.any() else 0.0, 1e-12)
            ax.imshow(np.ma.masked_where(~lit_img, img / v), cmap=cmap, norm=norm, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{i} s{'+' if result.actions[0].scale[i] > 0 else '−'}", fontsize=SMALL, pad=1)
        r += nrows[name]
    cax = fig.add_axes([0.92, 0.3, 0.012, 0.4])
    cb = fig.colorbar(ScalarMappable(norm, cmap), cax=cax)
    cb.set_label("weight / max |weight| of the filter", fontsize=SMALL)
    cb.ax.tick_params(labelsize=SMALL)
    n_shown, n_all = sum(len(v) for v in shown.values()), sum(len(v) for v in groups.values())
    count = f"{n_shown} of {n_all} filters shown" if n_shown < n_all else f"all {n_all} filters"
    fig.suptitle((title or "layer-1 filters by orbit of the recovered flip action")
                 + f" ({count}; unmatched: {level}-level residual ≥ {t:g})", fontsize=FONT)
    fig.text(0.05, 0.0, "\n".join(textwrap.wrap(FILTER_CAPTION, 150)), fontsize=SMALL, va="top", ha="left")
    return finish(fig, path, created)
