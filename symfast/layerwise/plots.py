"""Figures for the layerwise readout: layer-1 filters grouped by orbit of the recovered action."""
from __future__ import annotations

import numpy as np

from symfast.layerwise.actions import LatentActions

__all__ = ["plot_filters_by_orbit"]

_GROUPS = ("symmetric", "antisymmetric", "paired", "unmatched")


def _order(result: LatentActions, threshold: float, level: str):
    act = result.actions[0]
    labels = act.orbit_labels(threshold, result.data_residuals[0] if level == "data" else None)
    groups = {k: [] for k in _GROUPS}
    for cyc in act.cycles():  # members of a cycle stay adjacent
        groups[labels[cyc[0]]].extend(cyc)
    return groups


def plot_filters_by_orbit(W1, image_shape, result: LatentActions, path: str, threshold: float | None = None,
                          max_per_group: int = 48, cols: int = 16, title: str = "", level: str = "auto") -> dict:
    """Save a PNG of layer-1 filters (rows of W1) grouped as symmetric / antisymmetric / paired / unmatched.

    Args:
        W1: [H, C*h*w] first-layer weights (paper convention, one filter per row).
        image_shape: (C, h, w) of the input images.
        result: LatentActions of the network (its first hidden action is used).
        path: output .png path.
        threshold: residual threshold for the orbit labels (default: the result's).
        level: "weight" or "data" residuals decide "unmatched"; "auto" = data when available (weights on
            pixels the data never excites keep their random init and hide symmetric filters).

    Returns:
        dict group -> number of filters in it.
    """
    import matplotlib.pyplot as plt

    W1 = np.asarray(W1, dtype=np.float64)
    C, h, w = image_shape
    if W1.ndim != 2 or W1.shape[1] != C * h * w:
        raise ValueError(f"W1 must be [H, {C * h * w}] for images {tuple(image_shape)}, got {list(W1.shape)}")
    t = result.threshold if threshold is None else threshold
    if level == "auto":
        level = "data" if result.data_residuals is not None else "weight"
    if level == "data" and result.data_residuals is None:
        raise ValueError("level='data' needs data-level residuals (recover_latent_actions(..., data=x))")
    groups = _order(result, t, level)
    shown = {k: v[:max_per_group] for k, v in groups.items() if v}
    nrows = {k: int(np.ceil(len(v) / cols)) for k, v in shown.items()}
    total_rows = max(sum(nrows.values()), 1)
    fig = plt.figure(figsize=(cols * 0.7, total_rows * 0.8 + 0.45 * len(shown) + 0.6))
    gs = fig.add_gridspec(total_rows + len(shown), cols, hspace=0.35, wspace=0.08)
    r = 0
    for name, idx in shown.items():
        ax = fig.add_subplot(gs[r, :])
        ax.axis("off")
        ax.text(0, 0.2, f"{name} ({len(groups[name])})", fontsize=10, weight="bold", transform=ax.transAxes)
        r += 1
        for k, i in enumerate(idx):
            ax = fig.add_subplot(gs[r + k // cols, k % cols])
            f = W1[i].reshape(C, h, w)
            img = f.mean(0) if C > 1 else f[0]
            v = max(np.abs(img).max(), 1e-12)
            ax.imshow(img, cmap="RdBu_r", vmin=-v, vmax=v, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{i} s{'+' if result.actions[0].scale[i] > 0 else '-'}", fontsize=5, pad=1)
        r += nrows[name]
    fig.suptitle((title or "layer-1 filters by orbit of the recovered flip action")
                 + f"\n(unmatched: {level}-level residual >= {t:g})", fontsize=10)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return {k: len(v) for k, v in groups.items()}
