"""Figures for readouts: the decision heatmap, rotation sweeps, a grid summary of observed vs
expected sets, fitted zero-level sets beside the true shapes, and training-loss curves.

Every function draws into the caller's axes (`ax=` / `axes=`) when given, else into a new figure;
writes a PNG when `path` is given; returns the figure; never changes the matplotlib backend.
"""
from __future__ import annotations

from symfast._optional import require

require("matplotlib", "plotting")  # before the matplotlib imports below: one line naming the extra

import numpy as np
import pandas as pd
from matplotlib.colors import TwoSlopeNorm
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle

from symfast._deprecation import renamed
from symfast.plotting import FONT, SMALL, axes_or_new, finish, legend_outside

__all__ = ["plot_heatmap", "plot_sweep_curves", "plot_sweep_summary", "plot_zero_level_sets", "plot_loss_curves",
           "pvalue_norm", "pvalue_colorbar", "P_FLOOR"]

# Old names (before the plot_ prefix every figure function now has), still answered with a warning.
__getattr__ = renamed(globals(), {"heatmap": "plot_heatmap", "sweep_curves": "plot_sweep_curves",
                                     "sweep_summary": "plot_sweep_summary",
                                     "zero_level_sets": "plot_zero_level_sets", "loss_curves": "plot_loss_curves"})

P_FLOOR = 1e-6  # p-values below this share the darkest colour
_TRUE, _HATCH = "#ffbf00", "0.8"  # box of a true symmetry, hatching of a non-liftable element: visible on red and blue


def _new_axes(n: int, axes, figsize, **kw):
    """(figure, [n] axes, created) from the caller's axes or a new column of n panels."""
    import matplotlib.pyplot as plt

    if axes is not None:
        axes = list(np.ravel(axes))
        if len(axes) < n:
            raise ValueError(f"need {n} axes (one per panel), got {len(axes)}")
        return axes[0].figure, axes[:n], False
    fig, ax = plt.subplots(n, 1, figsize=figsize, squeeze=False, layout="constrained", **kw)
    return fig, list(ax[:, 0]), True


def panel_pvalues(t: pd.DataFrame) -> np.ndarray:
    """Holm-adjusted p-value per row: within the exactly liftable family (the G_obs decision), and,
    for elements without an exact lift, the same test under their best orthogonal lift."""
    lift = t["liftable"].astype(bool).to_numpy()
    return np.where(lift, t["p_adjusted"].to_numpy(float), t["p_adjusted_all"].to_numpy(float))


def pvalue_norm(alpha: float) -> TwoSlopeNorm:
    """Colour scale of log10 p-values, centred on the decision level alpha (shared by the 2D and 3D heatmaps)."""
    return TwoSlopeNorm(vcenter=np.log10(alpha), vmin=np.log10(P_FLOOR), vmax=0.0)


def pvalue_colorbar(fig, im, axs, alpha: float):
    """The p-value colour bar with the level alpha as a black line (above: observed)."""
    cb = fig.colorbar(im, ax=axs, shrink=min(1.0, 3.0 / len(axs)), extend="min")
    ticks = np.arange(np.log10(P_FLOOR), 0.5, 1.0)
    cb.set_ticks(ticks, labels=[f"1e{int(v)}" if v < 0 else "1" for v in ticks], fontsize=SMALL)
    cb.ax.axhline(np.log10(alpha), color="k", lw=2.5)
    cb.set_label(f"Holm-adjusted p-value; black line: alpha = {alpha:g}\n"
                 "(above: observed, below: rejected)", fontsize=SMALL)
    return cb


def plot_heatmap(table: pd.DataFrame, path=None, axes=None):
    """The readout's decision per (shape, element), one panel per (encoding, observable).

    Cells are coloured by the Holm-adjusted p-value of "g is a symmetry" on a log scale centred
    on the decision level alpha (marked on the colour bar): blue cells pass (observed), red are
    rejected. Hatched cells have no exact lift through the encoding (their colour is the test
    under the best orthogonal lift); an amber box marks a true symmetry of the shape, so a hatched
    box is a true symmetry the encoding cannot lift, a plain box without a dot a missed one.

    Args:
        table: `Readout.table` (columns shape, pe, observable, element, liftable, true_symmetry,
            observed, approx_observed, p_adjusted, p_adjusted_all, alpha).
        path: optional PNG path.
        axes: optional sequence of Axes, one per (pe, observable) panel, in table order.

    Returns:
        the figure.
    """
    need = {"shape", "pe", "observable", "element", "liftable", "true_symmetry", "observed", "p_adjusted",
            "p_adjusted_all"}
    if not need <= set(table.columns):
        raise ValueError(f"table lacks columns {sorted(need - set(table.columns))} (pass Readout.table)")
    keys = list(dict.fromkeys(zip(table["pe"], table["observable"])))
    n_el, n_sh = table["element"].nunique(), table["shape"].nunique()
    fig, axs, created = _new_axes(len(keys), axes, (max(6.0, 1.8 + 0.42 * n_el),
                                                    1.6 + (0.9 + 0.45 * n_sh) * len(keys)))
    alpha = float(table["alpha"].iloc[0]) if "alpha" in table.columns else 0.05
    norm = pvalue_norm(alpha)
    im = None
    for ax, (pe, obs) in zip(axs, keys):
        t = table[(table["pe"] == pe) & (table["observable"] == obs)]
        shapes, elems = list(dict.fromkeys(t["shape"])), list(dict.fromkeys(t["element"]))
        grid = np.full((len(shapes), len(elems)), np.nan)
        logp = np.log10(np.clip(panel_pvalues(t), P_FLOOR, 1.0))
        for (_, r), lp in zip(t.iterrows(), logp):
            y, x = shapes.index(r["shape"]), elems.index(r["element"])
            grid[y, x] = lp
            true = r["true_symmetry"] is True or r["true_symmetry"] == 1
            if not bool(r["liftable"]):
                ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, hatch="///", ec=_HATCH, lw=0))
            if true:
                ax.add_patch(Rectangle((x - 0.42, y - 0.42), 0.84, 0.84, fill=False, ec=_TRUE, lw=2.2))
            if bool(r["observed"]):
                ax.plot(x, y, "o", ms=7, mfc="white", mec="k", mew=1.0)
                if not true:
                    ax.plot(x, y, "x", ms=9, color="red", mew=2.0)
            elif bool(r.get("approx_observed", False)) and not bool(r["liftable"]):
                ax.plot(x, y, "D", ms=6, mfc="none", mec="k", mew=1.2)
        im = ax.imshow(np.ma.masked_invalid(grid), cmap="RdBu", norm=norm, aspect="auto")
        ax.set_facecolor("0.85")  # no p-value (too few seeds for a noise floor)
        ax.set_xticks(range(len(elems)), elems, rotation=90, fontsize=SMALL)
        ax.set_yticks(range(len(shapes)), shapes, fontsize=SMALL)
        ax.set_xlabel("candidate element g (r: rotation by deg, m: mirror at axis angle deg)", fontsize=SMALL)
        ax.set_title(f"{pe} encoding, observable {obs}: is g a symmetry of the weights? "
                     "(colour: Holm-adjusted p-value)", fontsize=FONT)
    pvalue_colorbar(fig, im, axs, alpha)
    handles = [Line2D([], [], ls="", marker="o", ms=7, mfc="white", mec="k", label="observed (in G_obs)"),
               Patch(fc="white", ec=_TRUE, lw=2.2, label="true symmetry of the shape (G_true)"),
               Patch(fc="0.3", ec=_HATCH, hatch="///", label="no exact lift (not in G_lift)"),
               Line2D([], [], ls="", marker="D", ms=6, mfc="none", mec="k",
                      label="no exact lift, passes under its best lift"),
               Line2D([], [], ls="", marker="x", ms=8, color="red", mew=2, label="observed but false (violation)")]
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=SMALL,
               frameon=False)
    return finish(fig, path, created)


def _thresholds(sweep: pd.DataFrame, table) -> pd.Series:
    """Per sweep row: the decision threshold on the score (median over the exactly liftable candidates of
    its (pe, shape, observable) in the readout `table`; the sweep's rotations are scored, not tested)."""
    out = pd.Series(np.nan, index=sweep.index)
    if table is None or "threshold" not in table or table.empty:
        return out
    t = table[table["liftable"].astype(bool)]
    med = t.groupby(["pe", "shape", "observable"])["threshold"].median()
    for key, idx in sweep.groupby(["pe", "shape", "observable"]).groups.items():
        if key in med.index:
            out.loc[idx] = med.loc[key]
    return out


def plot_sweep_curves(sweep: pd.DataFrame, path=None, axes=None, table=None):
    """Normalised score against rotation angle, one panel per encoding, one line per shape, with the
    decision threshold (dotted, divided by the same null) and the same y axes in every panel.

    The score is divided by its spectrum-matched null (`score_null`: the same lift on a random
    orthogonal conjugate of the observable, i.e. what the lift alone produces), so curves sit
    near 1 where there is no symmetry and dip where there is one, also near the identity where
    raw scores are small for every shape. The dashed line (right axis) is the relative residual of
    the least-squares lift: 0 where the encoding lifts the rotation exactly.

    Args:
        sweep: `Readout.sweep` (columns pe, shape, observable, angle_deg, score[, score_norm], lift_residual).
        path: optional PNG path. axes: optional sequence of Axes, one per encoding.
        table: optional `Readout.table`: its decision thresholds (median over the liftable candidates of
            each shape) are drawn dotted, divided by the same lift-only null as the score.

    Returns:
        the figure.
    """
    pes = list(dict.fromkeys(sweep["pe"]))
    value = "score_norm" if "score_norm" in sweep else "score"
    null = sweep["score_null"] if "score_null" in sweep and value == "score_norm" else 1.0
    thr = _thresholds(sweep, table) / null
    thr = thr.where(np.isfinite(thr))
    finite = lambda v: v[np.isfinite(v)]  # noqa: E731
    top = max([1.05 * float(finite(sweep[value]).max()) if finite(sweep[value]).size else 1.0, 1.1,
               1.05 * float(thr.max()) if thr.notna().any() else 0.0])
    res_top = max(1.05 * float(finite(sweep["lift_residual"]).max()) if finite(sweep["lift_residual"]).size else 0.0,
                  0.05)
    fig, axs, created = _new_axes(len(pes), axes, (8.0, 2.9 * len(pes)))
    for ax, pe in zip(axs, pes):
        t = sweep[sweep["pe"] == pe]
        several = t["observable"].nunique() > 1
        for k, ((shape, obs), ts) in enumerate(t.groupby(["shape", "observable"], sort=False)):
            ax.plot(ts["angle_deg"], ts[value], color=f"C{k % 10}", label=f"{shape} ({obs})" if several else shape)
            if thr.loc[ts.index].notna().any():
                ax.plot(ts["angle_deg"], thr.loc[ts.index], color=f"C{k % 10}", ls=":", lw=1.2)
        if value == "score_norm":
            ax.axhline(1.0, color="grey", lw=0.8, ls="-.", label="lift-only null (no symmetry)")
        first = t[(t["shape"] == t["shape"].iloc[0]) & (t["observable"] == t["observable"].iloc[0])]
        ax2 = ax.twinx()
        ax2.plot(first["angle_deg"], first["lift_residual"], "k--", lw=0.9)
        ax2.set_ylim(0.0, res_top)  # the same right axis in every panel
        ax2.set_ylabel("lift residual (relative)", fontsize=SMALL)
        ax2.tick_params(labelsize=SMALL)
        ax.set_ylim(0.0, top)  # the same left axis in every panel
        ax.set_xlabel("rotation angle (deg)", fontsize=SMALL)
        ax.set_ylabel("score / lift-only null" if value == "score_norm" else "score s(g) (relative)",
                      fontsize=SMALL)
        ax.tick_params(labelsize=SMALL)
        ax.set_title(f"{pe} encoding: Gram change under rotation by angle (low = symmetric)", fontsize=FONT)
        handles, labels = ax.get_legend_handles_labels()
        if thr.loc[t.index].notna().any():
            handles.append(Line2D([], [], color="0.3", ls=":", lw=1.2))
            labels.append("decision threshold (dotted, per shape;\nbelow it: passes the test)")
        handles.append(Line2D([], [], color="k", ls="--", lw=0.9))
        labels.append("lift residual (right axis; 0 = exact lift)")
        legend_outside(ax, handles=handles, labels=labels, bbox_to_anchor=(1.1, 1.0))
    return finish(fig, path, created)


def _names(s) -> set:
    return set(str(s).split()) if isinstance(s, str) else set()


def plot_sweep_summary(summary: pd.DataFrame, path=None, ax=None):
    """Observed vs expected over the grid of shapes x (encoding, observable).

    Each cell counts the expected elements (G_lift ∩ G_true) that were observed, the missed
    ones and the extra ones (observed but not expected); green = G_obs equals the expected
    set, orange = some missed, red = an extra (a violation of the hierarchy).

    Args:
        summary: `Readout.summary()` (columns shape, pe, observable, G_obs, G_lift_and_true).
        path: optional PNG path. ax: optional Axes.

    Returns:
        the figure.
    """
    cols = list(dict.fromkeys(zip(summary["pe"], summary["observable"])))
    shapes = list(dict.fromkeys(summary["shape"]))
    fig, ax, created = axes_or_new(ax, (max(5.0, 1.6 + 1.5 * len(cols)), 1.4 + 0.75 * len(shapes)))
    colour = {"matched": "#9fd89f", "missed": "#f6c177", "extra": "#ef8a8a"}
    for _, r in summary.iterrows():
        x, y = cols.index((r["pe"], r["observable"])), shapes.index(r["shape"])
        obs, exp = _names(r["G_obs"]), _names(r["G_lift_and_true"])
        found, missed, extra = obs & exp, sorted(exp - obs), sorted(obs - exp)
        state = "extra" if extra else "missed" if missed else "matched"
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, fc=colour[state], ec="white", lw=2))
        text = f"{len(found)} of {len(exp)} found"
        if missed:
            text += "\nmissed: " + " ".join(missed[:4]) + (" …" if len(missed) > 4 else "")
        if extra:
            text += "\nextra: " + " ".join(extra[:4]) + (" …" if len(extra) > 4 else "")
        ax.text(x, y, text, ha="center", va="center", fontsize=SMALL)
    ax.set_xlim(-0.5, len(cols) - 0.5)
    ax.set_ylim(len(shapes) - 0.5, -0.5)
    ax.set_xticks(range(len(cols)), [f"{pe}\n{obs}" for pe, obs in cols], fontsize=SMALL)
    ax.set_yticks(range(len(shapes)), shapes, fontsize=SMALL)
    ax.set_xlabel("encoding / observable", fontsize=SMALL)
    ax.set_ylabel("shape", fontsize=SMALL)
    ax.set_title("observed vs expected: G_obs against G_lift ∩ G_true", fontsize=FONT)
    legend_outside(ax, handles=[Patch(fc=c, label={"matched": "G_obs = expected", "missed": "expected element(s) "
                                                   "missed", "extra": "extra element(s): violation"}[k])
                                for k, c in colour.items()])
    return finish(fig, path, created)


def plot_zero_level_sets(ensembles, path=None, axes=None, members: int = 3, resolution: int = 161, extent: float = 1.0):
    """Fitted zero-level sets f = 0 of a few members beside the true boundary, per (shape, encoding).

    Args:
        ensembles: trained `Ensemble`s (one per encoding); every shape they hold gets a panel.
        path: optional PNG path.
        axes: optional 2D array of Axes [encodings, shapes].
        members: members drawn per panel (the first ones of each shape).
        resolution: grid points per side; extent: the square [-extent, extent]^2 is drawn.

    Returns:
        the figure.
    """
    import matplotlib.pyplot as plt
    import torch

    ensembles = list(ensembles)
    shapes = list(dict.fromkeys(s for e in ensembles for s in e.shapes))
    if axes is None:
        fig, axs = plt.subplots(len(ensembles), len(shapes), figsize=(2.9 * len(shapes) + 1.5, 2.8 * len(ensembles)),
                                squeeze=False, layout="constrained")
        created = True
    else:
        axs = np.asarray(axes, dtype=object).reshape(len(ensembles), len(shapes))
        fig, created = axs[0, 0].figure, False
    g = np.linspace(-extent, extent, resolution)
    X, Y = np.meshgrid(g, g)
    pts = torch.as_tensor(np.stack([X.ravel(), Y.ravel()], 1))
    colours = [f"C{k}" for k in range(members)]
    for i, ens in enumerate(ensembles):
        pred = ens(pts.to(ens.weights[0].dtype)).numpy()
        for j, shape in enumerate(shapes):
            ax = axs[i, j]
            idx = [k for k, s in enumerate(ens.shapes) if s == shape][:members]
            target = ens.targets[idx[0]] if idx else None
            if target is not None and target._sdf is not None:  # a custom field saved without its callable
                true = target.sdf(pts).numpy().reshape(X.shape)
                ax.contour(X, Y, true, levels=[0.0], colors="k", linewidths=2.4)
            flat = []
            for m, (c, k) in enumerate(zip(colours, idx)):
                f = pred[k].reshape(X.shape)
                if f.min() < 0 < f.max():
                    ax.contour(X, Y, f, levels=[0.0], colors=c, linewidths=1.2, linestyles="--")
                else:  # nothing to draw: say so instead of an empty panel
                    flat.append(f"member {m + 1}: no zero crossing ({'f > 0' if f.min() >= 0 else 'f < 0'})")
            if flat:
                ax.text(0.5, 0.03, "\n".join(flat), transform=ax.transAxes, ha="center", va="bottom", color="red",
                        fontsize=SMALL, weight="bold", bbox=dict(fc="white", ec="red", alpha=0.9))
            ax.add_patch(plt.Circle((0, 0), 1.0, fill=False, ec="0.6", lw=0.8, ls=":"))
            ax.set_aspect("equal")
            ax.set_xlim(-extent, extent)
            ax.set_ylim(-extent, extent)
            ax.tick_params(labelsize=SMALL)
            ax.set_title(f"{shape}, {ens.pe.name} encoding", fontsize=FONT)
            ax.set_xlabel("x (domain units)", fontsize=SMALL)
            ax.set_ylabel("y (domain units)", fontsize=SMALL)
    handles = [Line2D([], [], color="k", lw=2.4, label="true boundary (SDF = 0)")]
    handles += [Line2D([], [], color=c, lw=1.2, ls="--", label=f"fitted f = 0, member {k + 1}")
                for k, c in enumerate(colours)]
    handles.append(Line2D([], [], color="0.6", lw=0.8, ls=":", label="training domain (unit disk)"))
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=SMALL, frameon=False)
    return finish(fig, path, created)


def plot_loss_curves(ensembles, path=None, ax=None):
    """Training loss against step per (encoding, shape): median over members, band = min to max.

    Args:
        ensembles: trained `Ensemble`s (their `losses` [steps, B]; imported ones without losses are skipped).
        path: optional PNG path. ax: optional Axes.

    Returns:
        the figure.
    """
    fig, ax, created = axes_or_new(ax, (7.5, 4.0))
    k = 0
    for ens in ensembles:
        if not ens.losses.numel():
            continue
        L = ens.losses.numpy()
        steps = np.arange(1, len(L) + 1)
        for shape in dict.fromkeys(ens.shapes):
            idx = [i for i, s in enumerate(ens.shapes) if s == shape]
            ls = L[:, idx]
            ax.plot(steps, np.median(ls, 1), color=f"C{k % 10}", lw=1.2,
                    label=f"{ens.pe.name} / {shape} ({len(idx)} members)")
            ax.fill_between(steps, ls.min(1), ls.max(1), color=f"C{k % 10}", alpha=0.2, lw=0)
            k += 1
    ax.set_yscale("log")
    ax.set_xlabel("training step (Adam)", fontsize=SMALL)
    ax.set_ylabel("loss: mean squared SDF error (domain units²)", fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)
    ax.set_title("readout training loss per (encoding, shape): median over members, band = min to max",
                 fontsize=FONT)
    if k:
        legend_outside(ax)
    return finish(fig, path, created)
