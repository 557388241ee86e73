"""Parsing and table formatting shared by `symfast schur`'s tanh path and its other families."""
from __future__ import annotations

import numpy as np
import pandas as pd

from symfast.commands import UsageError

__all__ = ["SINGLE", "parse_list", "fmt_ci", "stabiliser_table", "budget", "print_deviations"]

SINGLE = ("-T_RR", "-T_C->R", "-T_CC")


def parse_list(arg: str, allowed, what: str) -> list[str]:
    """'a,b' or 'all' -> items of `allowed`; an unknown item is a UsageError naming it."""
    items = list(allowed) if arg == "all" else [s.strip() for s in arg.split(",") if s.strip()]
    for s in items:
        if s not in allowed:
            raise UsageError(f"unknown {what} {s!r}; expected one of {', '.join(allowed)} or 'all'")
    if not items:
        raise UsageError(f"no {what} given")
    return items


def ci_column(table, stat: str) -> list:
    """`fmt_ci` of each row's `<stat>_mean`, `<stat>_lo`, `<stat>_hi` (a summary table's columns)."""
    return [fmt_ci(*r) for r in table[[f"{stat}_mean", f"{stat}_lo", f"{stat}_hi"]].to_numpy()]


def fmt_ci(mu, lo, hi) -> str:
    """'mean [lo, hi]', or the mean alone without an interval, or 'nan'."""
    if not np.isfinite(mu):
        return "nan"
    if not np.isfinite(lo):
        return f"{mu:.3g}"
    return f"{mu:.3g} [{lo:.3g}, {hi:.3g}]"


def stabiliser_table(raw, keys=("task", "construction", "hidden")) -> pd.DataFrame:
    """Per model cell (`keys`), subset and alpha: 'S k/n' = k of n seeds are eps-stabilisers.

    Printed for the single blocks and all three (every subset is in the raw CSV and the figure)."""
    r = raw[raw.subset.isin(SINGLE + ("-T_RR,-T_C->R,-T_CC",))]
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


def budget(cfg) -> str:
    """One line: the training budget of a TrainConfig (epochs, batches, Adam and its schedule, clipping)."""
    lr = (f"Adam {cfg.lr:g}" if cfg.schedule == "constant" else
          f"Adam {cfg.lr:g} ({cfg.schedule}, warmup {cfg.warmup} steps, to {cfg.min_lr_ratio:g} x lr)")
    return (f"{cfg.epochs} epochs x {cfg.batches_per_epoch} batches of {cfg.batch}, {lr}, "
            f"clip {'off' if cfg.clip is None else f'{cfg.clip:g}'}"
            + (f", curriculum over the first {cfg.curriculum} epochs" if cfg.curriculum else ""))


def print_deviations(recipe: str, cfg_of: dict, given: dict, family: str = "tanh") -> None:
    """One line per (task, construction) of `cfg_of` {(task, construction): TrainConfig} whose training
    differs from the paper's budget, naming the differences and whether they come from the recipe
    (`symfast.schur.recipes`) or from the explicit flags in `given`."""
    from symfast.schur.recipes import deviations, fmt_setting
    lines = []
    for (t, cn), c in cfg_of.items():
        dev = deviations(recipe, t, cn, c, family=family)
        if dev:
            what = ", ".join(f"{f} {fmt_setting(a)} -> {fmt_setting(b)}" + (" (flag)" if f in given else "")
                             for f, (a, b) in dev.items())
            lines.append(f"  {t} / {cn}: {budget(c)}; deviations from the paper: {what}")
    print("deviations from the paper's training budget:" + ("\n" + "\n".join(lines) if lines else " none"))
