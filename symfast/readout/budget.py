"""An adaptive training budget: train seeds in rounds until every decision is settled.

The fixed budget trains the same number of seeds for every (shape, encoding), although
most decisions are settled long before. Here each round trains `add_seeds` more seeds
for the shapes whose decisions are not settled yet, reads the pooled ensemble out, and
stops per shape when settled or when `max_seeds` is reached.

Settled: the element's decision is the same at alpha / 3 and at 3 alpha (its Holm-adjusted
p-value is <= alpha / 3 or > 3 alpha), so a factor-3 change of the error rate would not flip
it. Evidence grows with seeds (the split-half noise floor falls as 1 / sqrt(seeds)), so the
thinnest evidence is met by more seeds for exactly the shapes that have unsettled
elements. Steps per model stay fixed: adding steps would need resuming the optimiser,
which `fit_sdf` does not expose between calls.

Compute is counted in model-steps (seeds x steps per shape), which is what training time
is proportional to for a fixed architecture and point count.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import pandas as pd
import torch

from symfast.readout.ensemble import Ensemble
from symfast.readout.readout import Readout, readout
from symfast.readout.training import fit_sdf

__all__ = ["AdaptiveResult", "adaptive_readout", "settled", "concat"]

# A decision is settled when it is the same at alpha / SETTLE and at alpha * SETTLE.
SETTLE = 3.0


@dataclass
class AdaptiveResult:
    """`ensemble` (all trained members), `readout` (of the final pool), `history` (one row per round
    and shape: round, shape, seeds, unsettled element names, settled)."""

    ensemble: Ensemble
    readout: Readout
    history: pd.DataFrame

    def model_steps(self) -> int:
        """Training compute: members x steps."""
        return len(self.ensemble) * int(self.ensemble.config.get("steps", 0))


def settled(table: pd.DataFrame, alpha: float) -> pd.Series:
    """Per liftable row: True when its decision does not flip between alpha / 3 and 3 alpha."""
    p = table["p_adjusted"]
    return (p <= alpha / SETTLE) | (p > min(1.0, alpha * SETTLE)) | ~table["liftable"].astype(bool)


def concat(ensembles: list) -> Ensemble:
    """Members of several ensembles with one encoding, architecture and step count, in order."""
    first = ensembles[0]
    if len(ensembles) == 1:
        return first
    for e in ensembles[1:]:
        if e.pe is not first.pe and not (torch.equal(e.pe.frequencies, first.pe.frequencies)
                                         and torch.equal(e.pe.phases, first.pe.phases)):
            raise ValueError("ensembles must share one encoding")
        if [w.shape[1:] for w in e.weights] != [w.shape[1:] for w in first.weights]:
            raise ValueError("ensembles must share one architecture")
    same_steps = len({e.losses.shape[0] for e in ensembles}) == 1
    losses = torch.cat([e.losses for e in ensembles], 1) if same_steps else torch.zeros(0, 0)
    config = dict(first.config, seeds=None, shapes=list(dict.fromkeys(s for e in ensembles for s in e.shapes)))
    return Ensemble(first.pe, [torch.cat(ws) for ws in zip(*(e.weights for e in ensembles))],
                    [torch.cat(bs) for bs in zip(*(e.biases for e in ensembles))], first.activation,
                    [s for e in ensembles for s in e.shapes], [sd for e in ensembles for sd in e.seeds],
                    losses, config)


def adaptive_readout(shapes, pe, alpha: float = 0.05, start_seeds: int = 8, add_seeds: int = 8,
                     max_seeds: int = 32, steps: int = 1500, points: int = 2048, candidates=None,
                     observable: str = "gram", num_null: int = 64, train=None, **fit_kw) -> AdaptiveResult:
    """Train and read out in rounds, per shape, until every candidate's decision is settled.

    Args:
        shapes: Shape objects or names.
        pe: the encoding.
        alpha: the decision's family-wise level (see `symfast.readout.decision`).
        start_seeds, add_seeds, max_seeds: seeds in the first round, added per round, cap per shape.
        steps, points: per model, as in `symfast.fit_sdf`.
        candidates, observable, num_null: as in `symfast.readout.readout`.
        train: the trainer, called as train(shapes, pe, seeds=[...], steps=, points=, **fit_kw) and
            returning an Ensemble (default `fit_sdf`); a stand-in lets a measurement replay seeds
            from a pre-trained pool.

    Returns:
        An `AdaptiveResult`; its readout is of the final pool, with sweep=0 (read the ensemble out
        again for sweeps or other observables).
    """
    if not (0 < start_seeds <= max_seeds and add_seeds > 0):
        raise ValueError(f"need 0 < start_seeds <= max_seeds and add_seeds > 0, got {start_seeds}, "
                         f"{add_seeds}, {max_seeds}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    train = train or partial(fit_sdf, progress=False)
    shapes = list(shapes)
    names = {getattr(s, "name", s): s for s in shapes}
    if len(names) != len(shapes):
        raise ValueError("shape names must be distinct")
    parts, history = [], []
    active, used, rnd = list(names), 0, 0
    while active:
        n = start_seeds if rnd == 0 else min(add_seeds, max_seeds - used)
        parts.append(train([names[s] for s in active], pe, seeds=list(range(used, used + n)), steps=steps,
                           points=points, **fit_kw))
        used += n
        r = readout(concat(parts), candidates=candidates, observable=observable, sweep=0, alpha=alpha,
                    num_null=num_null)
        ok = settled(r.table, alpha)
        still = []
        for s in active:
            rows = r.table["shape"] == s
            unsettled = " ".join(r.table.loc[rows & ~ok, "element"])
            history.append(dict(round=rnd, shape=s, seeds=used, unsettled=unsettled, settled=not unsettled))
            if unsettled and used < max_seeds:
                still.append(s)
        active, rnd = still, rnd + 1
    ens = concat(parts)
    final = readout(ens, candidates=candidates, observable=observable, sweep=0, alpha=alpha, num_null=num_null)
    return AdaptiveResult(ens, final, pd.DataFrame(history))
