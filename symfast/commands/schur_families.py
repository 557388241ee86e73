"""`symfast schur --family ssm|gru|lstm`: the Schur block ablations on the other recurrent families.

Per task, construction and width: train `--seeds` models with the recipe's settings
(`symfast.schur.recipes`, explicit flags winning) by `symfast.schur.families.train_family`
(`--engine fused`, the GRU's and SSM's seeds as one batched ensemble; `torch`, one model after another),
with one checkpoint per model in OUT/ckpt, rewritten every epoch: a re-run reloads finished models
and resumes interrupted ones at their last epoch. Then ablate the family's matrix in ordered
Schur coordinates (`symfast.schur.schur_ablation`: the linear SSM's A; for the GRU and LSTM each
gate of `--gate`, e.g. the GRU candidate W_hn), print the tables and write
OUT/schur_<family>_ablation_raw.csv, _summary.csv, _models.csv (and _fixed_points.csv with
`--fixed-points K`: the fixed and slow points found from K visited states per model, with the
ordered Schur form of the Jacobian at the slowest one and, one row per model and ablated matrix,
each single-block ablation linearised there, `symfast.schur.fixedpoints.ablated_linearisation`,
beside the block's dFVU), and OUT/schur_<family>_spectra.png: the
eigenvalues and coupling-block masses of every ablated matrix in the tables.
"""
from __future__ import annotations

import os
import time

import pandas as pd
import torch

from symfast._io import atomic_write
from symfast.commands import UsageError
from symfast.commands.schur_common import (ablated_fixed_point_facts, budget, ci_column, fixed_point_facts, parse_list,
                                           print_deviations, print_fixed_points, stabiliser_table)

__all__ = ["run_family"]

KEYS = ("task", "family", "construction", "gate", "hidden")
ALL3 = "-T_RR,-T_C->R,-T_CC"


def _matrix_name(family: str, gate) -> str:
    return "A" if gate is None else f"W_h{gate}"


def checkpoint_path(out: str, family: str, task: str, construction: str, hidden: int, seed: int) -> str:
    """Where the run writes the checkpoint of one model: OUT/ckpt/<family>_<task>_<construction>_H<h>_s<seed>.pt."""
    return os.path.join(out, "ckpt", f"{family}_{task}_{construction}_H{hidden}_s{seed}.pt")


def run_family(args, tasks, constructions, hid_of, sweep, epsilon, cfg_of, recipe, given) -> int:
    """Train, ablate and tabulate `args.family` (not "tanh"); the settings are already validated by the caller.
    cfg_of: {(task, construction): TrainConfig} of `recipe`, with the explicit flags `given` applied."""
    from symfast.schur import plots, schur_blocks
    from symfast.schur.ablation import schur_ablation, summarize
    from symfast.schur.blocks import BLOCKS
    from symfast.schur.families import DEFAULT_GATE, GATES, train_family
    from symfast.schur.paper import converged
    from symfast.schur.rnn import make_task

    family = args.family
    if family in GATES:
        gates = parse_list(args.gate, GATES[family], f"{family} gate")
        gates.sort(key=lambda g: g != DEFAULT_GATE[family])  # the default (candidate / cell input) first
    else:
        gates = [None]
    if "diagonal" in constructions and any(h % 2 for v in hid_of.values() for h in v):
        raise UsageError(f"--hidden must be even for the diagonal SSM (2x2 blocks), got {args.hidden}")
    print(f"settings: recipe {recipe}, family {family}, {args.seeds} seeds, eps = {epsilon:g}, alphas {sweep}")
    print_deviations(recipe, cfg_of, given, family)
    frames, facts, fps, spectra = [], [], [], {}
    for tname in tasks:
        task = make_task(tname)
        for cn in constructions:
            for hidden in hid_of[tname]:
                t0 = time.perf_counter()
                paths = [checkpoint_path(args.out, family, tname, cn, hidden, s) for s in range(args.seeds)]
                found = sum(os.path.exists(p) for p in paths)
                if found:
                    print(f"{found} of {len(paths)} checkpoints found in {os.path.dirname(paths[0])}: those of these "
                          "settings are reloaded when finished and resumed when partly trained")
                models = train_family(task, family, cn, range(args.seeds), hidden, cfg_of[(tname, cn)],
                                      progress=not args.no_progress, checkpoints=paths)
                print(f"trained {len(models)} {tname} {family} {cn} H={hidden} models in {time.perf_counter() - t0:.1f} s")
                for seed, model in enumerate(models):
                    if args.fixed_points:
                        fp_base, h_star = fixed_point_facts(model, task, args.fixed_points, seed, args.alpha)
                    for gate in gates:
                        view = model if gate is None else model.at_gate(gate)
                        df = schur_ablation(view, task, alpha=sweep, n_eval=args.n_eval, n_random=args.n_random,
                                            seed=seed, refit=args.refit, epsilon=epsilon, n_orders=args.n_orders,
                                            detail_alphas=[args.alpha])
                        at = df[df.alpha == args.alpha].set_index("subset")
                        acc = float(at.loc["full", "replay_acc"]) if "replay_acc" in at else None
                        ok = converged(tname, float(at.loc["full", "fvu"]), acc)
                        key = dict(zip(KEYS, (tname, family, cn, _matrix_name(family, gate), hidden)))
                        frames.append(df.assign(**key, seed=seed, converged=ok))
                        sb = schur_blocks(view.recurrent_weight(torch.float64), alpha=args.alpha)
                        norms = sb.block_norms()
                        mass = {b: norms[b] / norms["T"] if norms["T"] > 0 else 0.0 for b in BLOCKS}
                        if ok or args.include_unconverged:
                            label = f"{tname} / {family} {cn}, {key['gate']}, H={hidden}"
                            spectra.setdefault(label, []).append((sb.eigvals.numpy(), sb.rho, mass))
                        facts.append({**key, "seed": seed, "fvu": float(at.loc["full", "fvu"]), "replay_acc": acc,
                                      "converged": ok, "N_over_T": float(at.loc[ALL3, "removed_rel_T"]),
                                      "n_R": int(at.loc["full", "n_R"]),
                                      **{f"mass_{b}": m for b, m in mass.items()}})
                        if args.fixed_points:
                            fps.append({"task": tname, "family": family, "construction": cn, "hidden": hidden,
                                        "seed": seed, **fp_base, "gate": key["gate"],
                                        **ablated_fixed_point_facts(view, h_star, args.alpha, at)})
    raw = pd.concat(frames, ignore_index=True)
    raw["noop"] = (raw["stabiliser"] == "no-op").astype(float)
    facts = pd.DataFrame(facts)
    used = raw if args.include_unconverged else raw[raw.converged]
    values = ("fvu", "dfvu", "d_D", "removed_rel_T", "sensitivity", "rand_dfvu_mean", "rand_pattern_dfvu_mean",
              "rand_outside_dfvu_mean", "replay_acc", "dfvu_inv",
              "dfvu_order_min", "dfvu_order_max", "noop")
    summ = summarize(used, by=KEYS + ("alpha", "subset"), values=values) if not used.empty else pd.DataFrame()
    stem = os.path.join(args.out, f"schur_{family}_")
    atomic_write(stem + "ablation_raw.csv", lambda p: raw.to_csv(p, index=False))
    atomic_write(stem + "ablation_summary.csv", lambda p: summ.to_csv(p, index=False))
    atomic_write(stem + "models.csv", lambda p: facts.to_csv(p, index=False))
    if fps:
        atomic_write(stem + "fixed_points.csv", lambda p: pd.DataFrame(fps).to_csv(p, index=False))
    figure = stem + "spectra.png" if spectra else None
    if figure:
        atomic_write(figure, lambda p: plots.spectra_and_masses(spectra, args.alpha, p))

    pd.set_option("display.width", 220)
    pd.set_option("display.max_columns", 30)
    print(f"settings: recipe {recipe}, family {family}, {args.seeds} seeds, eps = {epsilon:g}, alphas {sweep}; "
          f"rollouts in float64; training: " + "; ".join(f"{t} / {cn}: {budget(c)}" for (t, cn), c in cfg_of.items()))
    _print_tables(summ, facts, used, args, epsilon)
    print("\nconvergence (held-out FVU of the full model; replay accuracy on copy)")
    print(facts.groupby(list(KEYS), sort=False).agg(converged=("converged", "sum"), seeds=("converged", "size"),
                                                     fvu_median=("fvu", "median"), fvu_max=("fvu", "max"))
          .to_string())
    if not args.include_unconverged and not facts.converged.all():
        print("unconverged models are excluded from every table (--include-unconverged keeps them)")
    if fps:
        print_fixed_points(fps, args.fixed_points, args.alpha)
    print(f"\nwrote {stem}ablation_raw.csv, {stem}ablation_summary.csv, {stem}models.csv"
          + (f", {stem}fixed_points.csv" if fps else "") + (f", {figure}" if figure else
                                                             " (no spectra figure: no model in the tables)"))
    return 0


def _print_tables(summ, facts, used, args, epsilon) -> None:
    if used.empty:
        print("\nno converged model: nothing to tabulate (lengthen training or pass --include-unconverged)")
        return
    for key, s in summ[summ.alpha == args.alpha].groupby(list(KEYS), sort=False):
        tname, family, cn, matrix, hidden = key
        f = facts[(facts[list(KEYS)] == pd.Series(dict(zip(KEYS, key)))).all(axis=1)
                  & (facts.converged | args.include_unconverged)]
        print(f"\n== {tname} / {family} {cn}, {matrix} ablated: H={hidden}, {len(f)} seeds in the table, "
              f"alpha={args.alpha}, ||N||/||T|| = {f.N_over_T.mean():.3g} (max {f.N_over_T.max():.2g}), "
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
