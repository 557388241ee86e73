"""The exactness sweep: does the layer-level error close as end-to-end equivariance becomes exact?

The layerwise theorem ("Identifiable Equivariant Networks are Layerwise Equivariant", Shahverdi,
Marchetti, Bökman, Kohn) is about networks equivariant on all of R^n. The study's classifiers are
trained with an invariance penalty on data only, and the data cannot pin the flip down there (on
digits pixel 0 is always 0, its mirror pixel 7 is not). Here the penalty weight `lam` is swept and
the penalty is applied on inputs that cover the space: the data batch (its flip is the other half of
each pair, so mirrored data is covered too) and as many off-data samples, uniform in the data's
bounding cube or Gaussian around the flip-symmetrised mean (`covering_inputs`). For every
trained net the end-to-end error on held-out covering inputs is read next to the recovered action's
per-layer weight error (`recover_latent_actions`), its bias error and the random-permutation baseline.

The relation is the slope of log(layer-1 error) against log(end-to-end error), fitted per
activation with a bootstrap interval over seeds. Its verdict (`exactness_claims`) is read on
held-out seeds, never on the seeds the figure and the table show, against bars fixed here before the
first sweep was run (`SLOPE_BAR`, `EXACT_RATIO_BAR`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from symfast._progress import Progress, reporter
from symfast.layerwise.recovery import recover_latent_actions
from symfast.layerwise.data import ImageData, flip_matrix, flip_permutation
from symfast.layerwise.experiments import build_mlp
from symfast.layerwise.activations import activation as activation_entry
from symfast.layerwise.reduction import identifiable_submodel, near_linear_fraction
from symfast.layerwise.network import MLP, as_mlp
from symfast.report.claim import Claim, Verdict, ranking_verdict

__all__ = ["ExactnessSettings", "ExactnessResult", "exactness_sweep", "train_sweep", "covering_inputs", "measure",
           "fit_slope", "exactness_claims", "plot_exactness", "format_exactness", "ACTIVATIONS", "SLOPE_BAR",
           "EXACT_RATIO_BAR", "MIN_DECADES", "COLUMNS", "LAYER_COLUMNS", "summary_table", "slope_and_ratio",
           "combine_verdicts", "polish_net", "E2E_MEASURES"]

# Fixed before the first sweep was run, not after: the relation "layer error -> 0 as end-to-end error
# -> 0" holds when the fitted log-log slope lies above SLOPE_BAR (the layer error falls at least as
# the square root of the end-to-end error) and, at the most exact point of the sweep (largest penalty
# weight), the layer-1 error is below EXACT_RATIO_BAR x the random-permutation error.
SLOPE_BAR = 0.5
EXACT_RATIO_BAR = 0.1
MIN_DECADES = 1.0  # the held-out end-to-end errors must span at least this many decades for a slope to be read
# A net that lost its task gives no verdict: the held-out nets' median test accuracy at the largest
# penalty weight must reach this (chance is 0.1 on the 10 digit classes).
TRAINED_ACCURACY = 0.5

# tanh, sigmoid and the odd polynomial z + z^3/3: identifiability proven; relu: conjectural.
ACTIVATIONS = ("tanh", "sigmoid", "odd_poly", "relu")

# One row per trained net (`ExactnessResult.table`); the per-layer columns are layer1_*, layer2_*, output_*.
COLUMNS = ["activation", "lam", "seed", "split", "end_to_end", "end_to_end_data", "end_to_end_law", "accuracy"]
LAYER_COLUMNS = ["error", "bias_error", "random", "ratio"]
# The end-to-end errors a relation is read against (column: words): on held-out covering inputs (test
# digits and as many fresh samples of the covering law), and on the fresh law samples alone, the inputs
# the penalty covers (exact there, on an open set, an analytic net is exact on all of R^n).
E2E_MEASURES = {"end_to_end": "end-to-end error", "end_to_end_law": "end-to-end error on the covering law"}


@dataclass(frozen=True)
class ExactnessSettings:
    """What one sweep trains.

    Attributes:
        lams: penalty weights (> 0), one sweep point each.
        seeds: fit seeds per point (0..seeds-1): the table, the figure and the reported slope.
        heldout_seeds: held-out seeds per point (seed_offset..): the verdicts.
        seed_offset: first held-out seed (must not overlap the fit seeds).
        sizes: hidden widths; steps, lr (cosine-decayed to 0), batch (data and off-data each).
        covering: "uniform" (flip-closed bounding box) or "gaussian" off-data samples.
        bootstrap: bootstrap resamples of the seeds for the slope interval.
        polish_lams: extra penalty weights after `lams` (each > max(lams)), each trained by the
            full-batch L-BFGS polish (`polish_net`) from the previous point; () (the default) keeps
            the Adam-only sweep.
        polish_iters: L-BFGS iterations per polish weight; polish_samples: off-data samples in the
            fixed covering set of the polish (with all training digits); polish_history: L-BFGS
            memory (curvature pairs kept). The penalised loss is ill-conditioned: on digits a memory
            of 1000 pairs closes the covering-law error several times faster per iteration than 50.
        weight_decay: decoupled (AdamW) weight decay of the Adam stages; 0 (the default) trains with
            plain Adam.
    """

    lams: tuple = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
    seeds: int = 5
    heldout_seeds: int = 5
    seed_offset: int = 1000
    sizes: tuple = (64, 32)
    steps: int = 800
    lr: float = 3e-3
    batch: int = 128
    covering: str = "uniform"
    bootstrap: int = 1000
    polish_lams: tuple = ()
    polish_iters: int = 300
    polish_samples: int = 1024
    polish_history: int = 50
    weight_decay: float = 0.0

    def __post_init__(self):
        if not self.lams or any(not np.isfinite(w) or w <= 0 for w in self.lams):
            raise ValueError(f"penalty weights must be finite and > 0, got {list(self.lams)}")
        if any(not np.isfinite(w) or w <= max(self.lams) for w in self.polish_lams):
            raise ValueError(f"polish penalty weights must be finite and > max(lams) = {max(self.lams):g}, "
                             f"got {list(self.polish_lams)}")
        for name in ("seeds", "heldout_seeds", "steps", "batch", "bootstrap", "polish_iters", "polish_samples",
                     "polish_history"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.seed_offset < self.seeds:
            raise ValueError(f"held-out seeds start at seed_offset={self.seed_offset}, inside the fit seeds "
                             f"0..{self.seeds - 1}: pick seed_offset >= {self.seeds}")
        if self.covering not in ("uniform", "gaussian"):
            raise ValueError(f"covering must be 'uniform' or 'gaussian', got {self.covering!r}")
        if not (np.isfinite(self.weight_decay) and self.weight_decay >= 0):
            raise ValueError(f"weight_decay must be finite and >= 0, got {self.weight_decay}")
        if not self.lr > 0 or not self.sizes or min(self.sizes) < 1:
            raise ValueError(f"lr must be > 0 and sizes positive, got lr={self.lr}, sizes={list(self.sizes)}")


def covering_inputs(x: np.ndarray, perm: np.ndarray, kind: str):
    """A sampler `draw(n, gen) -> [n, D]` of off-data inputs from a flip-invariant law with full support.

    "uniform": uniform in the data's bounding cube [min x, max x]^D (every pixel over the whole
    range, also those the data never lights: on digits pixels (4, 0) and (4, 7) are always 0);
    "gaussian": independent pixels with the flip-symmetrised mean of x and its per-pixel standard
    deviation, floored at the median pixel's. `perm` is the flip as an index (`flip_permutation`);
    both laws are invariant under it, so f(g x) - f(x) is penalised on a law that g maps to itself.
    """
    xt = torch.as_tensor(x, dtype=torch.float32)
    if xt.ndim != 2 or xt.shape[1] != len(perm) or len(xt) < 2:
        raise ValueError(f"data must be [N >= 2, {len(perm)}], got shape {list(xt.shape)}")
    both = torch.cat([xt, xt[:, perm]])
    if kind == "uniform":
        loc, scale = both.min(), both.max() - both.min()
        return lambda n, gen: loc + scale * torch.rand(n, len(perm), generator=gen)
    if kind == "gaussian":
        sd = both.std(0)
        loc, scale = both.mean(0), sd.clamp(min=float(sd.median()))
        return lambda n, gen: loc + scale * torch.randn(n, len(perm), generator=gen)
    raise ValueError(f"covering must be 'uniform' or 'gaussian', got {kind!r}")


def _stacked_params(inits: list) -> list:
    """[W_1, b_1, W_2, ...] of several MLPs stacked along a leading model axis (float32, trainable)."""
    out = []
    for l in range(inits[0].num_layers):
        for j in (0, 1):
            out.append(torch.stack([torch.as_tensor(m.layers[l][j], dtype=torch.float32) for m in inits])
                       .requires_grad_())
    return out


def train_sweep(train: ImageData, activation: str, lams, seeds, s: ExactnessSettings,
                num_threads: int | None = 1) -> dict:
    """Train one invariant classifier per seed along the penalty path lams (ascending), stacked.

    Loss per net: cross-entropy on a data batch + lam * mean |f(g x) - f(x)|^2 over that batch and
    as many off-data samples (`covering_inputs`). The sweep is a penalty continuation: the first
    point trains `steps` steps from the seed's initialisation, every next (larger) lam continues
    from the previous point's weights for `steps // 2` more, each stage with a fresh Adam and a
    cosine-decayed learning rate (AdamW with `s.weight_decay` when it is > 0). (Training each large lam from scratch does not converge: the
    penalty swamps the task gradient and the nets collapse to chance.) Adam is elementwise, so the
    stacked nets train exactly as they would alone, and a net's init and batches depend on its seed
    only.

    `num_threads`: torch threads while training (1 by default: the stacked nets are small, and extra
    threads only contend on a shared machine; None keeps the current setting).

    With `s.polish_lams`, each net then continues from its last Adam point through those larger
    weights by `polish_net` (full-batch L-BFGS on the training digits and `s.polish_samples` fixed
    off-data samples drawn from the seed's generator), one net at a time.

    Returns:
        {(lam, seed): MLP} (float64 copies of the trained weights), lams then polish_lams.
    """
    old = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        return _train_path(train, activation, lams, seeds, s)
    finally:
        torch.set_num_threads(old)


def _train_path(train: ImageData, activation: str, lams, seeds, s: ExactnessSettings) -> dict:
    act = activation_entry(activation)
    lams = sorted(float(w) for w in lams)
    seeds = [int(sd) for sd in seeds]
    sizes = [train.x.shape[1], *s.sizes, train.num_classes]
    params = _stacked_params([as_mlp(build_mlp(sizes, act.name, sd)) for sd in seeds])
    x, y = torch.as_tensor(train.x), torch.as_tensor(train.y)
    perm = torch.as_tensor(flip_permutation(train.shape))
    draw = covering_inputs(train.x, perm.numpy(), s.covering)
    gens = [torch.Generator().manual_seed(sd) for sd in seeds]
    B = min(s.batch, len(x))

    def forward(h):
        for l in range(0, len(params), 2):
            h = torch.baddbmm(params[l + 1][:, None, :], h, params[l].transpose(1, 2))
            if l < len(params) - 2:
                h = act.torch_fn(h)
        return h

    out_nets = {}
    for k, lam in enumerate(lams):
        steps = s.steps if k == 0 else max(1, s.steps // 2)
        # AdamW only with decay: plain Adam keeps the sweep without decay exactly as it was
        opt = (torch.optim.AdamW(params, lr=s.lr, weight_decay=s.weight_decay) if s.weight_decay > 0
               else torch.optim.Adam(params, lr=s.lr))
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
        for _ in range(steps):
            idx = torch.stack([torch.randint(0, len(x), (B,), generator=g) for g in gens])
            xb = torch.cat([x[idx], torch.stack([draw(B, g) for g in gens])], 1)  # [M, 2B, D]: data, off-data
            out, outg = forward(torch.cat([xb, xb[..., perm]], 1)).chunk(2, 1)
            ce = torch.nn.functional.cross_entropy(out[:, :B].reshape(-1, out.shape[-1]), y[idx].reshape(-1))
            eq = (outg - out).pow(2).sum(-1).mean(1).sum()
            loss = ce * len(seeds) + lam * eq  # per net: its mean cross-entropy + lam * its mean penalty
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        for m, sd in enumerate(seeds):
            out_nets[(lam, sd)] = MLP([(params[l][m].detach(), params[l + 1][m].detach())
                                       for l in range(0, len(params), 2)], act.name)
    if s.polish_lams:
        for m, sd in enumerate(seeds):
            gen = torch.Generator().manual_seed(sd)
            fixed = np.concatenate([train.x, draw(s.polish_samples, gen).numpy()])  # one covering set per net
            net = out_nets[(lams[-1], sd)]
            for lam in sorted(float(w) for w in s.polish_lams):
                net = out_nets[(lam, sd)] = polish_net(net, train, fixed, lam, s.polish_iters, s.polish_history)
    return out_nets


def _loss64(layers, act, x, y, cover, perm, lam):
    """Mean cross-entropy on (x, y) + lam * mean |f(g c) - f(c)|^2 over `cover` (float64, one net)."""
    def f(h):
        for l, (W, b) in enumerate(layers):
            h = h @ W.T + b
            if l < len(layers) - 1:
                h = act.torch_fn(h)
        return h
    ce = torch.nn.functional.cross_entropy(f(x), y)
    return ce + lam * (f(cover[:, perm]) - f(cover)).pow(2).sum(-1).mean()


def polish_net(net: MLP, train: ImageData, cover: np.ndarray, lam: float, iters: int = 300,
               history: int = 50) -> MLP:
    """Full-batch L-BFGS on one net's penalised loss: the polish stage of the sweep.

    The loss is `train_sweep`'s, but deterministic: mean cross-entropy on all of `train` plus lam x
    the mean squared invariance residual on the fixed inputs `cover` ([N, D], e.g. the training
    digits and a fixed covering sample), in float64, minimised by `torch.optim.LBFGS` (strong-Wolfe
    line search, `history` curvature pairs) for `iters` iterations from `net`'s weights. Minibatch
    Adam stalls at end-to-end errors near 1e-2 whatever lam; a deterministic quasi-Newton step on a
    fixed sample keeps closing it as lam grows.

    Returns:
        the polished MLP (a new object; `net` is unchanged).
    """
    if not np.isfinite(lam) or lam <= 0 or int(iters) < 1 or int(history) < 1:
        raise ValueError(f"polish needs lam > 0, iters >= 1 and history >= 1, got lam={lam}, iters={iters}, "
                         f"history={history}")
    cover = np.asarray(cover, float)
    if cover.ndim != 2 or cover.shape[1] != net.sizes[0] or train.x.shape[1] != net.sizes[0]:
        raise ValueError(f"cover and train.x must be [N, {net.sizes[0]}], got {list(cover.shape)}, "
                         f"{list(train.x.shape)}")
    act = activation_entry(net.activation)
    perm = torch.as_tensor(flip_permutation(train.shape))
    layers = [(torch.tensor(W, dtype=torch.float64, requires_grad=True),
               torch.tensor(b, dtype=torch.float64, requires_grad=True)) for W, b in net.layers]
    flat = [p for wb in layers for p in wb]
    x, y = torch.as_tensor(train.x, dtype=torch.float64), torch.as_tensor(train.y)
    c = torch.as_tensor(cover, dtype=torch.float64)
    opt = torch.optim.LBFGS(flat, lr=1.0, max_iter=int(iters), history_size=int(history), tolerance_grad=1e-12,
                            tolerance_change=1e-15, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad(set_to_none=True)
        loss = _loss64(layers, act, x, y, c, perm, lam)
        loss.backward()
        return loss

    opt.step(closure)
    return MLP([(W.detach(), b.detach()) for W, b in layers], act.name)


def _layer_names(n: int) -> list:
    return [f"layer{l + 1}" for l in range(n - 1)] + ["output"]


def measure(net: MLP, test: ImageData, cover: np.ndarray, reduced: bool = False, law: np.ndarray | None = None) -> dict:
    """One trained invariant classifier read against the flip: a table row (without its keys).

    Args:
        net: the trained MLP; test: held-out data; cover: [N, D] held-out covering inputs (test
            data and off-data samples), where the end-to-end error is measured.
        reduced: also read the identifiable sub-model (`identifiable_submodel` on `cover`): per layer
            its recovered action's error, random error and ratio (columns <layer>_<c>_reduced), and
            the near-linear fraction of every hidden layer (layer<l>_near_linear).
        law: [M, D] fresh samples of the covering law alone (no data): also report end_to_end_law,
            the error on them, i.e. on the space the penalty covers rather than on new digits.

    Returns:
        end_to_end (on `cover`), end_to_end_data (on the test data), [end_to_end_law], accuracy; per layer (layer1,
        layer2, ..., output) the recovered action's weight error, bias error, random-permutation
        error and their ratio; per hidden layer its data-level error on the test data
        (<layer>_data_error, `data_errors`); test accuracy after projecting the weights onto the
        recovered actions and onto random pairings (accuracy_projected, accuracy_random_projection,
        `projection_report`; NaN where the actions generate too large a group); layer-1 near-linear
        fraction on `cover`; dead / duplicate units removed by the identifiable reduction.
    """
    from symfast.layerwise.projection import equivariance_error, projection_report

    if np.ndim(cover) != 2 or np.shape(cover)[1] != net.sizes[0] or test.x.shape[1] != net.sizes[0]:
        raise ValueError(f"cover and test.x must be [N, {net.sizes[0]}], got {list(np.shape(cover))}, "
                         f"{list(test.x.shape)}")
    if law is not None and (np.ndim(law) != 2 or np.shape(law)[1] != net.sizes[0] or len(law) == 0):
        raise ValueError(f"law must be [M >= 1, {net.sizes[0]}], got {list(np.shape(law))}")

    def accuracy(out):
        return float((out.argmax(1) == test.y).mean())

    R = flip_matrix(test.shape)
    acts = recover_latent_actions(net, R, data=test.x)
    row = {"end_to_end": equivariance_error(net, cover, R), "end_to_end_data": equivariance_error(net, test.x, R)}
    if law is not None:
        row["end_to_end_law"] = equivariance_error(net, law, R)
    row["accuracy"] = accuracy(net(test.x))
    for name, e, be, r in zip(_layer_names(net.num_layers), acts.errors, acts.bias_errors, acts.baseline):
        row.update({f"{name}_{c}": float(v) for c, v in zip(LAYER_COLUMNS, (e, be, r, e / r))})
    # the hidden layers' data-level errors (the output's is end_to_end_data)
    row.update({f"{name}_data_error": float(v) for name, v in zip(_layer_names(net.num_layers)[:-1], acts.data_errors)})
    try:  # accuracy after projecting the weights onto the recovered actions, and onto random pairings
        proj = projection_report(net, acts, test.x, R, loss_fn=accuracy)
        row["accuracy_projected"], row["accuracy_random_projection"] = proj["loss_after"], proj["loss_random"]
    except ValueError:  # the recovered actions generate a huge group: no projection to read
        row["accuracy_projected"] = row["accuracy_random_projection"] = float("nan")
    near = near_linear_fraction(net, cover)
    row["layer1_near_linear"] = float(near[0])
    red = identifiable_submodel(net, data=cover)
    whys = [why for layer in red.removed for _, why in layer]
    row["dead_units"] = sum(w in ("zero-out", "constant", "dead-on-data") for w in whys)
    row["duplicate_units"] = sum(w.startswith("duplicate") for w in whys)
    if reduced:
        row.update({f"layer{l + 1}_near_linear": float(v) for l, v in enumerate(near)})
        racts = recover_latent_actions(red.model, R)
        for name, e, r in zip(_layer_names(red.model.num_layers), racts.errors, racts.baseline):
            row.update({f"{name}_error_reduced": float(e), f"{name}_random_reduced": float(r),
                        f"{name}_ratio_reduced": float(e / r)})
    return row


def fit_slope(e2e, layer, seeds, bootstrap: int = 1000, seed: int = 0):
    """Least-squares slope of log(layer) against log(e2e), with a 95 % bootstrap interval over seeds.

    Args:
        e2e, layer: [N] positive errors, one per trained net; seeds: [N] the seed of each net (a
            bootstrap resample draws whole seeds, i.e. whole sweeps, with replacement).

    Returns:
        (slope, lo, hi); lo = hi = nan when fewer than 2 distinct seeds or e2e values.
    """
    e2e, layer, seeds = np.asarray(e2e, float), np.asarray(layer, float), np.asarray(seeds)
    if not (e2e.shape == layer.shape == seeds.shape) or e2e.ndim != 1:
        raise ValueError(f"e2e, layer and seeds must be [N] each, got {e2e.shape}, {layer.shape}, {seeds.shape}")
    if len(e2e) < 2 or (e2e <= 0).any() or (layer <= 0).any() or not np.isfinite(e2e).all() \
            or not np.isfinite(layer).all():
        raise ValueError("fit_slope needs >= 2 finite, positive errors (a log-log fit)")
    lx, ly = np.log(e2e), np.log(layer)

    def slope(mask_idx):
        x, y = lx[mask_idx], ly[mask_idx]
        vx = ((x - x.mean()) ** 2).sum()
        return float(((x - x.mean()) * (y - y.mean())).sum() / vx) if vx > 0 else np.nan

    s = slope(np.arange(len(lx)))
    uniq = np.unique(seeds)
    if len(uniq) < 2:
        return s, np.nan, np.nan
    rows = [np.flatnonzero(seeds == u) for u in uniq]
    rng = np.random.default_rng(seed)
    boots = [slope(np.concatenate([rows[i] for i in rng.integers(0, len(uniq), len(uniq))])) for _ in range(bootstrap)]
    boots = np.asarray(boots)
    boots = boots[np.isfinite(boots)]
    if len(boots) == 0:
        return s, np.nan, np.nan
    return s, float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def _mean_interval(v, bootstrap: int, seed: int = 0):
    """Mean of v and a 95 % bootstrap interval of it."""
    v = np.asarray(v, float)
    rng = np.random.default_rng(seed)
    boots = v[rng.integers(0, len(v), (bootstrap, len(v)))].mean(1)
    return float(v.mean()), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def slope_and_ratio(t: pd.DataFrame, error_col: str, ratio_col: str, bootstrap: int,
                    e2e_col: str = "end_to_end") -> dict:
    """The two tests of one sweep's held-out rows `t` (columns lam, seed, e2e_col, error_col, ratio_col).

    Returns:
        slope, lo, hi (log-log slope of error_col against e2e_col, interval over seeds); ratio,
        ratio_lo, ratio_hi (mean of ratio_col at the largest lam and its interval); decades spanned by
        the end-to-end errors; seeds, n; top (the rows at the largest lam); v_slope, v_ratio (the
        `ranking_verdict`s against `SLOPE_BAR` and `EXACT_RATIO_BAR`, the bar a point interval).
    """
    seeds = sorted(t["seed"].unique())
    n = len(seeds)
    s, lo, hi = fit_slope(t[e2e_col], t[error_col], t["seed"], bootstrap)
    top = t[t["lam"] == t["lam"].max()]
    r, rlo, rhi = _mean_interval(top[ratio_col], bootstrap)
    return {"slope": s, "lo": lo, "hi": hi, "ratio": r, "ratio_lo": rlo, "ratio_hi": rhi,
            "decades": float(np.log10(t[e2e_col].max() / t[e2e_col].min())), "seeds": seeds, "n": n,
            "top": top, "v_slope": ranking_verdict({"slope": (lo, hi), "bar": (SLOPE_BAR, SLOPE_BAR)}, "slope", n),
            "v_ratio": ranking_verdict({"bar": (EXACT_RATIO_BAR, EXACT_RATIO_BAR), "ratio": (rlo, rhi)}, "bar", n)}


def combine_verdicts(parts: list, decades: float) -> Verdict:
    """One verdict from several tests: not comparable when the end-to-end errors span fewer than
    `MIN_DECADES` decades; missed when any test missed; held when all held; else not comparable."""
    if decades < MIN_DECADES:
        return Verdict("not comparable", f"interval too wide: end-to-end errors span {decades:.2f} decades "
                                         f"(< {MIN_DECADES:g}), no slope to read")
    if any(x.verdict == "missed" for x in parts):
        return Verdict("missed", "; ".join(x.reason for x in parts if x.verdict == "missed"))
    if all(x.verdict == "held" for x in parts):
        return Verdict("held", "; ".join(x.reason for x in parts))
    return Verdict("not comparable", "; ".join(x.reason for x in parts if x.verdict != "held"))


def exactness_claims(table: pd.DataFrame, bootstrap: int = 1000) -> list:
    """One verdict row per activation and end-to-end measure in the table (`E2E_MEASURES`), read on the
    held-out seeds (split == "heldout") only.

    Held when the log-log slope's 95 % interval lies above `SLOPE_BAR` and, at the sweep's largest
    penalty weight, the interval of the mean layer-1 error / random ratio lies below
    `EXACT_RATIO_BAR`; missed when either interval lies on the wrong side; otherwise not
    comparable (overlapping intervals, too few seeds, or end-to-end errors spanning
    less than `MIN_DECADES` decades; at least `symfast.report.claim.MIN_SEEDS` seeds are needed). Both comparisons are `ranking_verdict` on intervals, the bar
    being a point interval.

    Returns:
        list of `Claim` (study "layerwise"), per activation in the table one per measure.
    """
    from symfast.layerwise.claims import PROVEN

    missing = [c for c in ("activation", "lam", "seed", "split", "end_to_end", "layer1_error", "layer1_ratio")
               if c not in table.columns]
    if missing:
        raise ValueError(f"the exactness table lacks columns {missing}")
    e2e_cols = [c for c in E2E_MEASURES if c in table.columns]  # the law's only where it was measured
    claims = []
    for act in dict.fromkeys(table["activation"]):
        t = table[(table["activation"] == act) & (table["split"] == "heldout")]
        kind = "proven" if act in PROVEN else "conjectural"
        for col in e2e_cols:
            claim = f"Layer error -> 0 as {E2E_MEASURES[col]} -> 0 ({act}, identifiability {kind})"
            expected = (f"log-log slope of layer-1 error vs {E2E_MEASURES[col]} > {SLOPE_BAR:g} and layer-1 error / "
                        f"random < {EXACT_RATIO_BAR:g} at the largest penalty weight (held-out seeds, 95 % intervals)")
            if t.empty:
                claims.append(Claim("layerwise", claim, expected, "no held-out seeds", "not comparable",
                                    reason="too few seeds (n = 0)"))
                continue
            r = slope_and_ratio(t, "layer1_error", "layer1_ratio", bootstrap, e2e_col=col)
            s, lo, hi, rr, rlo, rhi, decades, seeds, n, top = (r[k] for k in (
                "slope", "lo", "hi", "ratio", "ratio_lo", "ratio_hi", "decades", "seeds", "n", "top"))
            v = combine_verdicts([r["v_slope"], r["v_ratio"]], decades)
            acc = float(top["accuracy"].median()) if "accuracy" in top.columns else float("nan")
            if acc < TRAINED_ACCURACY:  # NaN (no accuracy column) passes: nothing to gate on
                v = Verdict("not comparable", f"not trained: median test accuracy {acc:.2f} at lam "
                                              f"{top['lam'].iloc[0]:g} (< {TRAINED_ACCURACY:g})")
            measured = (f"slope {s:.2f} [{lo:.2f}, {hi:.2f}]; ratio {rr:.2f} [{rlo:.2f}, {rhi:.2f}] at lam "
                        f"{top['lam'].iloc[0]:g}; {E2E_MEASURES[col]} {t[col].min():.1e}..{t[col].max():.1e} "
                        f"({decades:.1f} decades); seeds {seeds[0]}..{seeds[-1]} (n = {n})")
            note = ("identifiability is conjectured, not proven, for this activation: a miss does not contradict the "
                    "theorem" if kind == "conjectural" else "the theorem's hypothesis holds for this activation")
            tested = v.verdict in ("held", "missed")  # the rule applied goes to the note, a reason only to the rest
            claims.append(Claim("layerwise", claim, expected, measured, v.verdict,
                                f"{v.reason}; {note}" if tested else note, "" if tested else v.reason))
    return claims


@dataclass
class ExactnessResult:
    """What `exactness_sweep` returns.

    Attributes:
        table: one row per trained net (`COLUMNS`, then layer1_/layer2_/output_ error, bias_error,
            random, ratio, and layer1_near_linear, dead_units, duplicate_units).
        fits: per activation and end-to-end measure ("against", `E2E_MEASURES`), the slope with its
            interval on the fit seeds and on the held-out seeds.
        claims: `exactness_claims` of the table (held-out seeds only).
        settings: the `ExactnessSettings` used.
    """

    table: pd.DataFrame
    fits: pd.DataFrame
    claims: list
    settings: ExactnessSettings


def exactness_sweep(data: ImageData, activations=ACTIVATIONS, settings: ExactnessSettings | None = None,
                    progress: Progress = False) -> ExactnessResult:
    """Train flip-invariant classifiers along the penalty path per activation and read each one.

    Fit seeds 0..seeds-1 and held-out seeds seed_offset.. train on the same 75 % of `data`; every net
    is read on the other 25 % and on as many fresh covering inputs (`measure`).
    """
    s = settings or ExactnessSettings()
    for a in activations:
        activation_entry(a)  # raises on an unknown name
    train, test = data.split(0.25, seed=0)
    perm = flip_permutation(data.shape)
    law = covering_inputs(train.x, perm, s.covering)(len(test.x), torch.Generator().manual_seed(2 ** 31 - 1)).numpy()
    cover = np.concatenate([test.x, law])
    split = {**{sd: "fit" for sd in range(s.seeds)},
             **{sd: "heldout" for sd in range(s.seed_offset, s.seed_offset + s.heldout_seeds)}}
    rows = []
    for act in activations:
        reporter(progress, "symfast.layerwise")(f"exactness: {act}, {len(s.lams)} penalty weights x {len(split)} seeds")
        nets = train_sweep(train, act, s.lams, list(split), s)
        for (lam, sd), net in nets.items():
            rows.append({"activation": act, "lam": lam, "seed": sd, "split": split[sd], **measure(net, test, cover, law=law)})
    table = pd.DataFrame(rows)
    fits = []
    for act in activations:
        for col in E2E_MEASURES:
            row = {"activation": act, "against": col}
            for part in ("fit", "heldout"):
                t = table[(table["activation"] == act) & (table["split"] == part)]
                row[f"slope_{part}"], row[f"slope_{part}_lo"], row[f"slope_{part}_hi"] = fit_slope(
                    t[col], t["layer1_error"], t["seed"], s.bootstrap)
            fits.append(row)
    return ExactnessResult(table, pd.DataFrame(fits), exactness_claims(table, s.bootstrap), s)


def seed_medians(t: pd.DataFrame, keys: list, cols: list) -> pd.DataFrame:
    """Medians of `cols` per `keys` group (in order of appearance), with each group's row count as a
    "seeds" column right after the keys: the summary tables of the exactness, attention and
    identifiability sweeps."""
    out = t.groupby(keys, sort=False)[cols].median().reset_index()
    out.insert(len(keys), "seeds", t.groupby(keys, sort=False).size().values)
    return out


def summary_table(table: pd.DataFrame) -> pd.DataFrame:
    """Medians over the fit seeds per (activation, lam): the table the figure and the guide show."""
    t = table[table["split"] == "fit"]
    cols = ["end_to_end", "end_to_end_data", "end_to_end_law", "accuracy", "accuracy_projected",
            "accuracy_random_projection", "layer1_error", "layer1_bias_error", "layer1_random", "layer1_ratio",
            "layer1_data_error", "layer2_error", "layer2_random", "layer2_data_error", "layer1_near_linear",
            "dead_units", "duplicate_units"]
    cols = [c for c in cols if c in t.columns]
    return seed_medians(t, ["activation", "lam"], cols)


def format_exactness(res: ExactnessResult) -> str:
    """Markdown: the per-point medians (fit seeds), the slopes, the verdict rows (held-out seeds)."""
    s = res.settings
    head = (f"Penalty weights {list(s.lams)}; MLP {list(s.sizes)} hidden; {s.steps} steps for the first weight, "
            f"{max(1, s.steps // 2)} per further weight (continuation); penalty on data + {s.covering} off-data "
            f"samples; fit seeds 0..{s.seeds - 1}, held-out seeds {s.seed_offset}..{s.seed_offset + s.heldout_seeds - 1}."
            + (f" Polish stage: penalty weights {list(s.polish_lams)}, each {s.polish_iters} full-batch L-BFGS "
               f"iterations (float64, memory {s.polish_history}) on the training digits + {s.polish_samples} fixed "
               f"off-data samples per net."
               if s.polish_lams else ""))
    summ = summary_table(res.table)
    fmt = {c: (lambda v: f"{v:.2e}") if c.startswith("end_to_end") else (lambda v: f"{v:.3g}") for c in summ.columns}
    lines = [head, "", "### Medians over the fit seeds", "", _markdown(summ, fmt), "", "### Slopes of log(layer-1 error) "
             "vs log(end-to-end error), 95 % bootstrap intervals over seeds", "", _markdown(
                 pd.DataFrame([{"activation": f["activation"], "against": E2E_MEASURES[f["against"]],
                                "fit seeds": f"{f['slope_fit']:.2f} [{f['slope_fit_lo']:.2f}, {f['slope_fit_hi']:.2f}]",
                                "held-out seeds": f"{f['slope_heldout']:.2f} [{f['slope_heldout_lo']:.2f}, "
                                                  f"{f['slope_heldout_hi']:.2f}]"} for _, f in res.fits.iterrows()]),
                 {}), "", f"### Verdicts (held-out seeds; bars fixed before any run: slope > {SLOPE_BAR:g}, "
             f"ratio < {EXACT_RATIO_BAR:g})", "",
             _markdown(pd.DataFrame([{"claim": c.claim, "measured": c.measured, "verdict": c.label}
                                     for c in res.claims]), {})]
    return "\n".join(lines)


def _markdown(df: pd.DataFrame, fmt: dict) -> str:
    cells = [[fmt.get(c, str)(v) if isinstance(v, float) else str(v) for c, v in r.items()] for _, r in df.iterrows()]
    return "\n".join(["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
                     + ["| " + " | ".join(r) + " |" for r in cells])


def plot_exactness(table: pd.DataFrame, path=None):
    """Log-log: layer-1 (and layer-2) error and the random baseline against the end-to-end error, one
    panel per activation, fit seeds (filled) and held-out seeds (open); a second row of panels against
    the error on the covering law alone where the table has it (`E2E_MEASURES`).

    Returns:
        the figure (the matplotlib backend is left as it is).
    """
    import matplotlib.pyplot as plt

    from symfast.plotting import FONT, SMALL, finish, legend_outside

    acts = list(dict.fromkeys(table["activation"]))
    if not acts:
        raise ValueError("the exactness table is empty")
    measures = [c for c in E2E_MEASURES if c in table.columns]
    fig, axes = plt.subplots(len(measures), len(acts), figsize=(3.6 * len(acts), 3.6 * len(measures)),
                             layout="constrained", squeeze=False)
    for axrow, col in zip(axes, measures):
        for ax, act in zip(axrow, acts):
            t = table[table["activation"] == act]
            for part, face in (("fit", None), ("heldout", "none")):
                p = t[t["split"] == part]
                lab = "" if part == "fit" else " (held-out)"
                ax.scatter(p[col], p["layer1_error"], s=14, c="C0" if face is None else "none",
                           edgecolors="C0", label="layer 1" + lab)
                if "layer2_error" in p and (p["layer2_error"] > 0).any():
                    ax.scatter(p[col], p["layer2_error"].where(p["layer2_error"] > 0), s=14, marker="^",
                               c="C1" if face is None else "none", edgecolors="C1", label="layer 2" + lab)
                ax.scatter(p[col], p["layer1_random"], s=10, marker="x", c="0.5",
                           label="layer 1, random permutation" if part == "fit" else None)
            f = t[t["split"] == "fit"]
            if f["seed"].nunique() >= 1 and f[col].nunique() >= 2:
                k = fit_slope(f[col], f["layer1_error"], f["seed"], bootstrap=1)[0]
                lx = np.log(f[col])
                xs = np.exp(np.linspace(lx.min(), lx.max(), 2))
                ax.plot(xs, np.exp(np.log(f["layer1_error"]).mean() + k * (np.log(xs) - lx.mean())), color="C0",
                        lw=1, label="layer 1 fit (fit seeds)")
                ax.text(0.03, 0.03, f"slope {k:.2f}", transform=ax.transAxes, fontsize=SMALL)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(act, fontsize=FONT)
            ax.set_xlabel(E2E_MEASURES[col], fontsize=SMALL)
            ax.tick_params(which="both", labelsize=SMALL)
        axrow[0].set_ylabel("recovered-action weight error (relative)", fontsize=SMALL)
    legend_outside(axes[0][-1], where="right")
    return finish(fig, path)
