"""Parsing and table formatting shared by `symfast schur`'s tanh path and its other families."""
from __future__ import annotations

import numpy as np
import pandas as pd

from symfast.commands import UsageError

__all__ = ["SINGLE", "parse_list", "fmt_ci", "stabiliser_table", "budget", "print_deviations", "fixed_point_facts",
           "ablated_fixed_point_facts", "print_fixed_points"]

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


def fixed_point_facts(model, task, n_starts: int, seed: int, alpha: float) -> tuple:
    """Fixed/slow points of the model's autonomous map (input held at 0) from n_starts visited states,
    and the ordered Schur split of the Jacobian at the slowest: (facts, that point h*)."""
    import torch

    from symfast.schur.fixedpoints import find_fixed_points, step_map, visited_states

    fp = find_fixed_points(step_map(model), visited_states(model, task, n_starts, seed=seed))
    sb = fp.schur(0, alpha=alpha)
    nN, nT = float(sb.N.norm()), float(sb.T.norm())
    return {"n_fixed": int(fp.is_fixed.sum()), "n_slow": int((~fp.is_fixed).sum()), "q_min": float(fp.q[0]),
            "rho_J": sb.rho, "n_R_J": sb.n_R, "N_over_T_J": nN / nT if nT > 0 else float("nan"),
            "norm_h": float(torch.linalg.norm(fp.points[0]))}, fp.points[0]


def ablated_fixed_point_facts(view, h_star, alpha: float, at) -> dict:
    """Per single-block ablation of the view's matrix: the ablated map linearised at the intact model's
    slowest point h* (`ablated_linearisation`), next to the block's behavioural dFVU at the same alpha
    (`at`: the ablation table at that alpha, indexed by subset)."""
    from symfast.schur.blocks import subset_name
    from symfast.schur.fixedpoints import ablated_linearisation

    lin = ablated_linearisation(view, h_star, alpha=alpha)
    out = {"align_J": lin.alignment}
    for k, b in enumerate(lin.blocks):
        out.update({f"rho_Jab_{b}": lin.rho_ablated[k], f"n_slow_Jab_{b}": lin.n_slow_ablated[k],
                    f"align_Jab_{b}": lin.alignment_ablated[k], f"dfvu_{b}": float(at.loc[subset_name((b,)), "dfvu"])})
    return out


def print_fixed_points(fps: list[dict], n_starts: int, alpha: float) -> None:
    """The fixed-point rows (one per model and ablated matrix): the points and the Jacobian's split per
    model, then one line per model, matrix and block: the ablated linearisation beside the block's dFVU."""
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
