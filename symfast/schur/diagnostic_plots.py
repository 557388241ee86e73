"""Per-model diagnostic figures of the Schur ablation study: the ordered Schur form |T| with its
R/C split, eigenvalues and coupling-block masses per model group, eps-stabilisers, damage
predictors, training losses and the copy-task family pattern. (The ablation figure itself, the
effects per block beside the random control, is in `symfast.schur.plots`, which re-exports
everything here.)

Every function draws into the caller's axes / figure when given, else into a new figure; writes
a PNG when `path` is given; returns the figure; never changes the matplotlib backend.
"""
from __future__ import annotations

from symfast._optional import require

require("matplotlib", "plotting")  # before the matplotlib imports below: one line naming the extra

import math

import numpy as np
import pandas as pd
from matplotlib.colors import LogNorm
from matplotlib.patches import Patch

from symfast.plotting import FONT, SMALL, axes_or_new, finish, legend_outside
from symfast.schur.blocks import BLOCKS

__all__ = ["plot_schur_form", "plot_spectra_and_masses", "plot_stabilisers", "plot_predictors", "plot_loss_curves",
           "plot_copy_family", "OKABE_ITO"]

# Okabe-Ito colours (colour-blind safe), for categories ordered from "none" to "all".
OKABE_ITO = ("#D55E00", "#E69F00", "#F0E442", "#56B4E9", "#0072B2", "#CC79A7", "#009E73")

def plot_schur_form(blocks: dict, path=None, axes=None):
    """|entries| of the ordered real Schur form T per model, with the line between the R and C sectors.

    Args:
        blocks: {title: (T [H, H] array, n_R)} e.g. one model per (task, construction, H).
        path: optional PNG path. axes: optional sequence of Axes, one per entry.

    Returns:
        the figure.
    """
    import matplotlib.pyplot as plt

    items = list(blocks.items())
    ncol = min(4, max(1, len(items)))
    nrow = math.ceil(len(items) / ncol) if items else 1
    created = axes is None
    if created:
        fig, axs = plt.subplots(nrow, ncol, figsize=(3.6 * ncol + 1.2, 3.5 * nrow), squeeze=False,
                                layout="constrained")
        axs = list(axs.ravel())
    else:
        axs = list(np.ravel(axes))
        fig = axs[0].figure
    vmax = max([float(np.abs(T).max()) for T, _ in blocks.values()] + [1e-12])
    norm = LogNorm(vmin=vmax * 1e-4, vmax=vmax)
    im = None
    for ax, (title, (T, n_R)) in zip(axs, items):
        T = np.abs(np.asarray(T, dtype=np.float64))
        H = len(T)
        cmap = plt.get_cmap("magma_r").with_extremes(bad="white")
        im = ax.imshow(np.ma.masked_less(T, norm.vmin), cmap=cmap, norm=norm, interpolation="nearest")
        if 0 < n_R < H:
            for f in (ax.axvline, ax.axhline):
                f(n_R - 0.5, color="C0", lw=1.6)
            ax.text(n_R / 2, -1, "R", ha="center", va="bottom", fontsize=FONT, color="C0")
            ax.text(n_R + (H - n_R) / 2, -1, "C", ha="center", va="bottom", fontsize=FONT, color="C0")
            if H - n_R >= H // 6:  # room for the block's name
                ax.text(n_R + (H - n_R) / 2, n_R / 2, "T_C→R", ha="center", va="center", fontsize=SMALL,
                        color="C0", bbox=dict(fc="white", ec="none", alpha=0.8))
        else:
            ax.text(H * 0.3, H * 0.75, f"C sector empty\n(n_R = {n_R} = H)", ha="center", fontsize=SMALL,
                    color="C0", bbox=dict(fc="white", ec="none", alpha=0.8))
        ax.set_title(f"{title}: |T|, n_R = {n_R}", fontsize=FONT, pad=14)
        ax.set_xlabel("column of T (eigenvalues by |λ|, decreasing)", fontsize=SMALL)
        ax.set_ylabel("row of T", fontsize=SMALL)
        ax.tick_params(labelsize=SMALL)
    for ax in axs[len(items):]:
        ax.axis("off")
    if im is not None:
        cb = fig.colorbar(im, ax=axs, shrink=0.8)
        cb.set_label("|T_ij| (log scale; below 1e-4 of the max: white)", fontsize=SMALL)
        cb.ax.tick_params(labelsize=SMALL)
    return finish(fig, path, created)


def plot_spectra_and_masses(groups: dict, alpha: float, path=None, fig=None, per_row: int = 4):
    """Eigenvalues and coupling-block masses of the ablated matrix, one column per model group, so
    families (tanh RNN, linear SSM, GRU and LSTM gates) can be compared side by side.

    Top panel of a column: every seed's eigenvalues lambda / rho with the circle rho and the cut
    alpha rho (R: |lambda| >= alpha rho). Bottom panel: the Frobenius norm of each coupling block
    (T_RR, T_C->R, T_CC) relative to ||T||, one dot per seed and a bar at the mean: the mass an
    ablation of that block removes. A normal matrix has no coupling mass at all.

    Args:
        groups: {label: [(eigvals [n] complex, rho, {"T_RR": m, "T_C->R": m, "T_CC": m}), ...] one per seed}.
        alpha: the sector cut the masses were computed at.
        path: optional PNG path. fig: optional empty Figure to draw into.
        per_row: columns per row of the grid.

    Returns:
        the figure.
    """
    import matplotlib.pyplot as plt

    if not groups:
        raise ValueError("plot_spectra_and_masses needs at least one model group")
    labels = list(groups)
    ncol = min(per_row, len(labels))
    nrow = math.ceil(len(labels) / ncol)
    created = fig is None
    if created:
        fig = plt.figure(figsize=(3.3 * ncol, 5.6 * nrow), layout="constrained")
    axes = fig.subplots(2 * nrow, ncol, squeeze=False, gridspec_kw={"height_ratios": [1.25, 1.0] * nrow})
    th = np.linspace(0, 2 * np.pi, 400)
    for k, label in enumerate(labels):
        top, bottom = axes[2 * (k // ncol), k % ncol], axes[2 * (k // ncol) + 1, k % ncol]
        seeds = groups[label]
        top.plot(np.cos(th), np.sin(th), "k-", lw=0.8)
        top.plot(alpha * np.cos(th), alpha * np.sin(th), "--", color="C3", lw=1.0)
        masses = {b: [] for b in BLOCKS}
        for ev, rho, m in seeds:
            z = np.asarray(ev) / rho if rho > 0 else np.asarray(ev)
            inR = np.abs(z) >= alpha - 1e-12
            top.scatter(z.real[inR], z.imag[inR], s=8, c="C3", lw=0)
            top.scatter(z.real[~inR], z.imag[~inR], s=8, c="C0", lw=0)
            for b in BLOCKS:
                masses[b].append(m[b])
        top.set_aspect("equal")
        top.set_xlim(-1.15, 1.15)
        top.set_ylim(-1.15, 1.15)
        top.tick_params(labelsize=SMALL)
        top.set_title(f"{label}\n{len(seeds)} seed(s)", fontsize=SMALL)
        top.set_xlabel("Re λ / ρ", fontsize=SMALL)
        for i, b in enumerate(BLOCKS):
            v = np.asarray(masses[b], float)
            bottom.bar(i, v.mean() if len(v) else 0.0, color=OKABE_ITO[3 + i], width=0.6)
            bottom.plot(np.full(len(v), i), v, "k.", ms=4)
        bottom.set_xticks(range(len(BLOCKS)), [b.replace("->", "→") for b in BLOCKS], fontsize=SMALL)
        bottom.tick_params(axis="y", labelsize=SMALL)
        bottom.set_ylim(0, max(0.05, 1.15 * max((max(v) for v in masses.values() if v), default=0.0)))
        bottom.grid(axis="y", color="0.9")
        if k % ncol == 0:
            top.set_ylabel("Im λ / ρ", fontsize=SMALL)
            bottom.set_ylabel(f"||block|| / ||T||  (α = {alpha:g})", fontsize=SMALL)
    for k in range(len(labels), nrow * ncol):  # unused cells of the last row
        axes[2 * (k // ncol), k % ncol].set_axis_off()
        axes[2 * (k // ncol) + 1, k % ncol].set_axis_off()
    fig.suptitle(f"eigenvalues (red: R, |λ| ≥ {alpha:g} ρ; blue: C; dashed: the cut) and the Schur mass of "
                 "each coupling block (bar: mean, dots: seeds)", fontsize=FONT)
    return finish(fig, path, created)


def plot_stabilisers(raw: pd.DataFrame, path=None, ax=None):
    """Fraction of seeds where each ablation is an eps-stabiliser, per model group, subset and alpha.

    Args:
        raw: `schur_ablation` rows (columns task, construction, hidden, subset, alpha, stabiliser).
        path: optional PNG path. ax: optional Axes.

    Returns:
        the figure.
    """
    r = raw[raw.subset != "full"].copy()
    r["frac"] = (r["stabiliser"] == "eps-stabiliser").astype(float)
    r.loc[r["stabiliser"] == "no-op", "frac"] = np.nan
    piv = r.pivot_table(index=["task", "construction", "hidden", "subset"], columns="alpha", values="frac",
                        aggfunc="mean", sort=False, dropna=False)
    fig, ax, created = axes_or_new(ax, (7.0, 0.24 * len(piv) + 1.8))
    values = piv.to_numpy()
    levels = sorted({float(v) for v in values[np.isfinite(values)]})
    if len(levels) <= 7:  # few seeds: categories (0, 1/2, 1 ...), one colour-blind-safe colour each
        from matplotlib.colors import ListedColormap

        middle = ("#F0E442", "#56B4E9", "#0072B2", "#E69F00", "#CC79A7")  # the other Okabe-Ito colours
        pick = ([OKABE_ITO[-1] if levels and levels[0] > 0.5 else OKABE_ITO[0]] if len(levels) <= 1 else
                [OKABE_ITO[0], *middle[:len(levels) - 2], OKABE_ITO[-1]])
        codes = np.full(values.shape, np.nan)
        for k, v in enumerate(levels):
            codes[np.isclose(values, v)] = k
        ax.imshow(codes, aspect="auto", cmap=ListedColormap(pick or ["white"]), vmin=-0.5,
                  vmax=max(len(levels), 1) - 0.5, interpolation="nearest")
        handles = [Patch(fc=c, label=f"{v:.2g} of seeds") for v, c in zip(levels, pick)]
    else:  # many seeds: a sequential colour-blind-safe scale
        im = ax.imshow(values, aspect="auto", cmap="cividis", vmin=0, vmax=1)
        cb = ax.figure.colorbar(im, ax=ax, fraction=0.05)
        cb.set_label("fraction of seeds", fontsize=SMALL)
        cb.ax.tick_params(labelsize=SMALL)
        handles = []
    ax.set_yticks(range(len(piv)), [f"{t}/{c} H={h}  {s.replace('->', '→')}" for t, c, h, s in piv.index],
                  fontsize=SMALL)
    ax.set_xticks(range(len(piv.columns)), [f"α = {a:g}" for a in piv.columns], fontsize=SMALL)
    ax.set_xlabel("sector cut α", fontsize=SMALL)
    ax.set_title("share of seeds where the ablation keeps behaviour (ε-stabiliser: d_D ≤ ε)", fontsize=FONT)
    ax.set_facecolor("0.8")
    legend_outside(ax, handles=handles + [Patch(fc="0.8", label="no-op: nothing removed")], title="share of seeds",
                   title_fontsize=SMALL)
    return finish(fig, path, created)


def plot_predictors(proj: pd.DataFrame, pred: pd.DataFrame, path=None, axes=None):
    """Spearman correlation of ΔFVU with each damage predictor, and the scatter behind each.

    Args:
        proj: `removed_direction_projections` rows with a dfvu column and a task column.
        pred: `damage_predictors(proj)` (columns predictor, rho, rho_lo, rho_hi, n).
        path: optional PNG path. axes: optional sequence of 1 + len(PREDICTORS) Axes.

    Returns:
        the figure.
    """
    import matplotlib.pyplot as plt

    from symfast.schur.subspace import PREDICTORS

    created = axes is None
    if created:
        fig, axs = plt.subplots(1, len(PREDICTORS) + 1, figsize=(3.6 * (len(PREDICTORS) + 1) + 1.2, 3.6),
                                layout="constrained")
    else:
        axs = list(np.ravel(axes))
        fig = axs[0].figure
    ax = axs[0]
    p = pred.set_index("predictor").loc[list(PREDICTORS)]
    xs = np.arange(len(p))
    err = np.abs(np.stack([p["rho"] - p["rho_lo"], p["rho_hi"] - p["rho"]]))
    ax.bar(xs, p["rho"], yerr=np.nan_to_num(err), capsize=3)
    ax.set_xticks(xs, [q.replace("_", "\n") for q in p.index], fontsize=SMALL)
    ax.axhline(0, color="k", lw=0.5)
    ax.set_ylabel("Spearman ρ with ΔFVU [95% bootstrap]", fontsize=SMALL)
    ax.tick_params(axis="y", labelsize=SMALL)
    ax.set_title(f"which predictor ranks the damage?\nn = {int(p['n'].max())} (task x seed x block)",
                 fontsize=FONT)
    for ax, q in zip(axs[1:], PREDICTORS):
        for k, (t, g) in enumerate(proj.groupby("task")):
            ax.scatter(g[q], g["dfvu"], s=12, c=f"C{k}", label=t)
        ax.set_xlabel(q.replace("_", " ") + " (unitless)", fontsize=SMALL)
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_ylabel("ΔFVU (symlog)", fontsize=SMALL)
        ax.tick_params(labelsize=SMALL)
        ax.set_title(f"ΔFVU against {q.replace('_', ' ')}", fontsize=FONT)
    legend_outside(axs[-1], title="task")
    return finish(fig, path, created)


def plot_loss_curves(losses: dict, path=None, ax=None, window: int = 16):
    """Training loss per configuration: median over seeds of a running mean, band = min to max.

    Args:
        losses: {label: [per-seed 1D arrays of per-batch losses]}.
        path: optional PNG path. ax: optional Axes. window: batches in the running mean.

    Returns:
        the figure.
    """
    fig, ax, created = axes_or_new(ax, (8.0, 4.0))
    for k, (label, runs) in enumerate(losses.items()):
        runs = [np.asarray(r, dtype=float) for r in runs if len(r)]
        if not runs:
            continue
        n = min(len(r) for r in runs)
        w = max(1, min(window, n))
        sm = np.stack([np.convolve(r[:n], np.ones(w) / w, mode="valid") for r in runs])
        x = np.arange(w, n + 1)
        ax.plot(x, np.median(sm, 0), color=f"C{k % 10}", lw=1.2, label=f"{label} ({len(runs)} seeds)")
        ax.fill_between(x, sm.min(0), sm.max(0), color=f"C{k % 10}", alpha=0.2, lw=0)
    ax.set_yscale("log")
    ax.set_xlabel("training batch", fontsize=SMALL)
    ax.set_ylabel(f"masked MSE loss (task units²; running mean of {window})", fontsize=SMALL)
    ax.tick_params(labelsize=SMALL)
    ax.set_title("RNN training loss per (task, construction, H): median over seeds, band = min to max",
                 fontsize=FONT)
    if ax.get_legend_handles_labels()[0]:
        legend_outside(ax)
    return finish(fig, path, created)


def plot_copy_family(pattern: pd.DataFrame, seeds: str = "all", path=None, ax=None):
    """The paper's copy pattern per copy definition: replay accuracy after -T_CC (lowest over the
    within-sector orderings) and after -T_C->R, mean and 95% interval over converged models, with
    the two thresholds of `symfast.schur.copy_family.pattern_verdict` and each setting's verdict.

    Args:
        pattern: `symfast.schur.copy_family.pattern_table` output.
        seeds: which seed set's rows to draw (its "seeds" column, e.g. "all" or "3-9").
        path: optional PNG path. ax: optional axes to draw into.
    """
    from symfast.schur.copy_family import FAR_BELOW, HARMLESS

    rows = pattern[pattern.seeds == seeds]
    if rows.empty:
        raise ValueError(f"no rows for the seed set {seeds!r}; the table has {sorted(set(pattern.seeds))}")
    fig, ax, created = axes_or_new(ax, figsize=(max(6.0, 0.95 * len(rows) + 2.0), 4.4))
    x = np.arange(len(rows))
    for key, label, colour, dx in (("cc_lowest", "−T_CC, lowest over orderings", OKABE_ITO[4], -0.12),
                                   ("cr", "−T_C→R", OKABE_ITO[0], 0.12)):
        mu, lo, hi = (rows[f"{key}_{s}"].to_numpy(float) for s in ("mean", "lo", "hi"))
        err = np.vstack([np.nan_to_num(mu - lo), np.nan_to_num(hi - mu)])
        ax.errorbar(x + dx, mu, yerr=err, fmt="o", color=colour, ms=5, capsize=3, label=label)
    ax.axhline(HARMLESS, color=OKABE_ITO[4], ls="--", lw=0.8, label=f"(a) harmless: ≥ {HARMLESS:.2f}")
    ax.axhline(FAR_BELOW, color=OKABE_ITO[0], ls=":", lw=0.8, label=f"(b) far below: < {FAR_BELOW:.2f}")
    names = [f"{r.setting.replace('_', ' ')}\n{r.converged}/{r.models} conv.\n{r.verdict.replace(' ', chr(10))}"
             for r in rows.itertuples()]
    ax.set_xticks(x, names, fontsize=SMALL, rotation=0)
    ax.set_ylabel("replay accuracy after the ablation", fontsize=FONT)
    lows = rows[["cc_lowest_lo", "cr_lo", "cc_lowest_mean", "cr_mean"]].to_numpy(float)
    lows = lows[np.isfinite(lows)]
    ax.set_ylim(min(0.4, float(lows.min()) - 0.05) if lows.size else 0.4, 1.03)
    ax.set_title(f"The paper's copy pattern per copy definition (seeds {seeds})", fontsize=FONT)
    ax.grid(axis="y", color="0.9")
    legend_outside(ax, "below", ncol=2)
    return finish(fig, path, created)
