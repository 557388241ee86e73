"""Figures for 3D readouts: fitted vs true zero-level sets, SDF slices, and score heatmaps over the
elements of O(3) (matplotlib; the caller's backend is left as it is).

Every function takes `path=None` (save there and close the figure) and `fig=None` (draw into a
given figure, cleared first) and returns the figure. Zero-level sets are extracted by marching
cubes from scikit-image (the `plot3d` extra: `pip install "symfast[plot3d]"`); without it
`plot_level_sets` warns, draws nothing and returns None (it never substitutes another figure: a file named
level_sets.png always holds zero-level surfaces). A fitted field that never changes sign has no zero
level set: its panel says "no zero crossing" in red instead of showing an empty plot.
"""
from __future__ import annotations

from symfast._optional import require

require("matplotlib", "plotting")  # before the matplotlib imports below: one line naming the extra

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from symfast._deprecation import renamed
from symfast.plotting import FONT, SMALL, finish
from symfast.readout.plots import P_FLOOR, panel_pvalues, pvalue_colorbar, pvalue_norm

__all__ = ["plot_level_sets", "plot_sdf_slices", "plot_score_heatmap", "HAVE_SKIMAGE"]

# Old names (before the plot_ prefix every figure function now has), still answered with a warning.
__getattr__ = renamed(globals(), {"level_sets": "plot_level_sets", "sdf_slices": "plot_sdf_slices",
                                     "score_heatmap": "plot_score_heatmap"})

try:
    from skimage.measure import marching_cubes
    HAVE_SKIMAGE = True
except ImportError:  # optional extra
    marching_cubes = None
    HAVE_SKIMAGE = False

_CHUNK = 1 << 15  # grid points per evaluation (bounds memory at [B, chunk, width])


def _grid_values(fn, axes: list) -> np.ndarray:
    """fn on the tensor grid of 1D `axes` (x, y, z), evaluated in chunks: [len(x), len(y), len(z)]."""
    pts = torch.stack(torch.meshgrid(*[torch.as_tensor(a, dtype=torch.float64) for a in axes], indexing="ij"), -1)
    flat = pts.reshape(-1, 3)
    vals = torch.cat([fn(flat[i:i + _CHUNK]) for i in range(0, len(flat), _CHUNK)])
    return vals.reshape(pts.shape[:-1]).numpy()


def _fields(ens, shape: str, member: int):
    """(true sdf, fitted sdf of the shape's `member`-th model) as callables x [N, 3] -> [N] float64."""
    idx = ens.indices(shape)
    if not 0 <= member < len(idx):
        raise IndexError(f"member {member} out of range: {len(idx)} models were fitted to {shape!r}")
    one = ens.subset([idx[member]])
    target = ens.targets[idx[member]]
    if target is None:
        raise ValueError(f"the members fitted to {shape!r} carry no Shape; the true field is unknown")
    return (lambda x: target.sdf(x).to(torch.float64),
            lambda x: one(x.to(one.weights[0].dtype))[0].to(torch.float64))


def _check_3d(ens):
    if ens.pe.input_dim != 3:
        raise ValueError(f"these figures are for 3D fields; the encoding {ens.pe.name!r} encodes "
                         f"{ens.pe.input_dim}D points (use symfast.readout.plots for 2D)")


def _figure(fig, size):
    """(figure, created): the caller's figure, cleared, or a new one of `size`."""
    if fig is None:
        return plt.figure(figsize=size), True
    fig.clear()
    return fig, False


def _finish(fig, path, created):
    fig.tight_layout()
    return finish(fig, path, created)


def _no_crossing(ax, values, three_d: bool = False) -> None:
    """Flag a panel whose field never changes sign (no zero level set to draw)."""
    sign = "f > 0" if float(np.min(values)) >= 0 else "f < 0"
    text = f"no zero crossing\n({sign} everywhere)"
    kw = dict(transform=ax.transAxes, ha="center", va="center", color="red", fontsize=SMALL, weight="bold",
              bbox=dict(fc="white", ec="red", alpha=0.9))
    (ax.text2D if three_d else ax.text)(0.5, 0.5, text, **kw)


def plot_level_sets(ens, shapes=None, member: int = 0, resolution: int = 40, radius: float = 1.0, path=None,
                    fig=None):
    """Fitted zero-level set of each solid (one model) beside the true one, by marching cubes.

    Args:
        ens: a 3D `Ensemble`.
        shapes: shape names to draw (default: every shape of the ensemble).
        member: which of a shape's models to draw (0 = its first seed).
        resolution: grid points per axis over [-radius, radius]^3.
        radius: half-width of the grid (the training domain's radius).
        path, fig: see the module docstring.

    Returns:
        The figure: one row per shape, columns true / fitted. Without scikit-image: None, with a
        warning, and nothing written to `path`.
    """
    _check_3d(ens)
    shapes = list(dict.fromkeys(ens.shapes)) if shapes is None else list(shapes)
    if not HAVE_SKIMAGE:
        warnings.warn("scikit-image is not installed (pip install 'symfast[plot3d]'): zero-level surfaces are "
                      "not drawn")
        return None
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    fig, created = _figure(fig, (6.4, 3.0 * len(shapes)))
    ticks = np.linspace(-radius, radius, int(resolution))
    step = ticks[1] - ticks[0]
    for row, name in enumerate(shapes):
        for col, (label, fn) in enumerate(zip(("true", "fitted"), _fields(ens, name, member))):
            ax = fig.add_subplot(len(shapes), 2, 2 * row + col + 1, projection="3d")
            vol = _grid_values(fn, [ticks] * 3)
            if vol.min() < 0 < vol.max():
                verts, faces, _, _ = marching_cubes(vol, level=0.0, spacing=(step,) * 3)
                mesh = Poly3DCollection((verts - radius)[faces], alpha=0.85, linewidths=0.1, edgecolor="k",
                                        facecolor="tab:blue" if label == "true" else "tab:orange")
                ax.add_collection3d(mesh)
            else:
                _no_crossing(ax, vol, three_d=True)
            for setter in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
                setter(-radius, radius)
            ax.set_box_aspect((1, 1, 1))
            ax.set_title(f"{name}: {label}" + (f" (seed {ens.seeds[ens.indices(name)[member]]}, {ens.pe.name})"
                                               if label == "fitted" else ""), fontsize=8)
            ax.tick_params(labelsize=6)
    return _finish(fig, path, created)


def plot_sdf_slices(ens, shapes=None, member: int = 0, z=(0.0,), resolution: int = 96, radius: float = 1.0,
                    path=None, fig=None):
    """SDF slices at heights z (plane x-y), true vs fitted, with the zero contour of each.

    Returns:
        The figure: one row per (shape, z), columns true / fitted / fitted - true.
    """
    _check_3d(ens)
    shapes = list(dict.fromkeys(ens.shapes)) if shapes is None else list(shapes)
    z = [float(v) for v in np.atleast_1d(z)]
    rows = [(s, h) for s in shapes for h in z]
    fig, created = _figure(fig, (9.0, 2.8 * len(rows)))
    ticks = np.linspace(-radius, radius, int(resolution))
    ext = (-radius, radius, -radius, radius)
    for r, (name, h) in enumerate(rows):
        true_fn, fit_fn = _fields(ens, name, member)
        true, fit = (_grid_values(fn, [ticks, ticks, np.array([h])])[:, :, 0].T for fn in (true_fn, fit_fn))
        lim = float(np.abs(true).max()) or 1.0
        for c, (label, img, cmap, vlim) in enumerate((("true", true, "RdBu", lim), ("fitted", fit, "RdBu", lim),
                                                      ("fitted - true", fit - true, "PuOr",
                                                       float(np.abs(fit - true).max()) or 1.0))):
            ax = fig.add_subplot(len(rows), 3, 3 * r + c + 1)
            im = ax.imshow(img, origin="lower", extent=ext, cmap=cmap, vmin=-vlim, vmax=vlim)
            if c < 2 and img.min() < 0 < img.max():
                ax.contour(ticks, ticks, img, levels=[0.0], colors="k", linewidths=0.8)
            elif c < 2:
                _no_crossing(ax, img)
            ax.set_title(f"{name}, z = {h:g}: {label}", fontsize=8)
            ax.tick_params(labelsize=6)
            fig.colorbar(im, ax=ax, fraction=0.046)
    return _finish(fig, path, created)


def _blocks(elements: list) -> list:
    """[(block name, [elements])]: O_h ∩ I_h, O_h only, I_h only (by name; others last), each sorted by class."""
    from symfast.groups import o3

    oh, ih = {g.name for g in o3.octahedral()}, {g.name for g in o3.icosahedral()}
    named = (("O_h ∩ I_h", lambda e: e in oh and e in ih), ("O_h only", lambda e: e in oh and e not in ih),
             ("I_h only", lambda e: e in ih and e not in oh), ("other", lambda e: e not in oh and e not in ih))
    out = []
    for name, member in named:
        els = [e for e in elements if member(e)]
        if els:
            out.append((name, sorted(els, key=lambda e: (_class(e), e))))
    return out


def _class(element: str) -> str:
    """Conjugacy-type label of an element name: 'r90[0,0,1]' and 'r270[...]' -> 'r90' (angles folded to <= 180)."""
    head = element.split("[")[0]
    kind, digits = head[:1], head[1:]
    if not digits.isdigit():
        return head
    angle = int(digits)
    return f"{kind}{min(angle, 360 - angle)}"


def plot_score_heatmap(table: pd.DataFrame, path=None, fig=None):
    """The readout's decision over many group elements (3D candidate sets have 144), one panel per
    (pe, observable): solids x elements coloured by the Holm-adjusted p-value, as the 2D `plot_heatmap`.

    Columns are grouped into blocks (O_h ∩ I_h, O_h only, I_h only), separated by black lines and
    named above, and within a block by class (label under each run of columns). Marks: white dot =
    observed; amber square = true symmetry; grey x = no exact lift; red x = observed but not a true
    symmetry.
    """
    keys = list(dict.fromkeys(zip(table["pe"], table["observable"])))
    blocks = _blocks(list(dict.fromkeys(table["element"])))
    elems = [e for _, els in blocks for e in els]
    n_sh = table["shape"].nunique()
    fig, created = _figure(fig, (max(7.0, 0.075 * len(elems) + 3.0), (1.5 + 0.32 * n_sh) * len(keys) + 1.0))
    fig.set_layout_engine("constrained")  # the colour bar spans every panel (tight_layout cannot place it)
    alpha = float(table["alpha"].iloc[0]) if "alpha" in table.columns else 0.05
    norm = pvalue_norm(alpha)
    axs, im = [], None
    for k, (pe, obs) in enumerate(keys):
        ax = fig.add_subplot(len(keys), 1, k + 1)
        axs.append(ax)
        t = table[(table["pe"] == pe) & (table["observable"] == obs)]
        shapes = list(dict.fromkeys(t["shape"]))
        grid = np.full((len(shapes), len(elems)), np.nan)
        x = t["element"].map({e: i for i, e in enumerate(elems)}).to_numpy()
        y = t["shape"].map({s: i for i, s in enumerate(shapes)}).to_numpy()
        grid[y, x] = np.log10(np.clip(panel_pvalues(t), P_FLOOR, 1.0))
        im = ax.imshow(np.ma.masked_invalid(grid), cmap="RdBu", norm=norm, aspect="auto", interpolation="nearest")
        ax.set_facecolor("0.85")
        obs_m = t["observed"].astype(bool).to_numpy()
        lift = t["liftable"].astype(bool).to_numpy()
        true = t["true_symmetry"].astype("boolean").fillna(False).astype(bool).to_numpy()
        ax.scatter(x[true], y[true], s=30, marker="s", facecolors="none", edgecolors="#ffbf00", linewidths=1.2)
        ax.scatter(x[~lift], y[~lift], s=10, c="0.45", marker="x", linewidths=0.6)
        ax.scatter(x[obs_m], y[obs_m], s=12, c="white", edgecolors="k", linewidths=0.5)
        ax.scatter(x[obs_m & ~true], y[obs_m & ~true], s=20, c="red", marker="x", linewidths=1.0)
        start, ticks, labels = 0, [], []
        for name, els in blocks:
            runs = list(dict.fromkeys(_class(e) for e in els))
            pos = start
            for c in runs:
                n = sum(_class(e) == c for e in els)
                ticks.append(pos + (n - 1) / 2)
                labels.append(f"{c} ({n})")
                if pos > start:
                    ax.axvline(pos - 0.5, color="white", lw=0.8)
                pos += n
            if start:
                ax.axvline(start - 0.5, color="k", lw=2.0)
            ax.text(start + len(els) / 2 - 0.5, -0.6, name, ha="center", va="bottom", fontsize=SMALL, weight="bold")
            start += len(els)
        ax.set_xticks(ticks, labels, rotation=90, fontsize=SMALL)
        ax.set_yticks(range(len(shapes)), shapes, fontsize=SMALL)
        ax.set_xlabel("candidate element g, by block and class (r: rotation by deg, s: rotoreflection, m: mirror, "
                      "i: inversion, e: identity; (n): elements in the class)", fontsize=SMALL)
        ax.set_title(f"{pe} encoding, observable {obs}: is g a symmetry of the weights? (colour: Holm-adjusted "
                     "p-value)", fontsize=FONT, pad=14)
    if im is not None:
        pvalue_colorbar(fig, im, axs, alpha)
    return finish(fig, path, created)
