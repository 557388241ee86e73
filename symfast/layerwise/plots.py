"""Figures for the layerwise readout: layer-1 filters grouped by orbit of the recovered action.

The function draws into the caller's figure when given, else into a new one; writes a PNG when
`path` is given; returns the figure; never changes the matplotlib backend.
"""
from __future__ import annotations

import textwrap

import numpy as np

from symfast.layerwise.recovery import LatentActions
from symfast.plotting import FONT, SMALL, finish

__all__ = ["plot_filters_by_orbit", "orbit_groups", "counts_text", "unit_label", "lit_pixels", "FILTER_CAPTION"]

_GROUPS = ("symmetric", "antisymmetric", "paired", "unmatched")

FILTER_CAPTION = (
    "One rule for every label, the one the suite's sym/anti/paired counts use (LayerAction.orbit_labels): a unit "
    "counts only when its matching residual ||a_i − s_i b_π(i)|| / ||a_i|| (a_i: the unit's mirrored filter and "
    "bias, b: the filters) is below the threshold. 'i s+': symmetric, the flip maps unit i to itself, so the "
    "mirrored filter equals the filter (to the residual); 'i s−': antisymmetric (odd activations such as tanh), "
    "the mirrored filter equals minus the filter; 'i↔j': paired, the flip swaps units i and j (shown next to each "
    "other; s− when with a sign flip); 'i': unmatched, no sign is claimed. Colour: weight divided by the "
    "filter's largest |weight| on lit pixels; grey: pixels the data (almost) never lights, or whose mirror "
    "it does not light (weights there keep their random initialisation).")


def _resolve_level(result: LatentActions, level: str) -> str:
    if level == "auto":  # kept for callers that asked for it; the default is "weight", as the suite's table
        return "data" if result.data_residuals is not None else "weight"
    if level == "data" and result.data_residuals is None:
        raise ValueError("level='data' needs data-level residuals (recover_latent_actions(..., data=x))")
    if level not in ("data", "weight"):
        raise ValueError(f"level must be 'auto', 'weight' or 'data', got {level!r}")
    return level


def orbit_groups(result: LatentActions, threshold: float | None = None, level: str = "weight") -> dict:
    """Layer-1 units by orbit label: {"symmetric" | "antisymmetric" | "paired" | "unmatched": [unit indices]},
    members of one cycle adjacent.

    Args:
        result: LatentActions of the network (its first hidden action is used).
        threshold: residual threshold (default: the result's).
        level: "weight" (default, the level of the suite's table) or "data" residuals decide "unmatched";
            "auto" = data when available.
    """
    level = _resolve_level(result, level)
    t = result.threshold if threshold is None else threshold
    act = result.actions[0]
    labels = act.orbit_labels(t, result.data_residuals[0] if level == "data" else None)
    groups = {k: [] for k in _GROUPS}
    for cyc in act.cycles():
        groups[labels[cyc[0]]].extend(cyc)
    return groups


def counts_text(result: LatentActions, threshold: float | None = None, level: str = "weight") -> str:
    """"sym/anti/paired/unmatched a/b/c/d" of layer 1, from `LatentActions.counts` (the function the suite's
    table uses), so a figure's title and the table cannot disagree."""
    c = result.count_list(threshold, level=_resolve_level(result, level))[0]
    return f"sym/anti/paired/unmatched {c['fixed']}/{c['antisymmetric']}/{c['cycled']}/{c['unmatched']}"


def unit_label(action, i: int, group: str) -> str:
    """The label of unit i under its orbit group (see `FILTER_CAPTION`): 'i s+', 'i s−', 'i↔j' or 'i'."""
    if group == "symmetric":
        return f"{i} s+"
    if group == "antisymmetric":
        return f"{i} s−"
    if group == "paired":
        return f"{i}↔{int(action.index[i])}" + ("" if action.scale[i] > 0 else " s−")
    return f"{i}"


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
                          max_per_group: int = 48, cols: int = 16, title: str = "", level: str = "weight",
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
        level: "weight" (default: the level of the suite's sym/anti/paired counts, so figure and table
            agree) or "data" residuals decide the labels; "auto" = data when available. The title names it.
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
            ax.set_title(unit_label(result.actions[0], i, name), fontsize=SMALL, pad=1)
        r += nrows[name]
    cax = fig.add_axes([0.92, 0.3, 0.012, 0.4])
    cb = fig.colorbar(ScalarMappable(norm, cmap), cax=cax)
    cb.set_label("weight / max |weight| of the filter", fontsize=SMALL)
    cb.ax.tick_params(labelsize=SMALL)
    n_shown, n_all = sum(len(v) for v in shown.values()), sum(len(v) for v in groups.values())
    count = f"{n_shown} of {n_all} filters shown" if n_shown < n_all else f"all {n_all} filters"
    fig.suptitle((title or "layer-1 filters by orbit of the recovered flip action")
                 + f"\n{level}-level counts {counts_text(result, t, level)} ({count}; matched: residual < {t:g})",
                 fontsize=FONT)
    fig.text(0.05, 0.0, "\n".join(textwrap.wrap(FILTER_CAPTION, 150)), fontsize=SMALL, va="top", ha="left")
    return finish(fig, path, created)
