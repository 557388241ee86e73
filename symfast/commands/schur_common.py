"""Parsing and table formatting shared by `symfast schur`'s tanh path and its other families.

`SINGLE`, `stabiliser_table`, `fixed_point_facts` and `ablated_fixed_point_facts` moved to the study
(`symfast.schur.study`); they are re-exported here for callers of their old place.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from symfast.commands import UsageError
from symfast.schur.study import SINGLE, ablated_fixed_point_facts, fixed_point_facts, stabiliser_table

__all__ = ["SINGLE", "parse_list", "fmt_ci", "stabiliser_table", "budget", "print_deviations", "fixed_point_facts",
           "ablated_fixed_point_facts", "print_fixed_points"]


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


def print_fixed_points(fps, n_starts: int, alpha: float) -> None:
    """The fixed-point rows (`SchurStudy.fixed_points`, one per model and ablated matrix: a DataFrame or a
    list of dicts): the points and the Jacobian's split per model, then one line per model, matrix and
    block: the ablated linearisation beside the block's dFVU."""
    from symfast.schur.blocks import BLOCKS

    fpd = pd.DataFrame(fps)
    print(f"\n== fixed and slow points from {n_starts} visited states per model (input held at 0); "
          f"Jacobian J at the lowest-q point h* in ordered Schur form, alpha = {alpha:g}")
    base = [c for c in fpd.columns if c not in ("gate", "align_J") and not c.endswith(BLOCKS)]
    print(fpd.drop_duplicates(subset=[c for c in ("task", "family", "construction", "hidden", "seed") if c in fpd])[base]
          .to_string(index=False, float_format="{:.3g}".format))
    print(f"\n== each block removed alone, the ablated map linearised at the same h*: rho, slow modes "
          f"(|lambda| >= {alpha:g} rho(J)) and readout alignment ||V Q_s||/||V||, intact -> ablated, "
          "beside the block's dFVU")
    rows = []
    for _, r in fpd.iterrows():
        for b in BLOCKS:
            rows.append({"task": r["task"], "construction": r["construction"], "H": r["hidden"], "seed": r["seed"],
                         "matrix": r["gate"], "block": b, "rho": f"{r['rho_J']:.3g} -> {r[f'rho_Jab_{b}']:.3g}",
                         "slow modes": f"{r['n_R_J']} -> {r[f'n_slow_Jab_{b}']}",
                         "readout on slow": f"{r['align_J']:.2f} -> {r[f'align_Jab_{b}']:.2f}",
                         "dFVU": f"{r[f'dfvu_{b}']:.3g}"})
    print(pd.DataFrame(rows).to_string(index=False))
