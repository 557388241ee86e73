"""Figures for 3D readouts: fitted vs true zero-level sets, SDF slices, and score heatmaps over the
elements of O(3) (matplotlib; the caller's backend is left as it is).

Every function takes `path=None` (save there and close the figure) and `fig=None` (draw into a
given figure, cleared first) and returns the figure. Zero-level sets are extracted by marching
cubes from scikit-image (the `plot3d` extra: `pip install "symfast[plot3d]"`); without it
`level_sets` warns and draws SDF slices instead.
"""
from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch

from symfast.plotting import finish

__all__ = ["level_sets", "sdf_slices", "score_heatmap", "HAVE_SKIMAGE"]

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


def level_sets(ens, shapes=None, member: int = 0, resolution: int = 40, radius: float = 1.0, path=None,
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
        The figure: one row per shape, columns true / fitted. Without scikit-image, `sdf_slices`'s.
    """
    _check_3d(ens)
    shapes = list(dict.fromkeys(ens.shapes)) if shapes is None else list(shapes)
    if not HAVE_SKIMAGE:
        warnings.warn("scikit-image is not installed (pip install 'symfast[plot3d]'): drawing SDF slices "
                      "instead of zero-level surfaces")
        return sdf_slices(ens, shapes, member=member, radius=radius, path=path, fig=fig)
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
                ax.text2D(0.2, 0.5, "no zero crossing", transform=ax.transAxes)
            for setter in (ax.set_xlim, ax.set_ylim, ax.set_zlim):
                setter(-radius, radius)
            ax.set_box_aspect((1, 1, 1))
            ax.set_title(f"{name}: {label}" + (f" (seed {ens.seeds[ens.indices(name)[member]]}, {ens.pe.name})"
                                               if label == "fitted" else ""), fontsize=8)
            ax.tick_params(labelsize=6)
    return _finish(fig, path, created)


def sdf_slices(ens, shapes=None, member: int = 0, z=(0.0,), resolution: int = 96, radius: float = 1.0,
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
            ax.set_title(f"{name}, z = {h:g}: {label}", fontsize=8)
            ax.tick_params(labelsize=6)
            fig.colorbar(im, ax=ax, fraction=0.046)
    return _finish(fig, path, created)


def score_heatmap(table: pd.DataFrame, path=None, fig=None):
    """Scores over many group elements (3D candidate sets have ~144): one panel per (pe, observable),
    shapes x elements coloured by score (best orthogonal lift).

    Marks: white dot = observed; grey x = not liftable by the encoding; red tick under a cell =
    liftable true symmetry (the expected G_obs). Element names are on the x axis (small font).
    """
    keys = list(dict.fromkeys(zip(table["pe"], table["observable"])))
    n_el = table["element"].nunique()
    n_sh = table["shape"].nunique()
    fig, created = _figure(fig, (max(6.0, 0.09 * n_el + 2.0), (1.4 + 0.35 * n_sh) * len(keys) + 0.6))
    vmax = max(1e-12, float(np.nanmax(table["score"])))
    for k, (pe, obs) in enumerate(keys):
        ax = fig.add_subplot(len(keys), 1, k + 1)
        t = table[(table["pe"] == pe) & (table["observable"] == obs)]
        shapes = list(dict.fromkeys(t["shape"]))
        elems = list(dict.fromkeys(t["element"]))
        grid = t.pivot(index="shape", columns="element", values="score").loc[shapes, elems]
        im = ax.imshow(grid.values, cmap="viridis_r", vmin=0, vmax=vmax, aspect="auto", interpolation="nearest")
        x = t["element"].map({e: i for i, e in enumerate(elems)}).to_numpy()
        y = t["shape"].map({s: i for i, s in enumerate(shapes)}).to_numpy()
        obs_m = t["observed"].astype(bool).to_numpy()
        lift = t["liftable"].astype(bool).to_numpy()
        true = t["true_symmetry"].astype("boolean").fillna(False).astype(bool).to_numpy()
        ax.scatter(x[obs_m], y[obs_m], s=6, c="white", edgecolors="none")
        ax.scatter(x[~lift], y[~lift], s=5, c="grey", marker="x", linewidths=0.5)
        ax.scatter(x[lift & true], y[lift & true] + 0.42, s=8, c="red", marker="|", linewidths=0.8)
        ax.set_xticks(range(len(elems)), elems, rotation=90, fontsize=3.5)
        ax.set_yticks(range(len(shapes)), shapes, fontsize=7)
        ax.set_title(f"{pe} / {obs}: dot observed, x not liftable, red tick = liftable true symmetry", fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.02, label="score s(g)")
    return _finish(fig, path, created)
