"""Symmetry readout: which candidate elements are observed in trained weights.

For each (shape, encoding, observable) the readout reports three sets
(Chiba, Sugiyama, Uranishi, arXiv 2607.03108, Prop. 1): G_true (the shape's declared group),
G_lift (elements the encoding lifts exactly) and G_obs (elements whose score
is within the measured noise floor), and flags violations of
G_obs ⊆ G_lift ∩ G_true.

Threshold: an element is observed when its score is at most the largest of
`num_null` null scores (split halves of the seed ensemble, see
`symfast.readout.observables.split_half_null`): the score that seed noise alone
produces for that element. No hand-tuned constant; it needs >= 2 models per
shape. Only exactly liftable elements can be observed; non-liftable ones
(e.g. a rotation sweep) get the best orthogonal least-squares lift (Procrustes)
and report its relative residual next to the score.
"""
from __future__ import annotations

import hashlib
import math
import warnings

import numpy as np
import pandas as pd
import torch

from symfast.readout.ensemble import Ensemble
from symfast.readout.groups import Group, as_element, dihedral, rotation_sweep, union
from symfast.readout.observables import extend_lift, observable, pair_null, scores, split_half_null
from symfast.readout.shapes import by_name

__all__ = ["readout", "Readout", "default_candidates"]

# Rounding slack for exactly symmetric weights, whose score and null are both ~1e-16.
_ATOL = 1e-9


def default_candidates() -> Group:
    """D4 ∪ D6: the 16 elements that separate the paper's encodings (D4 vs D6 lifts)."""
    return union([dihedral(4), dihedral(6)], name="D4+D6")


class Readout:
    """Result of `symfast.readout.readout`: `.table` (one row per shape, pe, observable, element),
    `.sweep` (rotation-sweep rows), `.observed(shape)`, `.violations`, plots."""

    def __init__(self, table: pd.DataFrame, sweep: pd.DataFrame):
        self.table = table
        self.sweep = sweep

    def observed(self, shape, pe: str | None = None, observable: str | None = None) -> Group:
        """G_obs for a shape (object or name); pe/observable select when several were read."""
        name = getattr(shape, "name", shape)
        t = self.table[self.table["shape"] == name]
        if t.empty:
            raise ValueError(f"shape {name!r} is not in this readout; have {sorted(self.table['shape'].unique())}")
        for col, val in (("pe", pe), ("observable", observable)):
            if val is not None:
                t = t[t[col] == val]
            elif t[col].nunique() > 1:
                raise ValueError(f"this readout has several values of {col!r}: {sorted(t[col].unique())}; pass {col}=")
        return Group([as_element(e) for e in t.loc[t["observed"], "element"]], name=f"G_obs({name})")

    @property
    def violations(self) -> pd.DataFrame:
        """Rows observed but not in G_lift ∩ G_true (the hierarchy says there should be none)."""
        t = self.table
        return t[t["observed"] & ~(t["liftable"] & t["true_symmetry"])]

    def summary(self) -> pd.DataFrame:
        """One row per (shape, pe, observable): the three sets by element names."""
        rows = []
        for key, t in self.table.groupby(["shape", "pe", "observable"], sort=False):
            rows.append(dict(zip(["shape", "pe", "observable"], key),
                             G_obs=" ".join(t.loc[t["observed"], "element"]),
                             G_lift_and_true=" ".join(t.loc[t["liftable"] & t["true_symmetry"], "element"]),
                             violations=int((t["observed"] & ~(t["liftable"] & t["true_symmetry"])).sum())))
        return pd.DataFrame(rows)

    def plot_heatmap(self, path=None):
        """Scores as shapes x elements per encoding; observed cells marked 'o', non-liftable 'x'."""
        from symfast.readout.plots import heatmap

        return heatmap(self.table, path)

    def plot_sweep(self, path=None):
        """Score and lift residual against rotation angle, per encoding."""
        from symfast.readout.plots import sweep_curves

        return sweep_curves(self.sweep, path)


def readout(ensembles, candidates=None, observable: str = "gram", aggregate: str = "ensemble",
            sweep: int = 360, num_null: int = 64, seed: int = 0) -> Readout:
    """Read which candidate symmetries the trained weights show.

    Args:
        ensembles: an `Ensemble` or a list of them (e.g. one per encoding).
        candidates: group elements to test (default D4 ∪ D6).
        observable: "gram", "gram_bias" or "prefixK" (see `symfast.readout.observables`).
        aggregate: "ensemble" (score of the seed-mean observable; measured to be what
            separates true from false symmetries) or "model" (mean of per-model scores).
        sweep: number of rotations in the sweep (0 to skip), scored with least-squares lifts.
        num_null: null draws for the noise floor.
        seed: seed of the null's random splits.

    Returns:
        A `Readout`.
    """
    if isinstance(ensembles, Ensemble):
        ensembles = [ensembles]
    if aggregate not in ("ensemble", "model"):
        raise ValueError(f"aggregate must be 'ensemble' or 'model', got {aggregate!r}")
    if int(num_null) != num_null or num_null < 1:
        raise ValueError(f"num_null must be a positive integer, got {num_null}")
    observable_probe = ensembles[0] if ensembles else None
    if observable_probe is None:
        raise ValueError("need at least one ensemble")
    observable_fn(observable_probe.subset([0]), observable)  # fail fast on an unknown observable
    cands = default_candidates() if candidates is None else Group(candidates, getattr(candidates, "name", ""))
    gen = torch.Generator().manual_seed(seed)
    rows, sweep_rows = [], []
    for ens in ensembles:
        for layer in ens.weights + ens.biases:
            if not torch.isfinite(layer).all():
                raise ValueError("ensemble weights contain NaN or Inf")
        lifts = _lifts(ens.pe, list(cands), observable)
        sweep_lifts = _lifts(ens.pe, list(rotation_sweep(sweep)), observable) if sweep else None
        phi_all = observable_fn(ens, observable)
        for shape_name in dict.fromkeys(ens.shapes):
            phi = phi_all[ens.indices(shape_name)]
            group = by_name(shape_name).group if _known(shape_name) else None
            rows += _rows(phi, lifts, aggregate, num_null, gen, shape_name, ens.pe.name, observable, group)
            if sweep_lifts is not None:
                for r in _rows(phi, sweep_lifts, aggregate, 0, gen, shape_name, ens.pe.name, observable, group):
                    sweep_rows.append({k: r[k] for k in ("shape", "pe", "observable", "element", "angle_deg",
                                                         "liftable", "lift_residual", "true_symmetry", "score")})
    return Readout(pd.DataFrame(rows), pd.DataFrame(sweep_rows))


def observable_fn(ens: Ensemble, kind: str) -> torch.Tensor:
    return observable(ens.weights, ens.biases, kind)


def _known(name: str) -> bool:
    try:
        by_name(name)
        return True
    except ValueError:
        return False


_LIFT_CACHE: dict = {}


def _lifts(pe, elements, kind):
    """(element, rho [d', d'] float64 tensor, exact?, residual) for each element.

    Lifts depend only on the encoding's frequencies/phases and the element; they are cached
    (sweeps read out thousands of models with the same few encodings)."""
    pe_key = hashlib.sha1(pe.frequencies.numpy().tobytes() + pe.phases.numpy().tobytes()).hexdigest()
    out = []
    for g in elements:
        key = (pe_key, g.kind, round(g.angle, 12))
        if key not in _LIFT_CACHE:
            rho = pe.lift(g)
            if rho is not None:
                _LIFT_CACHE[key] = (torch.as_tensor(rho), True, 0.0)
            else:
                rho, res = pe.lift_lstsq(g, orthogonal=True)
                _LIFT_CACHE[key] = (torch.as_tensor(rho), False, res)
        rho, exact, res = _LIFT_CACHE[key]
        out.append((g, torch.as_tensor(extend_lift(rho.numpy(), kind)), exact, res))
    return out


def _rows(phi, lifts, aggregate, num_null, gen, shape, pe_name, obs, group):
    S = phi.shape[0]
    rho = torch.stack([r for _, r, _, _ in lifts])
    if aggregate == "ensemble":
        score = scores(phi.mean(0, keepdim=True), rho)[0]
        spread = torch.full_like(score, float("nan"))
    else:
        per_model = scores(phi, rho)
        score, spread = per_model.mean(0), per_model.std(0) if S > 1 else torch.full((len(lifts),), float("nan"))
    if num_null and S >= 2:
        null = (split_half_null if aggregate == "ensemble" else pair_null)(phi, rho, num_null, gen)
        floor, thresh = null.median(0).values, null.max(0).values
    else:
        if num_null:
            warnings.warn(f"{shape}/{pe_name}: one model only; no noise floor, nothing is marked observed")
        floor = thresh = torch.full((len(lifts),), float("nan"))
    rows = []
    for i, (g, _, exact, res) in enumerate(lifts):
        s, th = float(score[i]), float(thresh[i])
        rows.append(dict(shape=shape, pe=pe_name, observable=obs, aggregate=aggregate, element=g.name,
                         kind=g.kind, angle_deg=math.degrees(g.angle), liftable=exact, lift_residual=res,
                         true_symmetry=(g in group) if group is not None else np.nan, score=s,
                         score_std=float(spread[i]), noise_floor=float(floor[i]), threshold=th,
                         observed=bool(exact and not math.isnan(th) and s <= th + _ATOL), n_models=S))
    return rows
