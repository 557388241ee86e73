"""The Schur study's printed tables, built from its raw and summary tables (`SchurStudy`).

Each function returns a DataFrame of formatted cells, one row per model cell and subset, ready to print.
"""
from __future__ import annotations

import pandas as pd

__all__ = ["SINGLE", "ALL_THREE", "stabiliser_table", "order_table", "grid_table", "most_damaging_block"]

SINGLE = ("-T_RR", "-T_C->R", "-T_CC")  # the single-block ablations
ALL_THREE = "-T_RR,-T_C->R,-T_CC"  # every coupling block at once


def stabiliser_table(raw, keys=("task", "construction", "hidden")) -> pd.DataFrame:
    """Per model cell (`keys`), subset and alpha: 'S k/n' = k of n seeds are eps-stabilisers.

    Printed for the single blocks and all three (every subset is in the raw CSV and the figure)."""
    r = raw[raw.subset.isin(SINGLE + (ALL_THREE,))]
    names = [("H" if k == "hidden" else k) for k in keys] + ["subset"]
    out = []
    for key, g in r.groupby(list(keys) + ["subset"], sort=False):
        row = dict(zip(names, key))
        for a, ga in g.groupby("alpha"):
            c = ga["stabiliser"].value_counts()
            n = len(ga)
            row[f"alpha={a:g}"] = ("no-op" if c.get("no-op", 0) == n else
                                   f"S {c.get('eps-stabiliser', 0)}/{n}" + (f" d_D {ga['d_D'].median():.2g}"))
        out.append(row)
    return pd.DataFrame(out)


def order_table(s, copy: bool) -> pd.DataFrame:
    """Per subset of one model cell's summary rows `s` (means over seeds): the paper's dFVU beside its
    range over within-sector orderings, the ordering-invariant variant, and the equal-norm random
    controls; with `copy`, the replay accuracy over orderings and its invariant variant too."""
    fmt = "{:.3g}".format
    cols = {"subset": s["subset"], "dFVU paper": s["dfvu_mean"].map(fmt),
            "over orderings min / med / max": [f"{a:.3g} / {b:.3g} / {c:.3g}" for a, b, c in
                                               s[["dfvu_order_min_mean", "dfvu_order_median_mean",
                                                  "dfvu_order_max_mean"]].to_numpy()],
            "order-dep. (share)": s["order_dependent_mean"].map("{:.2g}".format),
            "dFVU inv": s["dfvu_inv_mean"].map(fmt), "mass inv": s["removed_rel_T_inv_mean"].map(fmt),
            "rand pattern": s["rand_pattern_dfvu_mean_mean"].map(fmt),
            "rand outside": s["rand_outside_dfvu_mean_mean"].map(fmt), "rand anywhere": s["rand_dfvu_mean_mean"].map(fmt)}
    if copy and "replay_order_min_mean" in s:
        cols["replay over orderings"] = [f"{a:.3g}..{b:.3g}" for a, b in
                                         s[["replay_order_min_mean", "replay_order_max_mean"]].to_numpy()]
        cols["replay inv"] = s["replay_acc_inv_mean"].map(fmt)
    return pd.DataFrame(cols)


def grid_table(g) -> pd.DataFrame:
    """Per model cell and subset of the alpha-grid rows `g`: the n_R range over seeds, and the median
    over seeds of the dFVU, of its range over the grid and of the ordering-invariant dFVU's range."""
    out = []
    for key, gg in g.groupby(["task", "construction", "hidden", "subset"], sort=False):
        per_seed = gg.groupby("seed").agg(nR_lo=("n_R", "min"), nR_hi=("n_R", "max"), rng=("dfvu_range", "first"),
                                          rng_inv=("dfvu_inv_range", "first"), med=("dfvu", "median"))
        out.append(dict(zip(["task", "construction", "H", "subset"], key),
                        n_R=f"{per_seed.nR_lo.min()}..{per_seed.nR_hi.max()}",
                        dfvu_median=f"{per_seed.med.median():.3g}", dfvu_range=f"{per_seed.rng.median():.3g}",
                        dfvu_inv_range=f"{per_seed.rng_inv.median():.3g}"))
    return pd.DataFrame(out)


def most_damaging_block(rows) -> pd.DataFrame:
    """Per alpha (rows) and single block (columns): of how many seeds the block is the most damaging
    one in the raw rows of one model cell; "none" where no single block raises the FVU."""
    r = rows[rows.subset.isin(SINGLE)]
    winners = r.loc[r.groupby(["seed", "alpha"])["dfvu"].idxmax()].copy()
    winners.loc[winners["dfvu"] <= 1e-9, "subset"] = "none"  # no block hurts (e.g. Cayley, empty C sector)
    return winners.groupby("alpha")["subset"].value_counts().unstack(fill_value=0)
