"""`symfast schur --family ssm|gru|lstm`: the Schur block ablations on the other recurrent families.

The study (`symfast.schur.study.schur_study`, its `study_families` part) trains per task,
construction and width `--seeds` models with the recipe's settings (`symfast.schur.recipes`,
explicit flags winning), with one checkpoint per model in OUT/ckpt, rewritten every epoch: a re-run
reloads finished models and resumes interrupted ones at their last epoch. Then it ablates the
family's matrix in ordered Schur coordinates (the linear SSM's A; for the GRU and LSTM each gate of
`--gate`, e.g. the GRU candidate W_hn). This module prints the tables and writes
OUT/schur_<family>_ablation_raw.csv, _summary.csv, _models.csv (and _fixed_points.csv with
`--fixed-points K`: the fixed and slow points found from K visited states per model, with the
ordered Schur form of the Jacobian at the slowest one and, one row per model and ablated matrix,
each single-block ablation linearised there, `symfast.schur.fixedpoints.ablated_linearisation`,
beside the block's dFVU), and OUT/schur_<family>_spectra.png: the
eigenvalues and coupling-block masses of every ablated matrix in the tables.
"""
from __future__ import annotations

import os

import pandas as pd

from symfast._io import atomic_write
from symfast.commands.schur_common import budget, ci_column, print_deviations, print_fixed_points
from symfast.schur.study import FAMILY_KEYS as KEYS
from symfast.schur.study import family_checkpoint_path, stabiliser_table

__all__ = ["print_family_header", "report_family", "checkpoint_path"]


def checkpoint_path(out: str, family: str, task: str, construction: str, hidden: int, seed: int) -> str:
    """Where the run writes the checkpoint of one model: OUT/ckpt/<family>_<task>_<construction>_H<h>_s<seed>.pt."""
    return family_checkpoint_path(os.path.join(out, "ckpt"), family, task, construction, hidden, seed)


def print_family_header(settings, cfg_of: dict) -> None:
    """The settings line and the training's deviations from the paper's budget (printed before training)."""
    s = settings
    print(f"settings: recipe {s.recipe}, family {s.family}, {s.seeds} seeds, eps = {s.epsilon:g}, alphas {s.sweep}")
    print_deviations(s.recipe, cfg_of, s.budget_overrides(), s.family)


def report_family(study, out: str) -> int:
    """Write the family study's CSVs and spectra figure into `out` and print its tables; the exit status."""
    from symfast.schur import plots

    s, family, facts, fps = study.settings, study.settings.family, study.models, study.fixed_points
    stem = os.path.join(out, f"schur_{family}_")
    atomic_write(stem + "ablation_raw.csv", lambda p: study.raw.to_csv(p, index=False))
    atomic_write(stem + "ablation_summary.csv", lambda p: study.summary.to_csv(p, index=False))
    atomic_write(stem + "models.csv", lambda p: facts.to_csv(p, index=False))
    if fps is not None:
        atomic_write(stem + "fixed_points.csv", lambda p: fps.to_csv(p, index=False))
    figure = stem + "spectra.png" if study.spectra else None
    if figure:
        atomic_write(figure, lambda p: plots.plot_spectra_and_masses(study.spectra, s.alpha, p))

    pd.set_option("display.width", 220)
    pd.set_option("display.max_columns", 30)
    print(f"settings: recipe {s.recipe}, family {family}, {s.seeds} seeds, eps = {s.epsilon:g}, alphas {s.sweep}; "
          f"rollouts in float64; training: " + "; ".join(f"{t} / {cn}: {budget(c)}"
                                                         for (t, cn), c in study.train_configs.items()))
    _print_tables(study.summary, facts, study.used, s, s.epsilon)
    print("\nconvergence (held-out FVU of the full model; replay accuracy on copy)")
    print(facts.groupby(list(KEYS), sort=False).agg(converged=("converged", "sum"), seeds=("converged", "size"),
                                                     fvu_median=("fvu", "median"), fvu_max=("fvu", "max"))
          .to_string())
    if not s.include_unconverged and not facts.converged.all():
        print("unconverged models are excluded from every table (--include-unconverged keeps them)")
    if fps is not None:
        print_fixed_points(fps, s.fixed_points, s.alpha)
    print(f"\nwrote {stem}ablation_raw.csv, {stem}ablation_summary.csv, {stem}models.csv"
          + (f", {stem}fixed_points.csv" if fps is not None else "") + (f", {figure}" if figure else
                                                                        " (no spectra figure: no model in the tables)"))
    return 0


def _print_tables(summ, facts, used, settings, epsilon) -> None:
    if used.empty:
        print("\nno converged model: nothing to tabulate (lengthen training or pass --include-unconverged)")
        return
    for key, s in summ[summ.alpha == settings.alpha].groupby(list(KEYS), sort=False):
        tname, family, cn, matrix, hidden = key
        f = facts[(facts[list(KEYS)] == pd.Series(dict(zip(KEYS, key)))).all(axis=1)
                  & (facts.converged | settings.include_unconverged)]
        print(f"\n== {tname} / {family} {cn}, {matrix} ablated: H={hidden}, {len(f)} seeds in the table, "
              f"alpha={settings.alpha}, ||N||/||T|| = {f.N_over_T.mean():.3g} (max {f.N_over_T.max():.2g}), "
              f"n_R = {f.n_R.tolist()}")
        cols = {"subset": s["subset"], "FVU": ci_column(s, "fvu"),
                "dFVU [95% CI]": ci_column(s, "dfvu"),
                "mass/||T||": s["removed_rel_T_mean"].map("{:.3g}".format),
                "rand dFVU: pattern / outside / anywhere": [
                    f"{p:.3g} / {o:.3g} / {a:.3g}" for p, o, a in
                    s[["rand_pattern_dfvu_mean_mean", "rand_outside_dfvu_mean_mean", "rand_dfvu_mean_mean"]].to_numpy()],
                "d_D": s["d_D_mean"].map("{:.3g}".format),
                "dFVU over orderings": [f"{a:.3g}..{b:.3g}" for a, b in
                                        s[["dfvu_order_min_mean", "dfvu_order_max_mean"]].to_numpy()],
                "no-op share": s["noop_mean"].map("{:.2g}".format)}
        if tname == "copy" and "replay_acc_mean" in s:
            cols["replay acc"] = ci_column(s, "replay_acc")
        print(pd.DataFrame(cols).to_string(index=False))
        r = used[(used[list(KEYS)] == pd.Series(dict(zip(KEYS, key)))).all(axis=1)]
        worst = float(r[["dfvu", "dfvu_inv", "dfvu_order_min", "dfvu_order_max"]].abs().max().max())
        print(f"max |dFVU| over every subset, alpha, ordering and invariant variant: {worst:.2g}; "
              f"no-op in {int(r.noop.sum())}/{len(r)} rows")
    print(f"\n== eps-stabilisers (d_D <= {epsilon:g}): 'S k/n' = k of n seeds, median d_D; no-op = nothing removed")
    print(stabiliser_table(used, keys=KEYS).to_string(index=False))
