"""Figures for the Schur ablation study. This module draws the ablation figure (effects per block
beside the random control, with each model's eigenvalues and the sector cuts) and re-exports the
per-model diagnostics of `symfast.schur.diagnostic_plots` (the ordered Schur form |T|, spectra and
block masses, eps-stabilisers, damage predictors, training losses, the copy-task family pattern),
so every Schur figure is reached as `symfast.schur.plots.plot_*`.

Every function draws into the caller's axes / figure when given, else into a new figure; writes
a PNG when `path` is given; returns the figure; never changes the matplotlib backend.
"""
from __future__ import annotations

from symfast._optional import require

require("matplotlib", "plotting")  # before the matplotlib imports below: one line naming the extra

import math

import numpy as np
import pandas as pd
from matplotlib.lines import Line2D

from symfast._deprecation import renamed
from symfast.plotting import FONT, SMALL, finish, legend_outside
from symfast.schur.diagnostic_plots import (OKABE_ITO, plot_copy_family, plot_loss_curves, plot_predictors,
                                            plot_schur_form, plot_spectra_and_masses, plot_stabilisers)

__all__ = ["plot_ablation", "plot_schur_form", "plot_stabilisers", "plot_predictors", "plot_loss_curves", "noop_line",
           "NORMAL_TOL", "OKABE_ITO", "plot_spectra_and_masses", "plot_copy_family"]

# Old names (before the plot_ prefix every figure function now has), still answered with a warning.
__getattr__ = renamed(globals(), {"ablation_figure": "plot_ablation", "schur_form": "plot_schur_form",
                                     "spectra_and_masses": "plot_spectra_and_masses",
                                     "stabilisers": "plot_stabilisers", "predictors": "plot_predictors",
                                     "loss_curves": "plot_loss_curves", "copy_family": "plot_copy_family"})

NORMAL_TOL = 1e-10  # ||N|| / ||T|| below this: W is normal to rounding, every ablation removes nothing
ROW_HEIGHT = 3.4  # inches per (task, construction, H) row of the ablation figure: ~410 px, well under a screen

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
