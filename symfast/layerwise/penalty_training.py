"""Training flip-invariant MLP classifiers along a penalty path, the recipe of the layerwise sweeps.

A classifier is trained with cross-entropy plus lam x the invariance residual |f(g x) - f(x)|^2,
penalised on inputs that cover the space: the data batch (its flip is the other half of each pair)
and as many off-data samples of a flip-invariant law with full support (`covering_inputs`). The
penalty weight grows along a continuation (`train_sweep`: Adam, one seed's nets stacked), optionally
followed by a full-batch L-BFGS polish at larger weights (`polish_net`). `ExactnessSettings` says
what one such path trains; the exactness sweep (`symfast.layerwise.exactness`) and the
identifiability sweeps (`symfast.layerwise.identifiability`, `symfast.layerwise.matched`) train
with it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symfast.activations import activation as activation_entry
from symfast.layerwise.data import ImageData, flip_permutation
from symfast.layerwise.experiments import build_mlp
from symfast.layerwise.network import MLP, as_mlp
from symfast.layerwise.protocol import check_sweep_settings, stage_steps

__all__ = ["ExactnessSettings", "covering_inputs", "train_sweep", "polish_net"]


@dataclass(frozen=True)
class ExactnessSettings:
    """What one exactness sweep trains: its penalty path, its seeds and the bootstrap of its slopes.

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
        check_sweep_settings(self, "polish_iters", "polish_samples", "polish_history")
        if any(not np.isfinite(w) or w <= max(self.lams) for w in self.polish_lams):
            raise ValueError(f"polish penalty weights must be finite and > max(lams) = {max(self.lams):g}, "
                             f"got {list(self.polish_lams)}")
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
        steps = stage_steps(s.steps, k)
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

