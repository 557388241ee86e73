"""Measured error rates of the readout's decision on a grid with known truth.

A calibration grid is a list of shapes (with their true groups) and encodings; each
(budget, encoding) trains one ensemble over all shapes with `symfast.fit_sdf`, reads it
out, and scores every exactly liftable candidate against the truth:

- false positive: a liftable element that is not a true symmetry, reported observed;
- false negative: a liftable true symmetry not reported observed.

`rates` aggregates per budget: FPR and FNR over elements, and family-wise rates (the
fraction of (shape, encoding) cells with at least one error of each kind; alpha bounds
the family-wise false-negative rate when the null is right).
"""
from __future__ import annotations

import contextlib
import math
import os
import tempfile
import time
import warnings

import numpy as np
import pandas as pd

from symfast import shapes as shp
from symfast._progress import Progress
from symfast.nn.ensemble import Ensemble
from symfast.nn.encodings import DyadicAxisPE, MultiAxisPE, RandomFourierPE, TriAxisPE
from symfast.groups import Group, as_element, dihedral, union
from symfast.readout.readout import readout
from symfast.readout.training import as_seeds, fit_sdf

__all__ = ["grid_shapes", "grid_encodings", "candidates_for", "score_table", "run", "rates", "first_seeds",
           "replay_trainer", "score_pool", "train_snapshots", "model_separation"]

# The irregular quadrilateral has no symmetry but the identity.
_IRREGULAR = [[0.55, 0.05], [0.1, 0.5], [-0.5, 0.2], [-0.2, -0.45]]


def grid_shapes() -> list:
    """Regular, rotated, rectangular and irregular shapes with declared groups."""
    return [shp.triangle(), shp.square(), shp.pentagon(), shp.hexagon(), shp.rectangle(),
            shp.regular_polygon(3, rotation=math.radians(20), name="triangle_rot20"),
            shp.polygon(_IRREGULAR, name="irregular")]


def grid_encodings() -> list:
    """Axis encodings with 2, 3, 4 and 5 axes (lifts D4, D6, D8, D10) and random features."""
    return [DyadicAxisPE(), TriAxisPE(), MultiAxisPE(4, K=6), MultiAxisPE(5, K=5), RandomFourierPE()]


def candidates_for(shapes) -> Group:
    """D4 ∪ D6 ∪ D8 ∪ D10 ∪ the shapes' own (finite) groups: every encoding's lifts and every truth."""
    own = [s.group for s in shapes if not getattr(s.group, "continuous", False)]
    return union([dihedral(4), dihedral(6), dihedral(8), dihedral(10), *own], name="calibration")


def score_table(table: pd.DataFrame, shapes) -> pd.DataFrame:
    """Readout rows with truth from the Shape objects: adds `truth` and `error` ("FP", "FN", "")."""
    groups = {s.name: s.group for s in shapes}
    t = table[table["liftable"].astype(bool)].copy()
    t["truth"] = [as_element(e) in groups[s] for s, e in zip(t["shape"], t["element"])]
    t["error"] = np.where(t["observed"] & ~t["truth"], "FP", np.where(~t["observed"] & t["truth"], "FN", ""))
    return t


def run(budgets, shapes=None, encodings=None, points: int = 2048, alpha: float = 0.05, seed_offset: int = 0,
        progress: Progress = False) -> pd.DataFrame:
    """Train and read out every (budget, encoding) on the grid.

    Args:
        budgets: list of (seeds, steps).
        shapes, encodings: the grid (default `grid_shapes()`, `grid_encodings()`).
        points: points per model per step.
        alpha: the decision's family-wise level.
        seed_offset: first training seed (fresh seeds give an independent replicate).
        progress: passed to each `fit_sdf` (False, True or a callable).

    Returns:
        One row per (budget, encoding, shape, liftable candidate) with the readout columns,
        `truth`, `error`, `seeds`, `steps`, `points` and `train_s` (the encoding's training time).
    """
    shapes = grid_shapes() if shapes is None else list(shapes)
    encodings = grid_encodings() if encodings is None else list(encodings)
    cands = candidates_for(shapes)
    out = []
    for seeds, steps in budgets:
        for pe in encodings:
            t0 = time.perf_counter()
            ens = fit_sdf(shapes, pe, seeds=list(range(seed_offset, seed_offset + seeds)), steps=steps,
                          points=points, progress=progress)
            train_s = time.perf_counter() - t0
            t = score_table(readout(ens, candidates=cands, sweep=0, alpha=alpha).table, shapes)
            out.append(t.assign(seeds=seeds, steps=steps, points=points, train_s=train_s))
    return pd.concat(out, ignore_index=True)


def rates(scored: pd.DataFrame, by=("seeds", "steps", "points")) -> pd.DataFrame:
    """FPR, FNR (per element) and family-wise FP/FN rates (per shape x encoding cell) per budget."""
    by = list(by)
    rows = []
    for key, t in scored.groupby(by, sort=False):
        cells = t.groupby(["pe", "shape"])
        fp = t["error"] == "FP"
        fn = t["error"] == "FN"
        rows.append(dict(zip(by, key if isinstance(key, tuple) else (key,)),
                         FPR=fp.sum() / max(1, (~t["truth"]).sum()), FNR=fn.sum() / max(1, t["truth"].sum()),
                         cells_with_FP=cells.apply(lambda c: (c["error"] == "FP").any()).mean(),
                         cells_with_FN=cells.apply(lambda c: (c["error"] == "FN").any()).mean(),
                         n_false=int((~t["truth"]).sum()), n_true=int(t["truth"].sum()),
                         n_cells=cells.ngroups))
    return pd.DataFrame(rows)


def model_separation(pool, shapes, observable: str = "gram") -> pd.DataFrame:
    """How well each model's *own* scores separate true from false symmetries, with no null at all.

    Per model with at least one liftable true symmetry besides the identity and one liftable false
    element: `auc`, the probability that a true element scores below a false one (1: a per-model
    threshold exists; 0.5: no information), and `separated` (every true element below every false one).
    The identity (score 0 by definition) is left out. Rows: shape, seed, pe, steps, points, auc, separated.
    """
    import torch

    from symfast.readout.decision import ATOL
    from symfast.readout.observables import extend_lift, observable as observable_of, scores

    groups = {s.name: s.group for s in shapes}
    lifted = [(g, pool.pe.lift(g)) for g in candidates_for(shapes)]
    lifted = [(g, r) for g, r in lifted if r is not None and not np.allclose(g.matrix, np.eye(len(g.matrix)))]
    rho = torch.tensor(np.stack([extend_lift(r, observable) for _, r in lifted]))
    s = scores(observable_of(pool.weights, pool.biases, observable), rho).numpy()
    rows = []
    for i, (shape, seed) in enumerate(zip(pool.shapes, pool.seeds)):
        truth = np.array([g in groups[shape] for g, _ in lifted], dtype=bool)
        if truth.all() or not truth.any():
            continue
        t, f = s[i, truth][:, None], s[i, ~truth][None, :]
        tie = np.abs(t - f) <= ATOL  # exactly invariant elements score at rounding level
        rows.append(dict(shape=shape, seed=seed, pe=pool.pe.name, steps=pool.config.get("steps"),
                         points=pool.config.get("points"), auc=float(((t < f) & ~tie).mean() + 0.5 * tie.mean()),
                         separated=bool(t.max() < f.min() - ATOL)))
    return pd.DataFrame(rows)


def first_seeds(ens, n: int):
    """The members of the first n seeds of each shape (training is per model, so these are exactly
    the models an n-seed run would train)."""
    keep = sorted(set(ens.seeds))[:n]
    return ens.subset([i for i, sd in enumerate(ens.seeds) if sd in keep])


def replay_trainer(pool):
    """A `symfast.readout.budget.adaptive_readout` trainer that takes members from a trained pool
    instead of training them (members train independently, so this is what training would return).

    `pool`: an Ensemble, or {steps: Ensemble} of one run read at several step counts (see
    `train_snapshots`) for an adaptive budget that also adds steps."""

    def train(shapes, pe, seeds, steps, points, **_):
        if isinstance(pool, dict):
            if steps not in pool:
                raise ValueError(f"the pool has snapshots at {sorted(pool)} steps, not {steps}")
            return replay_trainer(pool[steps])(shapes, pe, seeds, steps, points)
        names = [getattr(s, "name", s) for s in shapes]
        idx = [i for n in names for sd in seeds for i, (s, d) in enumerate(zip(pool.shapes, pool.seeds))
               if s == n and d == sd]
        if len(idx) != len(names) * len(seeds):
            raise ValueError(f"the pool lacks some of shapes {names} x seeds {list(seeds)}")
        return pool.subset(idx)

    return train


def score_pool(pool, shapes, seed_counts, alpha: float = 0.05, aggregate: str = "ensemble") -> pd.DataFrame:
    """`run`'s output for a trained pool read out at several seed counts (first seeds of each shape),
    with `readout`'s `aggregate` ("ensemble": seed-mean observable; "model": mean per-model score)."""
    cands = candidates_for(shapes)
    steps, points = pool.config.get("steps"), pool.config.get("points")
    out = []
    for n in seed_counts:
        with warnings.catch_warnings():  # below the ensemble's calibrated seeds on purpose; the rates say the rest
            warnings.simplefilter("ignore")
            r = readout(first_seeds(pool, n), candidates=cands, sweep=0, alpha=alpha, aggregate=aggregate)
        out.append(score_table(r.table, shapes).assign(seeds=n, steps=steps, points=points, aggregate=aggregate))
    return pd.concat(out, ignore_index=True)


def train_snapshots(shapes, pe, seeds: int, steps, points: int = 2048, directory=None, **fit_kw) -> dict:
    """One training run read at several step counts: {steps: Ensemble} for increasing `steps`.

    Each count continues the previous one through `fit_sdf`'s checkpoint (constant learning
    rate, per-model point streams), so the ensemble at 500 steps is exactly the first 500 steps
    of the 1500-step run and the whole dict costs one run of max(steps). With `directory`, the
    checkpoint and each snapshot (`<pe>_<steps>.pt`) are kept there and reused by a rerun.
    """
    steps = sorted(int(s) for s in steps)
    want = dict(shapes=[getattr(s, "name", s) for s in shapes], seeds=as_seeds(seeds), points=int(points))
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = stack.enter_context(tempfile.TemporaryDirectory())
        os.makedirs(directory, exist_ok=True)
        out = {}
        for n in steps:
            path = os.path.join(directory, f"{pe.name}_{n}.pt")
            if not os.path.exists(path):
                out[n] = fit_sdf(shapes, pe, seeds=seeds, steps=n, points=points,
                                 checkpoint=os.path.join(directory, f"{pe.name}.ckpt"), **fit_kw)
                out[n].save(path)
                continue
            out[n] = Ensemble.load(path)
            got = {k: out[n].config.get(k) for k in (*want, "steps")}
            if got != dict(want, steps=n):
                raise ValueError(f"{path} holds another run ({got}, asked for {dict(want, steps=n)}); remove it "
                                 f"or use another directory")
    return out
