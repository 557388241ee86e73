"""The Schur study of the paper's tanh RNN: train (or reload) every model, analyse each, gather the tables.

"Task-Restricted Symmetries in Recurrent Weight Space" (arXiv 2606.18457). The models of a task
train together (`train_tanh_models`), each model is analysed on one torch thread (`analyse_model`),
and `tanh_study` gathers the rows into a `SchurStudy`.
"""
from __future__ import annotations

import os
import time
from typing import Callable

import pandas as pd
import torch

from symfast._progress import Progress
from symfast.schur.rnn.checkpoint import CheckpointError
from symfast.schur.study_result import SchurStudy
from symfast.schur.study_settings import SchurSettings

__all__ = ["CheckpointError", "train_tanh_models", "analyse_model", "tanh_study", "SUMMARY_VALUES"]

# The raw columns the tanh summary averages (with 95% intervals) per model cell, alpha and subset.
SUMMARY_VALUES = ("fvu", "dfvu", "d_D", "removed_rel_T", "sensitivity", "rand_dfvu_mean", "replay_acc",
                  "nonadditivity", "fvu_refit", "dfvu_order_min", "dfvu_order_median", "dfvu_order_max",
                  "order_dependent", "replay_order_min", "replay_order_max", "dfvu_inv", "replay_acc_inv",
                  "removed_rel_T_inv", "rand_pattern_dfvu_mean", "rand_outside_dfvu_mean", "noop",
                  "paper_order_ambiguous")
_SUBSPACE_COLUMNS = ["subset", "dfvu", "rand_dfvu_mean", "rand_pattern_dfvu_mean", "task", "construction", "hidden",
                     "seed", "converged"]


def train_tanh_models(task, cells, seeds, cfg, checkpoint_dir: str, progress: Progress = False,
                      log: Callable[[str], None] | None = None) -> dict:
    """Every model of `task` the study needs: {(construction, hidden): ([model per seed], [losses per seed])}.

    A model whose checkpoint in `checkpoint_dir` (<task>_<construction>_H<hidden>_s<seed>.pt) is
    complete and of these settings is loaded; all the others, of every construction, width and
    training settings, train together in one `train_many` call (one fused kernel call per step for
    the models whose batches have the same shape, widths padded), each resuming from a partly
    trained checkpoint of its own. The result of each model does not depend on which others it
    trains with.

    Args:
        task: the task; cells: [(construction, hidden)]; seeds: the seeds (an iterable of int).
        cfg: one TrainConfig, or {construction: TrainConfig} (a recipe's per-construction settings).
        checkpoint_dir: where every model's checkpoint is read and written.
        progress: the training's progress (`symfast._progress`); log: called with one line after
            training (how many models trained, how many were loaded, the time).

    Raises:
        CheckpointError: a damaged checkpoint file (its message names the file).
    """
    from symfast.schur.recipes import FIELDS
    from symfast.schur.rnn import TrainConfig, train_many
    from symfast.schur.rnn.checkpoint import load_checkpoint as _load

    def load_checkpoint(path):  # a damaged file: one error naming it, never a NaN model
        try:
            return _load(path)
        except ValueError as e:
            raise CheckpointError(str(e)) from None
    log = log or (lambda message: None)
    cfg_of = cfg if isinstance(cfg, dict) else {cn: cfg for cn, _ in cells}  # construction -> TrainConfig
    seeds = list(seeds)
    keys = [(cn, hidden, s) for cn, hidden in cells for s in seeds]
    paths = {key: os.path.join(checkpoint_dir, f"{task.name}_{key[0]}_H{key[1]}_s{key[2]}.pt") for key in keys}
    models, losses = {}, {}
    for key in keys:
        cn, hidden, _ = key
        if os.path.exists(paths[key]):
            m, t, info = load_checkpoint(paths[key])
            tr, c = {**vars(TrainConfig()), **info["train"]}, cfg_of[cn]  # older files: no schedule fields
            if (t == task and m.n_hidden == hidden and m.recurrent == cn and info["epoch"] == c.epochs
                    and all(tr[f] == getattr(c, f) for f in FIELDS)):
                models[key], losses[key] = m, info["losses"]
    todo = [key for key in keys if key not in models]
    if todo:
        cfgs = [cfg_of[cn] for cn, _, _ in todo]
        t0 = time.perf_counter()
        trained = train_many(task, [s for _, _, s in todo], [h for _, h, _ in todo], [cn for cn, _, _ in todo], cfgs,
                             checkpoints=[paths[key] for key in todo], progress=progress)
        log(f"trained {len(todo)} {task.name} models ({len(keys) - len(todo)} loaded, "
            f"{len({repr(c) for c in cfgs})} training settings) in one {cfgs[0].engine} run: "
            f"{time.perf_counter() - t0:.1f} s")
        models.update(zip(todo, trained))
        # epochs = 0 trains nothing and writes no checkpoint: no losses to show
        losses.update((key, load_checkpoint(paths[key])[2]["losses"] if os.path.exists(paths[key]) else [])
                      for key in todo)
    return {(cn, hidden): ([models[(cn, hidden, s)] for s in seeds], [losses[(cn, hidden, s)] for s in seeds])
            for cn, hidden in cells}


def analyse_model(model, task, seed: int, settings: SchurSettings) -> dict:
    """The analysis of one trained tanh RNN, on one torch thread (`symfast.schur.threads`).

    Args:
        model: a trained TanhRNN; task: its task; seed: its seed (seeds the random controls and orders).
        settings: alpha, sweep, epsilon, n_eval, n_random, n_orders, refit, near_cut, alpha_grid and
            fixed_points are read.

    Returns:
        {"ablation": schur_ablation's table over settings.sweep, "subspace": removed_direction_projections'
        rows at settings.alpha, "blocks": the SchurBlocks at settings.alpha, "near_cut":
        near_cut_eigenvalues' table, "alpha_grid": alpha_stability's table or None without a grid,
        "fixed_points": with settings.fixed_points = K > 0, the fixed/slow points from K visited states
        and each single-block ablation linearised at the slowest (`fixed_point_facts`,
        `ablated_fixed_point_facts`), else None, "key": {"fvu", "replay_acc", "converged"} of the full
        model at settings.alpha}.
    """
    from symfast.schur.ablation import schur_ablation
    from symfast.schur.blocks import schur_blocks
    from symfast.schur.fixedpoints import ablated_fixed_point_facts, fixed_point_facts
    from symfast.schur.nearcut import alpha_stability, near_cut_eigenvalues
    from symfast.schur.paper import converged
    from symfast.schur.subspace import removed_direction_projections
    from symfast.schur.threads import analysis_threads

    s, alpha, grid = settings, settings.alpha, list(settings.alpha_grid)
    with analysis_threads():
        df = schur_ablation(model, task, alpha=s.sweep, n_eval=s.n_eval, n_random=s.n_random, seed=seed,
                            refit=s.refit, epsilon=s.epsilon, n_orders=s.n_orders, detail_alphas=[alpha])
        full = df[(df.subset == "full") & (df.alpha == alpha)].iloc[0]
        acc = float(full["replay_acc"]) if "replay_acc" in df else None
        pr = removed_direction_projections(model, task, alpha=alpha, n_eval=s.n_eval)
        W = model.recurrent_weight(torch.float64).detach()
        sb = schur_blocks(W, alpha=alpha)
        nc = near_cut_eigenvalues(W, alpha, s.near_cut)
        ag = alpha_stability(model, task, grid, n_eval=min(64, s.n_eval)) if grid else None
        fp = None
        if s.fixed_points:
            fp, h_star = fixed_point_facts(model, task, s.fixed_points, seed, alpha)
            fp.update(gate="W", **ablated_fixed_point_facts(model, h_star, alpha,
                                                            df[df.alpha == alpha].set_index("subset")))
    return {"ablation": df, "subspace": pr, "blocks": sb, "near_cut": nc, "alpha_grid": ag, "fixed_points": fp,
            "key": {"fvu": float(full["fvu"]), "replay_acc": acc,
                    "converged": converged(task.name, float(full["fvu"]), acc)}}


class _Rows:
    """The per-model rows `tanh_study` gathers, one list (or dict) per table and figure."""

    def __init__(self):
        self.frames, self.facts, self.projs, self.nears, self.grids, self.fps = [], [], [], [], [], []
        self.spectra, self.schur_forms, self.losses = {}, {}, {}

    def add(self, a: dict, tname: str, cn: str, hidden: int, seed: int, alpha: float) -> None:
        """Add `analyse_model`'s result `a` of one model."""
        df, sb, key = a["ablation"], a["blocks"], a["key"]
        for col, v in (("converged", key["converged"]), ("seed", seed), ("hidden", hidden), ("construction", cn),
                       ("task", tname)):
            df.insert(0, col, v)
        self.frames.append(df)
        cell = {"task": tname, "construction": cn, "hidden": hidden, "seed": seed}
        self.projs.append(a["subspace"].merge(df[df.alpha == alpha][_SUBSPACE_COLUMNS], on="subset"))
        self.facts.append({**cell, "fvu": key["fvu"], "replay_acc": key["replay_acc"], "converged": key["converged"],
                           "N_over_T": float(sb.N.norm() / sb.T.norm()), "n_R": sb.n_R, "rho": sb.rho,
                           "n_near_cut": int(sb.near_cut.sum())})
        self.spectra.setdefault((tname, cn, hidden), []).append((sb.eigvals.numpy(), sb.rho))
        keys = {**cell, "converged": key["converged"]}
        self.nears.append(a["near_cut"].assign(**keys))
        if a["fixed_points"] is not None:
            self.fps.append(cell | a["fixed_points"])
        self.facts[-1]["n_near_cut_rel"] = len(a["near_cut"])
        if a["alpha_grid"] is not None:
            self.grids.append(a["alpha_grid"].assign(**keys))
        self.schur_forms.setdefault(f"{tname} / {cn}, H = {hidden}, seed {seed}", (sb.T.numpy(), sb.n_R))


def tanh_study(settings: SchurSettings, checkpoint_dir: str, progress: Progress = False,
               log: Callable[[str], None] | None = None) -> SchurStudy:
    """Train (or reload) and analyse every tanh RNN of `settings`; the tables of `SchurStudy`.

    Args:
        settings: the study's settings (family "tanh").
        checkpoint_dir: one checkpoint per model, reused when complete and of these settings.
        progress: the training's progress; log: called with one line per task after its training.

    Raises:
        CheckpointError: a damaged checkpoint file.
    """
    from symfast.schur.ablation import summarize
    from symfast.schur.paper import PAPER_SEEDS, apply_replicates, compare_replicates, compare_with_paper
    from symfast.schur.rnn import make_task
    from symfast.schur.subspace import damage_predictors
    from symfast.schur.targets import compare_at_paper_targets

    s = settings
    cfg_of, cons_of, hid_of = s.train_configs(), s.constructions_of(), s.widths_of()
    copy_task, paper_copy = s.copy_task(), s.is_paper_copy()
    rows = _Rows()
    for tname in s.tasks:
        task = copy_task if tname == "copy" else make_task(tname)
        trained = train_tanh_models(task, [(cn, h) for cn in cons_of[tname] for h in hid_of[tname]], range(s.seeds),
                                    {cn: cfg_of[(tname, cn)] for cn in cons_of[tname]}, checkpoint_dir,
                                    progress=progress, log=log)
        for cn in cons_of[tname]:
            for hidden in hid_of[tname]:
                models, rows.losses[f"{tname} / {cn}, H = {hidden}"] = trained[(cn, hidden)]
                for seed, model in enumerate(models):
                    rows.add(analyse_model(model, task, seed, s), tname, cn, hidden, seed, s.alpha)
    raw = pd.concat(rows.frames, ignore_index=True)
    proj = pd.concat(rows.projs, ignore_index=True)
    raw["noop"] = (raw["stabiliser"] == "no-op").astype(float)
    raw["order_dependent"] = raw["order_dependent"].astype(float)
    proj["dfvu_excess"] = proj["dfvu"] - proj["rand_pattern_dfvu_mean"]  # matched size: minus same-pattern random
    study = SchurStudy(settings=s, train_configs=cfg_of, raw=raw, summary=pd.DataFrame(),
                       models=pd.DataFrame(rows.facts), subspace=proj, near_cut=pd.concat(rows.nears, ignore_index=True),
                       alpha_grid=pd.concat(rows.grids, ignore_index=True) if rows.grids else None,
                       fixed_points=pd.DataFrame(rows.fps) if rows.fps else None, spectra=rows.spectra,
                       schur_forms=rows.schur_forms, losses=rows.losses)

    def summarise(table):
        return summarize(table, by=("task", "construction", "hidden", "alpha", "subset"), values=SUMMARY_VALUES)
    used = study.used
    study.summary = summarise(used)
    if used.empty:
        return study
    proj_used = study.used_subspace
    study.predictors = {"all": damage_predictors(proj_used), "by_task": damage_predictors(proj_used, by="task"),
                        "matched": damage_predictors(proj_used, target="dfvu_excess")}
    # The paper's numbers are read on converged models only, also when --include-unconverged keeps the
    # others in the tables (a model that did not train gives no verdict). The trained models, converged
    # or not, let a row without converged models say which it is; a copy variant is not the paper's
    # task, so its rows keep the generic reason.
    conv = study.raw[study.raw.converged]
    summ = study.summary if not s.include_unconverged else (
        summarise(conv) if not conv.empty else pd.DataFrame(columns=["task", "construction", "hidden", "alpha",
                                                                     "subset", "n"]))
    trained = study.models if paper_copy or not (study.models.task == "copy").any() else None
    study.paper_comparison = compare_with_paper(summ if paper_copy else summ[summ.task != "copy"], alpha=0.9,
                                                trained=trained)
    # the same rows on the models as good as the paper's full models (its FVUs; copy replay 1.00), all seeds pooled
    study.paper_targets = compare_at_paper_targets(
        study.paper_comparison, conv if paper_copy else conv[conv.task != "copy"], study.models, summarise, alpha=0.9,
        trained=trained)
    if s.seeds > PAPER_SEEDS and (used.seed >= PAPER_SEEDS).any():
        study.replicates = compare_replicates(used if paper_copy else used[used.task != "copy"], summarise, alpha=0.9)
        # a number the two seed sets read as held in one and missed in the other is not a verdict
        study.paper_comparison = apply_replicates(study.paper_comparison, study.replicates)
    return study
