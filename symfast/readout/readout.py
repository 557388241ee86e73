"""Symmetry readout: which candidate elements are observed in trained weights.

For each (shape, encoding, observable) the readout reports three sets
(Chiba, Sugiyama, Uranishi, arXiv 2607.03108, Prop. 1): G_true (the shape's declared group),
G_lift (elements the encoding lifts exactly) and G_obs (elements whose score
is within the measured noise floor), and flags violations of
G_obs ⊆ G_lift ∩ G_true. Fields on R^2 are read over elements of O(2) (default candidates
D4 ∪ D6), fields on R^3 over elements of O(3) (`symfast.groups.o3`; default O_h ∪ I_h).

Some liftable non-symmetries cannot be told apart by any observable of this kind: when every
symmetric Phi invariant under the lifts of G_lift ∩ G_true is also invariant under rho(g), the
seed-mean observable is g-invariant too. The column `implied` marks them (`implied_by`; e.g. the
dyadic 3D encoding and the tetrahedron: every T_d-invariant Gram is O_h-invariant).

Decision: a test per element of H0 "g leaves the expected observable invariant"
against the split-half seed-noise null (`symfast.readout.observables.split_half_null`),
with Holm control over the candidate family at `alpha` (`symfast.readout.decision`);
an element is observed when H0 is not rejected. It needs >= 2 models per shape.

Every candidate is scored under its best orthogonal lift: the exact lift where the
encoding has one, else the orthogonal least-squares (Procrustes) lift, whose relative
residual is reported next to the score. `observed` tests the exactly liftable
candidates only; `approx_observed` applies the same rule to all candidates, so a true
symmetry the encoding cannot lift shows whether it stays hidden even under its best lift.
"""
from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import pandas as pd
import torch

from symfast._progress import Progress, reporter
from symfast.readout.decision import ATOL as _ATOL
from symfast.readout.decision import budget_shortfall, decide, pairings, split_halves
from symfast.nn.ensemble import Ensemble
from symfast.groups import Group, dihedral, rotation_sweep, union
from symfast.readout.result import Readout
from symfast.readout.observables import extend_lift, observable, pair_null, scores, split_half_null

__all__ = ["readout", "Readout", "default_candidates"]

@functools.lru_cache(maxsize=None)  # immutable, and the 3D union costs ~10^4 element comparisons
def default_candidates(dim: int = 2) -> Group:
    """The default candidate elements for fields on R^dim.

    2D: D4 ∪ D6, the 16 elements that separate the paper's encodings (D4 vs D6 lifts).
    3D: O_h ∪ I_h (48 + 120 - 24 = 144 elements; O_h ∩ I_h = T_h in the library's orientation):
    the cube's and the icosahedron's groups, which contain the groups of the five Platonic solids
    and the lift sets of the axis encodings (dyadic3 and cube4 lift O_h, ico6 lifts I_h), so every
    hidden and every liftable non-symmetry of the 3D study is among them.
    """
    if dim == 2:
        return union([dihedral(4), dihedral(6)], name="D4+D6")
    if dim == 3:
        from symfast.groups import o3

        return union([o3.octahedral(), o3.icosahedral()], name="Oh+Ih")
    raise ValueError(f"dim must be 2 or 3, got {dim!r}")


def _sweep_group(num: int, dim: int, axis) -> Group:
    """`num` rotations evenly spaced over [0, 2 pi): about the origin (2D) or about `axis` (3D)."""
    if dim == 2:
        return rotation_sweep(num)
    from symfast.groups import o3

    return o3.rotation_sweep(axis, num)


def _angle_deg(g) -> float:
    """The rotation angle (2D: the element's angle; 3D: the angle of g, or of -g when g is improper)."""
    if hasattr(g, "angle") and np.shape(g.matrix) == (2, 2):
        return math.degrees(g.angle)
    m = np.asarray(g.matrix, dtype=np.float64)
    m = m if np.linalg.det(m) > 0 else -m
    return math.degrees(math.acos(min(1.0, max(-1.0, (np.trace(m) - 1) / 2))))


def readout(ensembles, candidates=None, observable="gram", aggregate: str = "ensemble",
            sweep: int = 360, num_null: int = 64, seed: int = 0, alpha: float = 0.05,
            sweep_axis=(0.0, 0.0, 1.0), shapes=None, backend: str = "auto", progress: Progress = False) -> Readout:
    """Read which candidate symmetries the trained weights show.

    Args:
        ensembles: an `Ensemble` or a list of them (e.g. one per encoding); a
            `symfast.nn.FourierMLPEnsemble` that knows its shapes is converted. G_true of each
            member comes from the `Shape` it carries (`Ensemble.true_group`). Your own trained
            models are read too: a list of `nn.Sequential(FourierPE, Linear, act, ..., Linear)`
            (one encoding, one architecture; any pointwise activation) with `shapes=`, converted
            by `Ensemble.from_sequentials` (a list of such lists for several encodings).
        candidates: group elements to test (default `default_candidates(D)` for the encoding's
            input dimension D: D4 ∪ D6 in 2D, O_h ∪ I_h in 3D).
        observable: "gram", "gram_bias", "prefixK" (see `symfast.readout.observables`), a list of
            them, or "prefixes" for prefix Grams K = 1..L side by side.
        aggregate: "ensemble" (score of the seed-mean observable: a single model's Gram
            carries its random initialisation, the seed mean separates true from false symmetries) or
            "model" (mean of the models' own scores, tested against the pair null of disjoint model
            pairs). Either needs at least `MIN_MODELS_PER_SHAPE` = 3 models per shape: one or two
            models give no seed-noise null, and `readout` warns that nothing was decided. "model" is not
            calibrated to alpha at any per-model budget measured; `readout` warns with the measured
            rates (per budget and cell in the readout-decisions guide).
        sweep: number of rotations in the sweep (0 to skip), scored with least-squares lifts.
        sweep_axis: the rotation axis of the sweep for 3D fields (ignored in 2D).
        num_null: null draws for the noise floor.
        seed: seed of the null's random splits.
        shapes: one Shape (or shape name) per model, for models that do not carry theirs
            (nn.Sequential lists, or a FourierMLPEnsemble built without shapes=).
        alpha: family-wise rate, per (shape, encoding, observable), of calling a true symmetry
            broken (Holm over the candidates; `symfast.readout.decision`).
        backend: of the Gram-score kernels ("auto", "cpu", "triton", "reference"; see
            `symfast.ops.gram_scores`).
        progress: False (default), True (a tqdm bar over the (encoding, observable, shape) cells) or
            a callable given a line about every tenth of them (`symfast._progress`).

    Returns:
        A `Readout`.
    """
    ensembles = _coerce_inputs(ensembles, shapes)
    if aggregate not in ("ensemble", "model"):
        raise ValueError(f"aggregate must be 'ensemble' or 'model', got {aggregate!r}")
    if int(num_null) != num_null or num_null < 1:
        raise ValueError(f"num_null must be a positive integer, got {num_null}")
    observable_probe = ensembles[0] if ensembles else None
    if observable_probe is None:
        raise ValueError("need at least one ensemble")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if aggregate == "model":
        warnings.warn(MODEL_AGGREGATE_LIMIT, stacklevel=2)
    kinds = _observable_kinds(observable, observable_probe)
    for kind in kinds:
        observable_fn(observable_probe.subset([0]), kind)  # fail fast on an unknown observable
    given = None if candidates is None else Group(candidates, getattr(candidates, "name", ""))
    if given is not None and not given.continuous and len(given) == 0:
        raise ValueError("candidates must hold at least one group element (or None for the default candidates)")
    gen = torch.Generator().manual_seed(seed)
    rows, sweep_rows, elements = [], [], {}
    bar = reporter(progress, "symfast.readout").bar(
        sum(len(kinds) * len(dict.fromkeys(e.shapes)) for e in ensembles), "readout", unit="cell")
    for ens in ensembles:
        for layer in ens.weights + ens.biases:
            if not torch.isfinite(layer).all():
                raise ValueError("ensemble weights contain NaN or Inf")
        _warn_small_budget(ens)
        dim = ens.pe.input_dim
        cands = default_candidates(dim) if given is None else given
        swept = list(_sweep_group(sweep, dim, sweep_axis)) if sweep else []
        elements.update((g.name, g) for g in cands)
        for kind in kinds:
            lifts = element_lifts(ens.pe, list(cands), kind)
            sweep_lifts = element_lifts(ens.pe, swept, kind) if sweep else None
            phi_all = observable_fn(ens, kind)
            for shape_name in dict.fromkeys(ens.shapes):
                phi = phi_all[ens.indices(shape_name)]
                group = ens.true_group(shape_name, cands)
                rows += _rows(phi, lifts, aggregate, num_null, gen, shape_name, ens.pe.name, kind, group, alpha,
                              backend)
                bar.update()
                if sweep_lifts is not None:
                    sweep_group = ens.true_group(shape_name, [g for g, *_ in sweep_lifts])
                    rho = torch.stack([r for _, r, _, _ in sweep_lifts])
                    null = _sweep_null(phi, rho, _SWEEP_NULL_DRAWS, gen, backend)
                    for i, (r, nl) in enumerate(zip(_rows(phi, sweep_lifts, aggregate, 0, gen, shape_name, ens.pe.name,
                                                          kind, sweep_group, alpha, backend), null.tolist())):
                        row = {k: r[k] for k in ("shape", "pe", "observable", "element", "angle_deg", "liftable",
                                                 "lift_residual", "true_symmetry", "score")}
                        if dim == 3:  # the sweep's own angle about sweep_axis (the rows give it in [0, 180])
                            row["angle_deg"] = 360.0 * i / sweep
                        sweep_rows.append(dict(row, score_null=nl,  # identity: 0 / 0, undefined
                                               score_norm=r["score"] / nl if nl > _ATOL else np.nan))
    bar.close()
    return Readout(pd.DataFrame(rows), pd.DataFrame(sweep_rows), elements)


def _coerce_inputs(ensembles, shapes) -> list[Ensemble]:
    """The readout's input as a list of Ensembles: one Ensemble / module / Sequential list, or a list of them."""
    if isinstance(ensembles, torch.nn.Sequential) or (
            isinstance(ensembles, (list, tuple)) and ensembles
            and all(isinstance(m, torch.nn.Sequential) for m in ensembles)):
        return [Ensemble.coerce(ensembles, shapes)]  # one collection of the user's models
    if not isinstance(ensembles, (list, tuple)):
        ensembles = [ensembles]
    if shapes is not None and len(ensembles) > 1:
        raise ValueError("shapes= names the models of one collection; with several, convert each with "
                         "symfast.Ensemble.from_sequentials(models, shapes) (or Ensemble.from_module)")
    return [Ensemble.coerce(e, shapes) for e in ensembles]


def _warn_small_budget(ens: Ensemble) -> None:
    """Warn when an ensemble's seeds per shape or training steps (`ens.config["steps"]`) are below the
    budgets at which the decision rule's error rates were measured (`decision.CALIBRATED_SEEDS`,
    `CALIBRATED_STEPS`): e.g. 4 seeds x 30 steps of the triangle under DyadicAxisPE observe all of D4."""
    seeds = min((len(ens.indices(s)) for s in dict.fromkeys(ens.shapes)), default=None)
    steps = ens.config.get("steps") if isinstance(ens.config, dict) else None
    short = budget_shortfall(seeds, int(steps) if steps is not None else None)
    if short is not None:
        warnings.warn(f"{ens.pe.name}: budget below the calibrated range ({short[1]}); the readout's false-positive "
                      "and false-negative rates are unknown here and observed sets may include false symmetries",
                      stacklevel=3)


# The null needs 2 distinct draws (n_eff in `_rows`): with 2 models every split-half (or pair)
# difference is the same one up to sign, so no p-value exists and nothing is observed, not even
# the identity. The command line refuses fewer; `readout` warns.
MIN_MODELS_PER_SHAPE = 3

# The measured limit of aggregate="model" (benchmarks/calibration_default_budget.py --aggregate model).
MODEL_AGGREGATE_LIMIT = (
    "aggregate='model' is not calibrated: with 4 models per (shape, encoding) it reported 79-96% of the false "
    "liftable elements as observed at every per-model budget measured (300-3000 steps x 1024 points, 300 x 4096), "
    "with no true symmetry missed; no per-model budget met alpha = 0.05 for false positives. Use the seed "
    "ensemble (aggregate='ensemble', from 8 seeds x 300 steps) for a decision with stated error rates")


# Haar conjugates per shape for the sweep's spectrum-matched null (its mean is stable to ~1%).
_SWEEP_NULL_DRAWS = 8


def _observable_kinds(observable, ens: Ensemble) -> list[str]:
    """The observable argument as a list of kinds ("prefixes" -> prefix1..prefixL)."""
    if isinstance(observable, str):
        if observable == "prefixes":
            return [f"prefix{k}" for k in range(1, len(ens.weights) + 1)]
        return [observable]
    kinds = list(observable)
    if not kinds or not all(isinstance(k, str) for k in kinds):
        raise ValueError(f"observable must be a name or a non-empty list of names, got {observable!r}")
    return kinds


def observable_fn(ens: Ensemble, kind: str) -> torch.Tensor:
    return observable(ens.weights, ens.biases, kind)


def element_lifts(pe, elements, kind):
    """(element, rho [d', d'] float64 tensor, exact?, residual) for each element, from the
    encoding's bounded lift cache (`FourierPE.best_lift`)."""
    out = []
    for g in elements:
        rho, exact, res = pe.best_lift(g)
        out.append((g, torch.tensor(extend_lift(rho, kind)), exact, res))  # a copy: the cached lift is read-only
    return out


def implied_by(rho: torch.Tensor, members: np.ndarray, seed: int = 0) -> np.ndarray:
    """Which lifts fix every symmetric matrix that the lifts of a group H fix.

    Gram-type observables are symmetric matrices transforming as Phi -> rho^T Phi rho, so when
    every H-invariant Phi is also invariant under rho(g), no such observable can tell g from H:
    the seed-mean observable of a field with symmetry group H is then g-invariant as well, and the
    test of H0(g) correctly does not reject it. (Example: under the dyadic 3D encoding every Gram
    invariant under the tetrahedron's T_d is invariant under all of O_h.) Computed exactly on a
    generic invariant: the Reynolds average of a random symmetric matrix over H.

    Args:
        rho: [E, d, d] lifts; members: [E] bool mask of H's elements (a group under composition).

    Returns:
        [E] bool; all False when H is empty, or when its lifts do not form a group (their average
        is then not H-invariant).
    """
    out = np.zeros(len(members), dtype=bool)
    if not members.any():
        return out
    d = rho.shape[-1]
    a = torch.randn(d, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    h = rho[torch.as_tensor(members)].to(torch.float64)
    generic = (h.transpose(1, 2) @ (a + a.T) @ h).mean(0)
    s = scores(generic[None], rho.to(torch.float64))[0].numpy()
    if s[members].max() > _IMPLIED_TOL:  # not closed: no H-invariant average to compare with
        return out
    return s <= _IMPLIED_TOL


# Score of an exact invariant under an exact lift: rounding only.
_IMPLIED_TOL = 1e-9
# An entry of a lift above this is a nonzero (exact lifts have entries 0, +-1 or cos/sin values).
_PERMUTATION_TOL = 1e-12


def _rows(phi, lifts, aggregate, num_null, gen, shape, pe_name, obs, group, alpha, backend="auto"):
    S = phi.shape[0]
    rho = torch.stack([r for _, r, _, _ in lifts])
    if aggregate == "ensemble":
        score = scores(phi.mean(0, keepdim=True), rho, backend)[0]
        spread = torch.full_like(score, float("nan"))
    else:
        per_model = scores(phi, rho, backend)
        score, spread = per_model.mean(0), per_model.std(0) if S > 1 else torch.full((len(lifts),), float("nan"))
    score = score.numpy()
    nan = np.full(len(lifts), np.nan)
    exact = np.array([e for _, _, e, _ in lifts], dtype=bool)
    # Adam's per-coordinate scaling and the uniform init respect only signed-permutation lifts
    permutation = exact & ((rho.abs() > _PERMUTATION_TOL).sum(-1) == 1).all(-1).numpy()
    true = np.array([group is not None and g in group for g, _, _, _ in lifts], dtype=bool)
    implied = implied_by(rho, exact & true) & exact & ~true if group is not None else np.zeros(len(lifts), bool)
    # distinct null draws: split halves (3 for S = 4, 35 for 8) or sets of disjoint pairs (3 for 4, 105 for 8)
    n_eff = split_halves(S) if aggregate == "ensemble" else pairings(S)
    if num_null and S >= 2 and n_eff >= 2:
        null = (split_half_null if aggregate == "ensemble" else pair_null)(phi, rho, num_null, gen, backend).numpy()
        floor = np.median(null, 0)
        dec = decide(score, null, alpha, family=exact, n_eff=n_eff)  # G_obs: exactly liftable candidates
        approx = decide(score, null, alpha, n_eff=n_eff)  # same rule, every candidate under its best lift
    else:
        if num_null:
            warnings.warn(f"{shape}/{pe_name}: {S} model(s) give no usable noise floor; nothing is marked observed")
        floor = nan
        dec = approx = {k: nan for k in ("p_value", "p_adjusted", "z", "threshold", "margin", "resolution")}
        dec["observed"] = approx["observed"] = np.zeros(len(lifts), dtype=bool)
    rows = []
    for i, (g, _, ex, res) in enumerate(lifts):
        rows.append(dict(shape=shape, pe=pe_name, observable=obs, aggregate=aggregate, element=g.name,
                         kind=g.kind, angle_deg=_angle_deg(g), liftable=ex, lift_residual=res,
                         lift_permutation=bool(permutation[i]),
                         true_symmetry=bool(true[i]) if group is not None else np.nan,
                         implied=bool(implied[i]), score=float(score[i]),
                         score_std=float(spread[i]), noise_floor=float(floor[i]), z=float(approx["z"][i]),
                         p_value=float(approx["p_value"][i]), p_adjusted=float(dec["p_adjusted"][i]),
                         threshold=float(dec["threshold"][i]), margin=float(dec["margin"][i]),
                         resolution=float(dec["resolution"][i]),
                         observed=bool(dec["observed"][i]), p_adjusted_all=float(approx["p_adjusted"][i]),
                         approx_observed=bool(approx["observed"][i]), alpha=alpha, n_models=S))
    return rows


def _sweep_null(phi, rho, num_draws, gen, backend="auto"):
    """Spectrum-matched null of the sweep: scores [E] of the lifts on Q^T Phi_bar Q, Q Haar-orthogonal.

    A conjugate by a random orthogonal Q keeps the seed-mean observable's spectrum and removes
    its symmetries, so its score under rho(theta) is what the lift alone (its distance from the
    identity and its residual) produces; score / null near 1 means no symmetry, a dip means one."""
    mean = phi.mean(0)
    d = mean.shape[0]
    qs, _ = torch.linalg.qr(torch.randn(num_draws, d, d, generator=gen, dtype=mean.dtype))
    conj = qs.transpose(-1, -2) @ mean @ qs
    return scores(conj, rho, backend).mean(0)
