"""Figures for the Schur ablation study: effects per block with the random control, eigenvalues
with the sector cuts, the ordered Schur form |T| with its R/C split, eps-stabilisers, damage
predictors and training losses.

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
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from symfast._deprecation import renamed
from symfast.plotting import FONT, SMALL, axes_or_new, finish, legend_outside
from symfast.schur.blocks import BLOCKS

__all__ = ["plot_ablation", "plot_schur_form", "plot_stabilisers", "plot_predictors", "plot_loss_curves", "noop_line",
           "NORMAL_TOL", "OKABE_ITO", "plot_spectra_and_masses", "plot_copy_family"]

# Old names (before the plot_ prefix every figure function now has), still answered with a warning.
__getattr__ = renamed(globals(), {"ablation_figure": "plot_ablation", "schur_form": "plot_schur_form",
                                     "spectra_and_masses": "plot_spectra_and_masses",
                                     "stabilisers": "plot_stabilisers", "predictors": "plot_predictors",
                                     "loss_curves": "plot_loss_curves", "copy_family": "plot_copy_family"})

NORMAL_TOL = 1e-10  # ||N|| / ||T|| below this: W is normal to rounding, every ablation removes nothing
ROW_HEIGHT = 3.4  # inches per (task, construction, H) row of the ablation figure: ~410 px, well under a screen
# Okabe-Ito colours (colour-blind safe), for categories ordered from "none" to "all".
OKABE_ITO = ("#D55E00", "#E69F00", "#F0E442", "#56B4E9", "#0072B2", "#CC79A7", "#009E73")


def _groups(df: pd.DataFrame) -> list:
    return list(dict.fromkeys(zip(df["task"], df["construction"], df["hidden"])))


def _interval(x: np.ndarray) -> tuple[float, float, float]:
    """(mean, lo, hi): 95% t-interval over the values (NaN bounds for a single value)."""
    from scipy.stats import t

    x = x[np.isfinite(x)]
    if len(x) == 0:
        return math.nan, math.nan, math.nan
    mu = float(x.mean())
    if len(x) < 2:
        return mu, math.nan, math.nan
    half = float(t.ppf(0.975, len(x) - 1)) * float(x.std(ddof=1)) / math.sqrt(len(x))
    return mu, mu - half, mu + half


def _is_normal(facts: pd.DataFrame, task, construction, hidden) -> bool:
    f = facts[(facts.task == task) & (facts.construction == construction) & (facts.hidden == hidden)]
    return not f.empty and bool(f["N_over_T"].max() < NORMAL_TOL)


def _all_noop(raw: pd.DataFrame, facts, task, construction, hidden) -> bool:
    """Whether every ablation of this model group removes nothing (e.g. W normal, as a Cayley W is)."""
    if facts is not None and _is_normal(facts, task, construction, hidden):
        return True
    r = raw[(raw.task == task) & (raw.construction == construction) & (raw.hidden == hidden) & (raw.subset != "full")]
    return "stabiliser" in r and not r.empty and bool((r["stabiliser"] == "no-op").all())


def noop_line(groups: list) -> str:
    """One line naming the model groups whose every ablation is a no-op (left out of the panels)."""
    by = {}
    for task, construction, hidden in groups:
        by.setdefault((construction, hidden), []).append(task)
    parts = [f"{cn}, H = {hd} ({', '.join(ts)})" for (cn, hd), ts in by.items()]
    return ("Not drawn, every ablation a no-op (W normal to rounding: T has no coupling to remove): "
            + "; ".join(parts))


def _sector_note(facts: pd.DataFrame, H: int, alpha: float) -> str:
    """What the sector split leaves to ablate, in words, for the panel."""
    if facts.empty:
        return ""
    if facts["N_over_T"].max() < NORMAL_TOL:
        return (f"W is normal to rounding (||N||/||T|| <= {facts['N_over_T'].max():.0e}):\n"
                "no coupling in T, every ablation is a no-op")
    n_R = facts["n_R"].tolist()
    note = f"n_R at alpha={alpha:g}: {n_R} of H = {H}"
    if all(n == H for n in n_R):
        note += "\nC sector empty: -T_C->R and -T_CC remove nothing"
    return note


def plot_ablation(raw: pd.DataFrame, spectra: dict, alpha: float, facts: pd.DataFrame | None = None,
                  path=None, fig=None):
    """Per (task, construction, H): block-ablation effects for every alpha with intervals over seeds,
    next to the equal-norm random control, and all seeds' eigenvalues with the sector cuts.

    Model groups whose every ablation is a no-op (a normal W, e.g. Cayley) get no panels: the
    figure's title names them in one line. Left panel: one row per ablated subset; filled circles = Schur ablation, open squares = random
    perturbation of the same Frobenius norm (mean, bar = 95% t-interval over seeds), small dots =
    single seeds, one colour per alpha. Rows where the ablation removes nothing are labelled no-op.
    Right panel: eigenvalues lambda / rho(W) of every seed with the circle rho (|lambda| = rho)
    and the cuts alpha rho; R = |lambda| >= alpha rho at the main alpha.

    Args:
        raw: `schur_ablation` rows of the models in the table (columns task, construction, hidden,
            seed, alpha, subset, dfvu, rand_dfvu_mean, stabiliser; replay_acc / rand_replay_acc for copy).
        spectra: {(task, construction, H): [(eigvals [H] complex, rho), ...] one per seed}.
        alpha: the main sector cut (colours R / C in the eigenvalue panels).
        facts: optional per-model rows (task, construction, hidden, n_R, N_over_T) for the notes
            on empty sectors and normal matrices.
        path: optional PNG path. fig: optional Figure to draw into (it must be empty).

    Returns:
        the figure.
    """
    import matplotlib.pyplot as plt

    groups, noop_groups = [], []
    for g in _groups(raw):
        (noop_groups if _all_noop(raw, facts, *g) else groups).append(g)
    alphas = sorted(raw["alpha"].unique())
    colours = {a: f"C{k}" for k, a in enumerate(alphas)}
    created = fig is None
    if created:
        fig = plt.figure(figsize=(13.0, ROW_HEIGHT * max(1, len(groups)) + (0.5 if noop_groups else 0.0)),
                         layout="constrained")
    if noop_groups:
        fig.suptitle(noop_line(noop_groups), fontsize=FONT)
    if not groups:
        return finish(fig, path, created)
    axes = fig.subplots(len(groups), 2, squeeze=False, gridspec_kw={"width_ratios": [2.3, 1.0]})
    for row, (tk, cn, hd) in enumerate(groups):
        ax, axe = axes[row]
        r = raw[(raw.task == tk) & (raw.construction == cn) & (raw.hidden == hd) & (raw.subset != "full")]
        subsets = list(dict.fromkeys(r["subset"]))
        copy = tk == "copy" and "replay_acc" in r and r["replay_acc"].notna().any()
        metric, control = ("replay_acc", "rand_replay_acc") if copy else ("dfvu", "rand_dfvu_mean")
        n_seeds = r["seed"].nunique()
        normal = facts is not None and _is_normal(facts, tk, cn, hd)
        shown = []  # plotted values: the axis limits follow them, intervals may run off the panel
        for i, sub in enumerate(subsets):
            for k, a in enumerate(alphas):
                ra = r[(r.subset == sub) & (r.alpha == a)]
                if ra.empty:
                    continue
                for j, (col, marker, face) in enumerate(((metric, "o", colours[a]), (control, "s", "white"))):
                    if col not in ra:
                        continue
                    y = i - 0.36 + 0.12 * (k + j * len(alphas))
                    vals = ra[col].to_numpy(float)
                    mu, lo, hi = _interval(vals)
                    ax.plot(vals, np.full(len(vals), y), ".", color=colours[a], ms=3, alpha=0.6)
                    if np.isfinite(lo):
                        ax.plot([lo, hi], [y, y], "-", color=colours[a], lw=1.4)
                    ax.plot(mu, y, marker, mfc=face, mec=colours[a], ms=6, mew=1.3)
                    shown.extend(vals[np.isfinite(vals)])
            rs = r[r.subset == sub]
            noop = sorted(rs.loc[rs.groupby("alpha")["stabiliser"].transform(lambda c: (c == "no-op").all()),
                                 "alpha"].unique()) if "stabiliser" in rs else []
            if noop and not normal:
                ax.text(0.99, i, "no-op (block empty) at alpha = " + ", ".join(f"{a:g}" for a in noop),
                        fontsize=SMALL, color="0.25", transform=ax.get_yaxis_transform(), ha="right", va="center",
                        bbox=dict(fc="white", ec="none", alpha=0.8))
        ax.set_yticks(range(len(subsets)), [s.replace("->", "→") for s in subsets], fontsize=SMALL)
        ax.set_ylim(len(subsets) - 0.5, -0.5)
        ax.grid(axis="x", color="0.9")
        ax.tick_params(axis="x", labelsize=SMALL)
        if copy:
            ax.set_xlim(-0.02, 1.02)
            ax.set_xlabel("replay accuracy after the ablation (fraction of symbols; 1 = perfect)", fontsize=SMALL)
        else:
            ax.set_xscale("symlog", linthresh=1e-3)
            lo, hi = (min(min(shown), 0.0), max(max(shown), 0.0)) if shown else (0.0, 0.0)
            ax.set_xlim(2 * lo - 1e-3, 2 * hi + 1e-3)
            ax.set_xlabel("ΔFVU = FVU(ablated) - FVU(trained) (unitless; symlog axis)", fontsize=SMALL)
            ax.axvline(0, color="k", lw=0.6)
        ax.set_title(f"{tk} / {cn}, H = {hd}: effect of zeroing each coupling block ({n_seeds} seeds)",
                     fontsize=FONT)
        f = facts[(facts.task == tk) & (facts.construction == cn) & (facts.hidden == hd)] \
            if facts is not None else pd.DataFrame()
        note = _sector_note(f, hd, alpha) if not f.empty else ""
        if note:
            ax.text(0.01, 0.02, note, transform=ax.transAxes, fontsize=SMALL, va="bottom",
                    bbox=dict(fc="white", ec="0.7", alpha=0.9))
        handles = [Line2D([], [], ls="", marker="o", color=colours[a], ms=6, label=f"Schur ablation, alpha={a:g}")
                   for a in alphas]
        handles += [Line2D([], [], ls="", marker="s", mfc="white", mec=colours[a], ms=6,
                           label=f"random, same norm, alpha={a:g}") for a in alphas]
        handles += [Line2D([], [], color="0.3", lw=1.4, label="95% t-interval over seeds\n(may run off the panel)"),
                    Line2D([], [], ls="", marker=".", color="0.3", label="single seeds")]
        legend_outside(ax, handles=handles)
        _eigen_panel(axe, spectra.get((tk, cn, hd), []), alpha, alphas, f"{tk} / {cn}, H = {hd}")
    return finish(fig, path, created)


def _eigen_panel(ax, spectra: list, alpha: float, alphas: list, name: str) -> None:
    th = np.linspace(0, 2 * np.pi, 400)
    ax.plot(np.cos(th), np.sin(th), "k-", lw=1.0)
    ax.text(np.cos(np.pi / 4) * 1.02, np.sin(np.pi / 4) * 1.02, "ρ(W)", fontsize=SMALL, ha="left", va="bottom")
    for a in alphas:
        ax.plot(a * np.cos(th), a * np.sin(th), "--", color="C3" if a == alpha else "0.55",
                lw=1.2 if a == alpha else 0.7)
    ax.text(0, -alpha + 0.03, f"α ρ, α = {alpha:g}", fontsize=SMALL, ha="center", va="bottom", color="C3")
    for k, (ev, rho) in enumerate(spectra):
        z = np.asarray(ev) / rho
        inR = np.abs(z) >= alpha
        m = "ov^sD"[k % 5]
        ax.scatter(z.real[inR], z.imag[inR], s=12, c="C3", marker=m, lw=0)
        ax.scatter(z.real[~inR], z.imag[~inR], s=12, c="C0", marker=m, lw=0)
    ax.set_aspect("equal")
    ax.set_xlim(-1.2, 1.2)
    ax.set_ylim(-1.2, 1.2)
    ax.tick_params(labelsize=SMALL)
    ax.set_xlabel("Re λ / ρ(W)", fontsize=SMALL)
    ax.set_ylabel("Im λ / ρ(W)", fontsize=SMALL)
    ax.set_title(f"eigenvalues of W, {len(spectra)} seed(s)", fontsize=FONT)
    handles = [Line2D([], [], ls="", marker="o", color="C3", label=f"R: |λ| ≥ {alpha:g} ρ"),
               Line2D([], [], ls="", marker="o", color="C0", label="C: the rest"),
               Line2D([], [], color="0.55", ls="--", label="cuts α ρ, α = " + ", ".join(f"{a:g}" for a in alphas))]
    handles += [Line2D([], [], ls="", marker="ov^sD"[k % 5], color="0.3", label=f"seed {k}")
                for k in range(len(spectra))]
    legend_outside(ax, handles=handles)


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
