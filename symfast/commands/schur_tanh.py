"""`symfast schur` on the tanh RNN: the settings header, then a `SchurStudy`'s CSVs, figures and printed tables."""
from __future__ import annotations

import os

import pandas as pd

from symfast._io import atomic_write
from symfast.commands.schur_common import budget, ci_column, fmt_ci, print_deviations, print_fixed_points
from symfast.schur.study import grid_table, most_damaging_block, order_table, stabiliser_table

__all__ = ["print_tanh_header", "report_tanh"]


def print_tanh_header(settings, cfg_of: dict) -> None:
    """The settings line, the training's deviations from the paper's budget and, for a copy variant, its
    definition (printed before training)."""
    from symfast.schur.rnn import TrainConfig

    s = settings
    print(f"settings: recipe {s.recipe}, {s.seeds} seeds, eps = {s.epsilon:g}, alphas {s.sweep}; the paper's budget: "
          f"{budget(TrainConfig())}")
    print_deviations(s.recipe, cfg_of, s.budget_overrides(), s.family)
    if not s.is_paper_copy():
        print(f"copy task (a variant, not the paper's): {s.copy_task().config()}")


def _write_tables(study, out: str) -> None:
    for name, table in (("ablation_raw", study.raw), ("ablation_summary", study.summary), ("models", study.models),
                        ("subspace", study.subspace), ("near_cut", study.near_cut), ("alpha_grid", study.alpha_grid),
                        ("fixed_points", study.fixed_points)):
        if table is not None:
            atomic_write(os.path.join(out, f"schur_{name}.csv"), lambda p, t=table: t.to_csv(p, index=False))


def _print_convergence(facts, tasks, include_unconverged) -> None:
    from symfast.schur.paper import CONVERGENCE
    print("\nconvergence (held-out; target " + ", ".join(f"{t}: {m} {'<=' if m == 'fvu' else '>='} {v}"
                                                          for t, (m, v) in CONVERGENCE.items() if t in tasks) + ")")
    conv = facts.groupby(["task", "construction", "hidden"], sort=False).agg(
        converged=("converged", "sum"), seeds=("converged", "size"), fvu_median=("fvu", "median"),
        fvu_max=("fvu", "max"), replay_acc_min=("replay_acc", "min"))
    print(conv.to_string())
    if not include_unconverged and not facts.converged.all():
        print("unconverged models are excluded from every table (--include-unconverged keeps them)")


def _print_cells(study) -> None:
    """Per model cell at alpha: the effects with their intervals, the orderings table and the most damaging block."""
    s, summ, facts, used = study.settings, study.summary, study.models, study.used
    for (tname, cn, hidden), cell in summ[summ.alpha == s.alpha].groupby(["task", "construction", "hidden"],
                                                                         sort=False):
        f = facts[(facts.task == tname) & (facts.construction == cn) & (facts.hidden == hidden) & (
            facts.converged | s.include_unconverged)]
        print(f"\n== {tname} / {cn}: H={hidden}, {len(f)} seeds in the table, alpha={s.alpha}, "
              f"||N||/||T|| = {f.N_over_T.mean():.3g} (max {f.N_over_T.max():.2g}), n_R = {f.n_R.tolist()}, "
              f"eigenvalues within 1% of the cut: {f.n_near_cut.tolist()}")
        cols = {"subset": cell["subset"], "FVU": ci_column(cell, "fvu"),
                "dFVU raw [95% CI]": ci_column(cell, "dfvu"),
                "mass/||T||": cell["removed_rel_T_mean"].map("{:.3g}".format),
                "normalised sens.": cell["sensitivity_mean"].map("{:.3g}".format),
                "rand dFVU": cell["rand_dfvu_mean_mean"].map("{:.3g}".format),
                "d_D": cell["d_D_mean"].map("{:.3g}".format)}
        if "replay_acc_mean" in cell and tname == "copy":
            cols["replay acc [95% CI]"] = ci_column(cell, "replay_acc")
        if "fvu_refit_mean" in cell:
            cols["FVU refit"] = cell["fvu_refit_mean"].map("{:.3g}".format)
        print(pd.DataFrame(cols).to_string(index=False))
        print(order_table(cell, tname == "copy").to_string(index=False))
        rows = used[(used.task == tname) & (used.construction == cn) & (used.hidden == hidden)]
        print("most damaging single block (count of seeds) per alpha:\n" + most_damaging_block(rows).to_string())
        if cn == "cayley":
            print(f"Cayley: W orthogonal => normal, ||N||/||T|| <= {f.N_over_T.max():.1e}; "
                  f"max |dFVU| over ablations = {cell['dfvu_mean'].abs().max():.1e} (behaviour unchanged)")


def _print_comparisons(study, out: str) -> None:
    """The predictors, near-cut counts, the alpha-grid stability, and the comparisons with the paper."""
    s, pred = study.settings, study.predictors
    print("\n== subspace or coupling: Spearman rho of dFVU with each predictor across task x seed x block "
          "[95% bootstrap]")
    print(pred["all"].to_string(index=False, float_format="{:.3g}".format))
    print(pred["by_task"].to_string(index=False, float_format="{:.3g}".format))
    print("matched size: the same with dFVU(block) - dFVU(same-pattern random of equal norm) as the target")
    print(pred["matched"].to_string(index=False, float_format="{:.3g}".format))
    print(f"\n== eigenvalues within {s.near_cut:g} rho of the cut alpha rho = {s.alpha:g} rho "
          "(per model; each listed in schur_near_cut.csv)")
    print(study.models.groupby(["task", "construction", "hidden"], sort=False)["n_near_cut_rel"].agg(list).to_string())
    g_used, grid = study.used_alpha_grid, s.alpha_grid
    if g_used is not None and not g_used.empty:
        print(f"\n== stability over the alpha grid {grid[0]:g}..{grid[-1]:g} ({len(grid)} values, "
              f"{min(64, s.n_eval)} held-out sequences): n_R range and median over seeds of each effect's "
              "range (max - min over alpha); schur_alpha_grid.csv")
        print(grid_table(g_used).to_string(index=False))
    cmp = study.paper_comparison
    if not s.is_paper_copy():
        print("\n(the copy task is a variant: the paper's copy numbers are not compared)")
    atomic_write(os.path.join(out, "schur_paper_comparison.csv"), lambda p: cmp.to_csv(p, index=False))
    print("\n== comparison with the paper (ours: mean [95% CI] over converged seeds)")
    show = cmp.assign(ours=[fmt_ci(*r) for r in cmp[["ours", "lo", "hi"]].to_numpy()])
    print(show[["table", "setting", "subset", "metric", "paper", "ours", "n", "verdict", "reason"]]
          .to_string(index=False))
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in cmp["verdict"].value_counts().items()))
    strict = study.paper_targets
    if strict is not None:
        atomic_write(os.path.join(out, "schur_paper_targets.csv"), lambda p: strict.to_csv(p, index=False))
        moved = strict[strict.changed]
        from symfast.schur.paper import PAPER_TARGETS
        paper = ", ".join(f"{t} {m} {v:g}" for t, (m, v) in PAPER_TARGETS.items())
        print(f"\n== the same rows on the models as good as the paper's full models ({paper}): {len(moved)} of "
              f"{len(strict)} verdicts change (schur_paper_targets.csv)")
        if len(moved):
            print(moved[["table", "setting", "subset", "n", "verdict", "n_paper_target", "verdict_paper_target"]]
                  .to_string(index=False))
    reps = study.replicates
    if reps is not None:
        from symfast.schur.paper import PAPER_SEEDS
        atomic_write(os.path.join(out, "schur_paper_replicates.csv"), lambda p: reps.to_csv(p, index=False))
        print(f"\n== the same verdicts on the paper's seeds 0..{PAPER_SEEDS - 1} (the recipes were chosen on them) "
              f"and on the held-out seeds {PAPER_SEEDS}..{s.seeds - 1}")
        print(reps[["table", "setting", "subset", "n_paper_seeds", "verdict_paper_seeds", "n_heldout",
                    "verdict_heldout", "verdict_all", "replicated"]].to_string(index=False))
        both = reps[reps.replicated.notna()]
        tested = both.verdict_paper_seeds.isin(["held", "missed"]) | both.verdict_heldout.isin(["held", "missed"])
        print(f"replicated: {int(both[tested].replicated.sum())} of {int(tested.sum())} tested verdicts (held or missed "
              f"in either seed set); {int(both[~tested].replicated.sum())} of {int((~tested).sum())} others (order-"
              "dependent, not comparable, by construction: no test to replicate)")


def _write_figures(study, out: str) -> str:
    from symfast.schur import plots

    s, used = study.settings, study.used
    png = os.path.join(out, "schur_ablation.png")
    atomic_write(png, lambda p: plots.plot_ablation(used, study.spectra, s.alpha, study.used_models, p))
    atomic_write(os.path.join(out, "schur_stabilisers.png"), lambda p: plots.plot_stabilisers(used, p))
    atomic_write(os.path.join(out, "schur_subspace.png"),
                 lambda p: plots.plot_predictors(study.used_subspace, study.predictors["all"], p))
    atomic_write(os.path.join(out, "schur_T.png"), lambda p: plots.plot_schur_form(study.schur_forms, p))
    atomic_write(os.path.join(out, "schur_loss.png"), lambda p: plots.plot_loss_curves(study.losses, p))
    return png


def report_tanh(study, out: str) -> int:
    """Write the tanh study's CSVs and figures into `out` and print its tables; the exit status."""
    s = study.settings
    _write_tables(study, out)
    pd.set_option("display.width", 220)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_colwidth", 80)
    if study.fixed_points is not None:
        print_fixed_points(study.fixed_points, s.fixed_points, s.alpha)
    if study.used.empty:
        _print_convergence(study.models, s.tasks, s.include_unconverged)
        print("\nno converged model: nothing to tabulate (lengthen training or pass --include-unconverged)")
        return 0
    _print_cells(study)
    _print_convergence(study.models, s.tasks, s.include_unconverged)
    print(f"\n== eps-stabilisers (d_D <= {s.epsilon:g}): 'S k/n' = k of n seeds, median d_D; no-op = nothing removed; "
          "single blocks and all three (every subset: schur_ablation_raw.csv, schur_stabilisers.png)")
    print(stabiliser_table(study.used).to_string(index=False))
    _print_comparisons(study, out)
    png = _write_figures(study, out)
    print(f"\nwrote {os.path.join(out, 'schur_ablation_raw.csv')}, schur_ablation_summary.csv, schur_models.csv, "
          f"schur_subspace.csv, schur_paper_comparison.csv, {png}, schur_stabilisers.png, schur_subspace.png, "
          "schur_T.png, schur_loss.png, schur_near_cut.csv"
          + (", schur_alpha_grid.csv" if study.alpha_grid is not None else "")
          + (", schur_fixed_points.csv" if study.fixed_points is not None else "")
          + (", schur_paper_replicates.csv" if study.replicates is not None else "")
          + (", schur_paper_targets.csv" if study.paper_targets is not None else ""))
    return 0
