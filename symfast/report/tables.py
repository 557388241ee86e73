"""The report's tables for the Schur and layerwise studies, read from the files the studies wrote
(CSV / Markdown), so that the report shows a few compact tables instead of the studies' printed output.

Pure pandas: nothing here imports a study.
"""
from __future__ import annotations

import os
import re

import pandas as pd

__all__ = ["schur_tables", "layerwise_markdown", "MAIN_BLOCKS"]

MAIN_BLOCKS = ("-T_RR", "-T_C->R", "-T_CC", "-T_RR,-T_C->R,-T_CC")  # single blocks and all three


def _ci(mean, lo, hi) -> str:
    if pd.isna(mean):
        return "–"
    return f"{mean:.3g}" if pd.isna(lo) else f"{mean:.3g} [{lo:.3g}, {hi:.3g}]"


def _convergence(models: pd.DataFrame) -> pd.DataFrame:
    conv = models["converged"].astype(str).str.lower() == "true"
    g = models.assign(ok=conv).groupby(["task", "construction", "hidden"], sort=False)
    out = g.agg(seeds=("ok", "size"), conv=("ok", "sum"), fvu=("fvu", "median")).reset_index()
    return pd.DataFrame({"task": out["task"], "construction": out["construction"], "H": out["hidden"],
                         "converged": [f"{int(c)} of {int(n)}" for c, n in zip(out["conv"], out["seeds"])],
                         "median FVU": out["fvu"]})


def schur_tables(sub: str, alpha: float | None = None) -> tuple[list, list]:
    """(tables as (caption, DataFrame), notes) of the Schur study in folder `sub`.

    Tables: convergence per (task, construction, H) from `schur_models.csv`, and the effect of each
    single block and of all three at the main cut `alpha` (default: the middle of the alphas run)
    from `schur_ablation_summary.csv`. A (task, construction, H) whose every ablation is a no-op (e.g.
    a Cayley W, orthogonal hence normal) is left out of the effects table and named in one note.
    """
    tables, notes = [], []
    models = os.path.join(sub, "schur_models.csv")
    if os.path.exists(models):
        tables.append(("Convergence of the trained RNNs", _convergence(pd.read_csv(models))))
    path = os.path.join(sub, "schur_ablation_summary.csv")
    if not os.path.exists(path):
        return tables, notes
    s = pd.read_csv(path)
    if s.empty:
        return tables, notes
    alphas = sorted(s["alpha"].unique())
    a = alphas[len(alphas) // 2] if alpha is None else alpha
    s = s[(s["alpha"] == a) & s["subset"].isin(MAIN_BLOCKS)]
    noop = s.get("noop_mean", pd.Series(0.0, index=s.index)).fillna(0.0) >= 1.0
    keys = ["task", "construction", "hidden"]
    all_noop = noop.groupby([s[k] for k in keys], sort=False).transform("all")
    dropped = s.loc[all_noop, keys].drop_duplicates()
    for (cn, H), g in dropped.groupby(["construction", "hidden"], sort=False):
        notes.append(f"{cn}, H = {H} ({', '.join(g['task'])}): every ablation is a no-op (nothing removed: W is "
                     "normal to rounding, T has no coupling); left out of the effects table.")
    s, noop = s[~all_noop], noop[~all_noop]
    copy = s["task"].eq("copy") & s.get("replay_acc_mean", pd.Series(float("nan"), index=s.index)).notna()
    rows = []
    for (_, r), is_copy, is_noop in zip(s.iterrows(), copy, noop):
        v = "replay_acc" if is_copy else "dfvu"
        rows.append({"task": r["task"], "construction": r["construction"], "H": r["hidden"],
                     "subset": r["subset"], "n": r["n"],
                     "ΔFVU [95% CI]": "no-op" if is_noop else
                     (("replay acc " if is_copy else "") + _ci(r[f"{v}_mean"], r[f"{v}_lo"], r[f"{v}_hi"])),
                     "random control": r.get("rand_dfvu_mean_mean", float("nan")),
                     "mass/||T||": r.get("removed_rel_T_mean", float("nan"))})
    if rows:
        tables.append((f"Effect of zeroing each coupling block at α = {a:g} (every subset and α: "
                       "`schur_ablation_summary.csv`)", pd.DataFrame(rows)))
    return tables, notes


def layerwise_markdown(sub: str) -> str:
    """The layerwise suite's own Markdown (`suite.md`) with its headings one level down (they sit inside
    the study's section) and file paths reduced to names; "" when the suite wrote none."""
    path = os.path.join(sub, "suite.md")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        text = f.read()
    text = re.sub(r"^(#{1,5}) ", r"#\1 ", text, flags=re.M)
    return re.sub(r"^figure: (.+)$", lambda m: f"Figure: `{os.path.basename(m.group(1).strip())}` (below).", text,
                  flags=re.M)
