"""The Schur study of the other recurrent families: the linear SSM's A, the GRU's and LSTM's gate slices.

Per task, construction and width: train `settings.seeds` models with the recipe's settings
(`symfast.schur.recipes`, explicit settings winning) by `symfast.schur.families.train_family`
(engine "fused": the GRU's and SSM's seeds as one batched ensemble; "torch": one model after
another), with one checkpoint per model rewritten every epoch: a rerun reloads finished models and
resumes interrupted ones at their last epoch. Then ablate the family's matrix in ordered Schur
coordinates (`schur_ablation`: the SSM's A; for the GRU and LSTM each analysed gate, e.g. the GRU
candidate W_hn) and, with settings.fixed_points, linearise each single-block ablation at the slowest
fixed or slow point.
"""
from __future__ import annotations

import os
import time
from typing import Callable

import pandas as pd
import torch

from symfast._progress import Progress
from symfast.schur.study_result import SchurStudy
from symfast.schur.study_settings import SchurSettings
from symfast.schur.tables import ALL_THREE

__all__ = ["FAMILY_KEYS", "FAMILY_SUMMARY_VALUES", "family_checkpoint_path", "matrix_name", "family_study"]

FAMILY_KEYS = ("task", "family", "construction", "gate", "hidden")  # one model cell and ablated matrix
# The raw columns the family summary averages (with 95% intervals) per cell, alpha and subset.
FAMILY_SUMMARY_VALUES = ("fvu", "dfvu", "d_D", "removed_rel_T", "sensitivity", "rand_dfvu_mean",
                         "rand_pattern_dfvu_mean", "rand_outside_dfvu_mean", "replay_acc", "dfvu_inv",
                         "dfvu_order_min", "dfvu_order_max", "noop")


def matrix_name(family: str, gate) -> str:
    """The ablated matrix: A (the SSM) or W_h<gate> (a GRU or LSTM gate)."""
    return "A" if gate is None else f"W_h{gate}"


def family_checkpoint_path(checkpoint_dir: str, family: str, task: str, construction: str, hidden: int,
                           seed: int) -> str:
    """Where the study keeps one model's checkpoint: <dir>/<family>_<task>_<construction>_H<h>_s<seed>.pt."""
    return os.path.join(checkpoint_dir, f"{family}_{task}_{construction}_H{hidden}_s{seed}.pt")


def family_study(settings: SchurSettings, checkpoint_dir: str, progress: Progress = False,
                 log: Callable[[str], None] | None = None) -> SchurStudy:
    """Train (or reload) and analyse every model of `settings.family` (not "tanh"); the tables of `SchurStudy`.

    Args:
        settings: the study's settings; checkpoint_dir: one checkpoint per model (`family_checkpoint_path`).
        progress: the training's progress; log: called with one line before a model cell's training when
            checkpoints were found, and one after it.
    """
    from symfast.schur.ablation import schur_ablation, summarize
    from symfast.schur.blocks import BLOCKS, schur_blocks
    from symfast.schur.families import train_family
    from symfast.schur.fixedpoints import ablated_fixed_point_facts, fixed_point_facts
    from symfast.schur.paper import converged
    from symfast.schur.rnn import make_task

    s, family, log = settings, settings.family, log or (lambda message: None)
    cfg_of, cons_of, hid_of, gates = s.train_configs(), s.constructions_of(), s.widths_of(), s.analysed_gates()
    frames, facts, fps, spectra = [], [], [], {}
    for tname in s.tasks:
        task = make_task(tname)
        for cn in cons_of[tname]:
            for hidden in hid_of[tname]:
                t0 = time.perf_counter()
                paths = [family_checkpoint_path(checkpoint_dir, family, tname, cn, hidden, seed)
                         for seed in range(s.seeds)]
                found = sum(os.path.exists(p) for p in paths)
                if found:
                    log(f"{found} of {len(paths)} checkpoints found in {os.path.dirname(paths[0])}: those of these "
                        "settings are reloaded when finished and resumed when partly trained")
                models = train_family(task, family, cn, range(s.seeds), hidden, cfg_of[(tname, cn)],
                                      progress=progress, checkpoints=paths)
                log(f"trained {len(models)} {tname} {family} {cn} H={hidden} models in {time.perf_counter() - t0:.1f} s")
                for seed, model in enumerate(models):
                    if s.fixed_points:
                        fp_base, h_star = fixed_point_facts(model, task, s.fixed_points, seed, s.alpha)
                    for gate in gates:
                        view = model if gate is None else model.at_gate(gate)
                        df = schur_ablation(view, task, alpha=s.sweep, n_eval=s.n_eval, n_random=s.n_random,
                                            seed=seed, refit=s.refit, epsilon=s.epsilon, n_orders=s.n_orders,
                                            detail_alphas=[s.alpha])
                        at = df[df.alpha == s.alpha].set_index("subset")
                        acc = float(at.loc["full", "replay_acc"]) if "replay_acc" in at else None
                        ok = converged(tname, float(at.loc["full", "fvu"]), acc)
                        key = dict(zip(FAMILY_KEYS, (tname, family, cn, matrix_name(family, gate), hidden)))
                        frames.append(df.assign(**key, seed=seed, converged=ok))
                        sb = schur_blocks(view.recurrent_weight(torch.float64), alpha=s.alpha)
                        norms = sb.block_norms()
                        mass = {b: norms[b] / norms["T"] if norms["T"] > 0 else 0.0 for b in BLOCKS}
                        if ok or s.include_unconverged:
                            label = f"{tname} / {family} {cn}, {key['gate']}, H={hidden}"
                            spectra.setdefault(label, []).append((sb.eigvals.numpy(), sb.rho, mass))
                        facts.append({**key, "seed": seed, "fvu": float(at.loc["full", "fvu"]), "replay_acc": acc,
                                      "converged": ok, "N_over_T": float(at.loc[ALL_THREE, "removed_rel_T"]),
                                      "n_R": int(at.loc["full", "n_R"]),
                                      **{f"mass_{b}": m for b, m in mass.items()}})
                        if s.fixed_points:
                            fps.append({"task": tname, "family": family, "construction": cn, "hidden": hidden,
                                        "seed": seed, **fp_base, "gate": key["gate"],
                                        **ablated_fixed_point_facts(view, h_star, s.alpha, at)})
    raw = pd.concat(frames, ignore_index=True)
    raw["noop"] = (raw["stabiliser"] == "no-op").astype(float)
    study = SchurStudy(settings=s, train_configs=cfg_of, raw=raw, summary=pd.DataFrame(), models=pd.DataFrame(facts),
                       fixed_points=pd.DataFrame(fps) if fps else None, spectra=spectra)
    used = study.used
    if not used.empty:
        study.summary = summarize(used, by=FAMILY_KEYS + ("alpha", "subset"), values=FAMILY_SUMMARY_VALUES)
    return study
