"""An adaptive training budget: train in rounds until every decision is settled.

The fixed budget trains the same seeds x steps for every (shape, encoding), although most
decisions are settled long before. Here a first round trains `start_seeds` seeds for
`start_steps` steps for every shape; after each round the pooled ensemble is read out and a
shape whose decisions are not all settled gets more evidence: first more steps for the seeds
it has (in `add_steps` increments, up to `steps`: training continues exactly where it stopped,
through `fit_sdf`'s checkpoint), then `add_seeds` more seeds at `steps` (up to `max_seeds`).
Longer training sharpens each field (near-symmetries separate from true ones); more seeds lower
the split-half noise floor (as 1 / sqrt(seeds)).

Settled: broken when the element's Holm-adjusted p-value is <= alpha / 3 (a factor-3 stricter
level would still reject it); observed when it is > 1/2 (and > 3 alpha): the evidence against
the symmetry is weaker than a coin flip's. The observed side is deliberately strict: near-
symmetries (a mirror 2 degrees from a true one) pass small budgets with adjusted p-values of
0.05-0.56 on the calibration grid, while most true symmetries sit above 0.8, so sending
p-values below 1/2 to more training costs little and removes those false positives (measured
on the grid; see the docs' readout-decisions guide).

A p-value settles nothing about a near-symmetry whose asymmetry the budget cannot resolve: a
perturbation of 1-2 % of a shape's radius passes every budget up to 32 seeds with p near 1. With
a `tolerance`, an observed element is settled only once the budget's resolution (the asymmetry
the test rejects with probability >= 1 - alpha; `symfast.readout.decision.resolution`) is at
most the tolerance; an element still above it at the caps is *unresolved*. An element with an
asymmetry of `tolerance` or more is then called observed with probability at most alpha, at
the cost of the seeds the resolution needs (it falls as 1 / sqrt(seeds)).

Compute is counted in model-steps (seeds x steps per shape), which is what training time is
proportional to for a fixed architecture and point count.
"""
from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from dataclasses import dataclass
from functools import partial

import pandas as pd
import torch

from symfast.nn.ensemble import Ensemble
from symfast.readout.readout import Readout, readout
from symfast.readout.checkpoint import checkpoint_subset
from symfast.readout.training import fit_sdf

__all__ = ["AdaptiveResult", "CheckpointedTrainer", "adaptive_readout", "settled", "resolved", "concat"]

log = logging.getLogger("symfast.budget")

# Settled broken: Holm-adjusted p <= alpha / SETTLE; settled observed: p > max(SETTLED_OBSERVED, alpha * SETTLE).
SETTLE = 3.0
SETTLED_OBSERVED = 0.5


@dataclass
class AdaptiveResult:
    """`ensemble` (all trained members), `readout` (of the final pool), `history` (one row per round
    and shape: round, shape, seeds, steps, model_steps, unsettled element names, settled)."""

    ensemble: Ensemble
    readout: Readout
    history: pd.DataFrame

    def model_steps(self) -> int:
        """Training compute: seeds x steps, summed over shapes (at each shape's last round)."""
        return int(self.history.groupby("shape", sort=False)["model_steps"].last().sum())


def settled(table: pd.DataFrame, alpha: float, tolerance: float | None = None) -> pd.Series:
    """Per row: True when the decision is settled (see the module docstring); rows without an exact
    lift are not decided, so they count as settled. With a tolerance, the observed side also needs
    the row's resolution at or below it."""
    p = table["p_adjusted"]
    upper = min(1.0, max(SETTLED_OBSERVED, alpha * SETTLE))
    observed = p > upper
    if tolerance is not None:
        observed &= table["resolution"] <= tolerance
    return (p <= alpha / SETTLE) | observed | ~table["liftable"].astype(bool)


def resolved(table: pd.DataFrame, tolerance: float | None) -> pd.Series:
    """Per row: False for an observed element whose resolution is above `tolerance` (unresolved: the
    budget could not rule out an asymmetry of that size); True otherwise, and everywhere without one."""
    if tolerance is None:
        return pd.Series(True, index=table.index)
    return ~table["observed"].astype(bool) | (table["resolution"] <= tolerance)


def concat(ensembles: list) -> Ensemble:
    """Members of several ensembles with one encoding and architecture, in order (`config["steps"]`
    is None when their step counts differ; then the losses of shorter runs start with NaN, so that
    `losses[-1]` is every member's final loss)."""
    first = ensembles[0]
    if len(ensembles) == 1:
        return first
    for e in ensembles[1:]:
        if e.pe is not first.pe and not (torch.equal(e.pe.frequencies, first.pe.frequencies)
                                         and torch.equal(e.pe.phases, first.pe.phases)):
            raise ValueError("ensembles must share one encoding")
        if [w.shape[1:] for w in e.weights] != [w.shape[1:] for w in first.weights]:
            raise ValueError("ensembles must share one architecture")
    longest = max(e.losses.shape[0] for e in ensembles)
    if all(e.losses.numel() for e in ensembles):  # aligned at the last step: losses[-1] is every final loss
        losses = torch.cat([torch.cat([e.losses.new_full((longest - e.losses.shape[0], len(e)), float("nan")),
                                       e.losses]) for e in ensembles], 1)
    else:
        losses = torch.zeros(0, 0)
    steps = {e.config.get("steps") for e in ensembles}
    config = dict(first.config, seeds=None, steps=steps.pop() if len(steps) == 1 else None,
                  shapes=list(dict.fromkeys(s for e in ensembles for s in e.shapes)))
    return Ensemble(first.pe, [torch.cat(ws) for ws in zip(*(e.weights for e in ensembles))],
                    [torch.cat(bs) for bs in zip(*(e.biases for e in ensembles))], first.activation,
                    [e.member_shape(i) for e in ensembles for i in range(len(e))],  # Shapes keep their groups
                    [sd for e in ensembles for sd in e.seeds],
                    losses, config)


class CheckpointedTrainer:
    """`fit_sdf` with one checkpoint per (shapes, seeds) call in `directory`, so that a later call
    with more steps continues the same models, a call for a subset of a call's shapes continues
    their part of it, and a rerun after an interruption resumes instead of retraining."""

    def __init__(self, directory: str, **fit_kw):
        self.directory, self.fit_kw = directory, dict(fit_kw, progress=fit_kw.get("progress", False))
        self._runs = []  # (shape names, seeds, checkpoint path) of every call so far

    def _path(self, names, seeds, pe) -> str:
        key = f"{pe.name}_{'+'.join(names)}_seeds{seeds[0]}-{seeds[-1]}_{len(seeds)}"
        return os.path.join(self.directory, key.replace(os.sep, "_") + ".ckpt")

    def __call__(self, shapes, pe, seeds, steps, points, **fit_kw):
        names, seeds = [getattr(s, "name", s) for s in shapes], list(seeds)
        path = self._path(names, seeds, pe)
        if not os.path.exists(path):
            for run_names, run_seeds, run_path in self._runs:
                if run_seeds == seeds and set(names) <= set(run_names) and os.path.exists(run_path):
                    checkpoint_subset(run_path, names, path)
                    break
        self._runs.append((names, seeds, path))
        return fit_sdf(shapes, pe, seeds=seeds, steps=steps, points=points, checkpoint=path,
                       **{**self.fit_kw, **fit_kw})


def adaptive_readout(shapes, pe, alpha: float = 0.05, start_seeds: int = 8, add_seeds: int = 4,
                     max_seeds: int = 32, steps: int = 1500, start_steps: int | None = None,
                     add_steps: int | None = None, first_seed: int = 0, points: int = 2048, candidates=None,
                     observable: str = "gram", num_null: int = 64, train=None, directory=None,
                     tolerance: float | None = None, **fit_kw) -> AdaptiveResult:
    """Train and read out in rounds, per shape, until every candidate's decision is settled.

    Args:
        shapes: Shape objects or names.
        pe: the encoding.
        alpha: the decision's family-wise level (see `symfast.readout.decision`).
        start_seeds, add_seeds, max_seeds: seeds in the first round, added per round, cap per shape
            (defaults 8, 4, 32).
        steps: steps per model at the end of growth (the fixed budget's steps).
        start_steps, add_steps: steps in the first round and added per round (default: a third of
            `steps` each); a shape's steps grow to `steps` before it gets more seeds. Pass
            `start_steps=steps` to add seeds only.
        first_seed: the first training seed (seeds first_seed, first_seed + 1, ...).
        points: per model per step, as in `symfast.fit_sdf`.
        candidates, observable, num_null: as in `symfast.readout.readout`.
        train: the trainer, called as train(shapes, pe, seeds=[...], steps=, points=) and returning
            an Ensemble of those models trained for `steps` steps; a call with the same shapes (or
            a subset) and seeds and more steps must continue the earlier models. Default: a
            `CheckpointedTrainer` in `directory` (a temporary one when None, removed at the end;
            give a directory to resume an interrupted run). A replaying stand-in lets a
            measurement take members from a pre-trained pool.
        tolerance: optional; an observed element is settled only when the budget resolves an
            asymmetry of this size (the readout's `resolution` column, relative to the observable's
            norm like `score`); see the module docstring and `resolved`.
        fit_kw: passed to `fit_sdf` by the default trainer (hidden, activation, lr, backend, ...).

    Returns:
        An `AdaptiveResult`; its readout is of the final pool, with sweep=0 (read the ensemble out
        again for sweeps or other observables).
    """
    start_steps = max(1, steps // 3) if start_steps is None else int(start_steps)
    add_steps = max(1, steps // 3) if add_steps is None else int(add_steps)
    if not (0 < start_seeds <= max_seeds and add_seeds > 0):
        raise ValueError(f"need 0 < start_seeds <= max_seeds and add_seeds > 0, got {start_seeds}, "
                         f"{add_seeds}, {max_seeds}")
    if not (0 < start_steps <= steps and add_steps > 0):
        raise ValueError(f"need 0 < start_steps <= steps and add_steps > 0, got {start_steps}, {add_steps}, {steps}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if tolerance is not None and not (isinstance(tolerance, (int, float)) and 0 < tolerance < float("inf")):
        raise ValueError(f"tolerance must be a positive number or None, got {tolerance!r}")
    shapes = list(shapes)
    names = {getattr(s, "name", s): s for s in shapes}
    if len(names) != len(shapes):
        raise ValueError("shape names must be distinct")
    with contextlib.ExitStack() as stack:
        if train is None:
            if directory is None:
                directory = stack.enter_context(tempfile.TemporaryDirectory(prefix="symfast_budget_"))
            os.makedirs(directory, exist_ok=True)
            train = CheckpointedTrainer(directory, **fit_kw)
        return _rounds(names, pe, alpha, start_seeds, add_seeds, max_seeds, steps, start_steps, add_steps,
                       int(first_seed), points, candidates, observable, num_null, train, tolerance)


def _rounds(names, pe, alpha, start_seeds, add_seeds, max_seeds, steps, start_steps, add_steps, first_seed, points,
            candidates, observable, num_null, train, tolerance) -> AdaptiveResult:
    first = list(range(first_seed, first_seed + start_seeds))
    ens = train(list(names.values()), pe, seeds=first, steps=start_steps, points=points)
    parts = {s: [ens.subset(ens.indices(s))] for s in names}
    chunks = {s: [first] for s in names}  # seed lists trained together, per shape
    at = dict.fromkeys(names, start_steps)  # steps every member of the shape has now
    history, active, rnd = [], list(names), 0
    read = partial(readout, candidates=candidates, observable=observable, sweep=0, alpha=alpha, num_null=num_null)
    while True:
        r = read(concat([p for s in names for p in parts[s]]))
        ok = settled(r.table, alpha, tolerance)
        grow = []
        for s in active:
            rows = r.table["shape"] == s
            unsettled = " ".join(r.table.loc[rows & ~ok, "element"])
            n = sum(map(len, chunks[s]))
            history.append(dict(round=rnd, shape=s, seeds=n, steps=at[s], model_steps=n * at[s],
                                unsettled=unsettled, settled=not unsettled))
            if unsettled and (at[s] < steps or n < max_seeds):
                grow.append(s)
        if not grow:
            break
        log.info(f"[{pe.name}] round {rnd}: {len(grow)} shape(s) unsettled, training on: "
                 + ", ".join(f"{s} ({'steps' if at[s] < steps else 'seeds'})" for s in grow))
        more_seeds = {}  # new seeds -> shapes getting them (trained together)
        for s in grow:
            n = sum(map(len, chunks[s]))
            if at[s] < steps:  # longer training first: continue every seed the shape has
                at[s] = min(steps, at[s] + add_steps)
                parts[s] = [train([names[s]], pe, seeds=c, steps=at[s], points=points) for c in chunks[s]]
            else:
                k = first_seed + n
                more_seeds.setdefault(tuple(range(k, k + min(add_seeds, max_seeds - n))), []).append(s)
        for new, group in more_seeds.items():
            ens = train([names[s] for s in group], pe, seeds=list(new), steps=steps, points=points)
            for s in group:
                chunks[s].append(list(new))
                parts[s].append(ens.subset(ens.indices(s)))
        active, rnd = grow, rnd + 1
    return AdaptiveResult(concat([p for s in names for p in parts[s]]), r, pd.DataFrame(history))
