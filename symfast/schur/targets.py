"""Our convergence targets beside the paper's full models ("Task-Restricted Symmetries in Recurrent
Weight Space", arXiv 2606.18457): how many models reach each (`target_counts`), every comparison row
read again on the models as good as the paper's (`compare_at_paper_targets`), and the report's table
with a note on the verdicts that change (`targets_table`)."""
from __future__ import annotations

import os

import numpy as np
import pandas as pd

from symfast.schur.paper import CONVERGENCE, PAPER_TARGETS, compare_with_paper, converged

__all__ = ["meets_paper_target", "passes", "target_counts", "compare_at_paper_targets", "targets_table"]


def meets_paper_target(task: str, fvu: float, replay_acc: float | None = None) -> bool:
    """Whether a full model is as good as the paper's full model (PAPER_TARGETS): FVU at most the
    paper's, or, on copy, replay accuracy 1.00 (to rounding)."""
    metric, target = PAPER_TARGETS[task]
    if metric == "fvu":
        return bool(fvu <= target)
    return replay_acc is not None and bool(replay_acc >= target - 1e-9)


def passes(models):
    """Per model row: (meets our CONVERGENCE target, meets the paper's full model) as two boolean arrays."""
    acc = models["replay_acc"] if "replay_acc" in models.columns else [None] * len(models)
    ours = np.array([converged(t, f, None if a is None or a != a else a)
                     for t, f, a in zip(models["task"], models["fvu"], acc)], dtype=bool)
    paper = np.array([meets_paper_target(t, f, None if a is None or a != a else a)
                      for t, f, a in zip(models["task"], models["fvu"], acc)], dtype=bool)
    return ours, paper


def target_counts(models):
    """Per task: our convergence target beside the paper's full model, and how many trained models
    (`schur_models.csv` rows: task, fvu, replay_acc) reach each.

    Returns:
        pandas DataFrame: task, metric, "target (symfast)", "paper's full model", trained,
        "reach ours", "reach the paper's".
    """
    ours, paper = passes(models)
    rows = []
    for task in [t for t in CONVERGENCE if t in set(models["task"])]:
        m = (models["task"] == task).to_numpy()
        metric, target = CONVERGENCE[task]
        op = "<=" if metric == "fvu" else ">="
        rows.append({"task": task, "metric": metric, "target (symfast)": f"{op} {target:g}",
                     "paper's full model": f"{PAPER_TARGETS[task][1]:g}" if metric == "fvu" else f"{PAPER_TARGETS[task][1]:.2f}",
                     "trained": int(m.sum()), "reach ours": int(ours[m].sum()), "reach the paper's": int(paper[m].sum())})
    return pd.DataFrame(rows)


def compare_at_paper_targets(comparison, raw, models, summarise, alpha: float = 0.9, trained=None):
    """Every comparison row read again on the models as good as the paper's full model (PAPER_TARGETS)
    instead of those that reach our CONVERGENCE target, beside the verdict `comparison` gives.

    Args:
        comparison: the study's `compare_with_paper` output on all seeds pooled (before the replicate
            rule, so that a changed class comes from the target alone).
        raw: per-model ablation rows of the converged models that `comparison` was read on (columns
            task, construction, hidden, seed).
        models: one row per trained model (task, construction, hidden, seed, fvu, replay_acc).
        summarise: rows -> the summary `compare_with_paper` reads.
        trained: as in `compare_with_paper`.

    Returns:
        pandas DataFrame: table, setting, subset, metric, verdict, n, verdict_paper_target,
        n_paper_target, changed (the class differs).
    """
    keys = ["task", "construction", "hidden", "seed"]
    _, paper = passes(models)
    strict = models.loc[paper, keys]
    rows = raw.merge(strict, on=keys) if len(strict) else raw.iloc[:0]
    summ = summarise(rows) if len(rows) else pd.DataFrame(columns=["task", "construction", "hidden", "alpha", "subset",
                                                                      "n"])
    strict_cmp = compare_with_paper(summ, alpha=alpha, trained=trained)
    key = ["table", "setting", "subset", "metric"]
    out = comparison[key + ["verdict", "n"]].merge(
        strict_cmp[key + ["verdict", "n"]].rename(columns={"verdict": "verdict_paper_target", "n": "n_paper_target"}),
        on=key, how="left")
    out["changed"] = out["verdict"] != out["verdict_paper_target"]
    return out


def targets_table(sub: str):
    """(caption, our targets beside the paper's full models with the models reaching each, a note on
    what the stricter target changes) from the files `symfast schur` wrote in folder `sub`
    (`schur_models.csv`; `schur_paper_targets.csv` when the run wrote it, else the note can only say
    whether the same models reach both targets); None without `schur_models.csv`."""
    path = os.path.join(sub, "schur_models.csv")
    if not os.path.exists(path):
        return None
    t = target_counts(pd.read_csv(path))
    caption = "Convergence targets: ours beside the paper's full models"
    head = "Convergence targets: ours are looser than the paper's full models (table above). "
    strict_path = os.path.join(sub, "schur_paper_targets.csv")
    if os.path.exists(strict_path):
        strict = pd.read_csv(strict_path)
        moved = strict[strict["changed"].astype(str).str.lower() == "true"]
        what = "; ".join(f"{r.table}: {r.setting}, {r.subset}: {r.verdict} -> {r.verdict_paper_target} "
                         f"(n {r.n} -> {r.n_paper_target})" for r in moved.itertuples())
        return caption, t, head + (f"On the models as good as the paper's full models (`schur_paper_targets.csv`), "
                                   f"{len(moved)} of {len(strict)} verdicts change" + (f": {what}." if what else "."))
    # the paper's targets are stricter, so the models reaching them are a subset of ours: equal counts
    # mean the same models, hence the same verdicts
    same = (t["reach ours"] == t["reach the paper's"]).all()
    return caption, t, head + ("The same models reach both targets, so no verdict changes under the paper's; "
                               "computed from `schur_models.csv`, without retraining." if same else
                               "Fewer models reach the paper's targets; which verdicts change needs the per-model "
                               "rows (`schur_paper_targets.csv`, written by `symfast schur`), not kept here.")
