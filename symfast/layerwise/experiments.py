"""Equivariance-loss training on images and the layerwise readout of the trained MLPs.

Classifiers are trained to be invariant (loss weight * |f(gx) - f(x)|^2),
autoencoders to be equivariant (|f(gx) - g f(x)|^2), next to a control trained
without the loss. Then the hidden actions are recovered, read against a random
baseline and at the data level, and the network is projected onto them
(the paper's experiment is on CIFAR10; here digits by default).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from symfast._progress import Progress, reporter
from symfast.layerwise.recovery import DEFAULT_THRESHOLD, LatentActions, recover_latent_actions
from symfast.layerwise.data import ImageData, flip_matrix, flip_permutation
from symfast.layerwise.reduction import identifiable_submodel, near_linear_fraction
from symfast.activations import ACTIVATION_TABLE
from symfast.activations import activation as activation_entry
from symfast.layerwise.network import Act, as_mlp
from symfast.layerwise.projection import projection_report
from symfast.layerwise.protocol import train_test_split

__all__ = ["build_mlp", "default_sizes", "train_equivariant", "train_flip_pairs", "analyse", "run_experiment",
           "run_variants", "ExperimentResult", "format_results"]

_TORCH_MODULES = {name: ACTIVATION_TABLE[name].module for name in ("tanh", "relu", "sigmoid")}


def default_sizes(model: str, dim: int, num_classes: int = 10) -> list:
    """Paper-like widths: classifier d-128-64-classes, autoencoder d-128-32-128-d."""
    if model == "classifier":
        return [dim, 128, 64, num_classes]
    if model == "autoencoder":
        return [dim, 128, 32, 128, dim]
    raise ValueError(f"model must be 'classifier' or 'autoencoder', got {model!r}")


def build_mlp(sizes, activation: str = "tanh", seed: int = 0) -> torch.nn.Sequential:
    """nn.Sequential of Linear layers with `activation` between them (linear output)."""
    name = activation_entry(activation).name  # raises on an unknown name
    make = _TORCH_MODULES.get(name, lambda: Act(name))
    torch.manual_seed(seed)
    mods = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        mods.append(torch.nn.Linear(a, b))
        if i < len(sizes) - 2:
            mods.append(make())
    return torch.nn.Sequential(*mods)


def train_equivariant(model: str, data: ImageData, activation: str = "tanh", equivariance_weight: float = 1.0,
                      weight_decay: float = 0.0, steps: int = 2000, lr: float = 2e-3, batch: int = 256,
                      seed: int = 0, sizes=None, num_threads: int | None = 1) -> torch.nn.Sequential:
    """Train a classifier (invariance loss) or autoencoder (equivariance loss) under horizontal flip.

    Args:
        model: "classifier" or "autoencoder"; data: training ImageData.
        equivariance_weight: weight of the (in/equi)variance term (0 = control).
        weight_decay: AdamW decoupled weight decay.
        steps, lr, batch, seed: optimisation settings (minibatches drawn with replacement).
        num_threads: torch threads while training (1 by default: these MLPs are too small to gain from
            more, and extra threads only contend; None keeps the current setting).

    Returns:
        the trained float32 nn.Sequential.
    """
    if steps < 1 or batch < 1 or lr <= 0 or equivariance_weight < 0 or weight_decay < 0:
        raise ValueError("steps, batch and lr must be positive; equivariance_weight and weight_decay >= 0")
    sizes = sizes or default_sizes(model, data.x.shape[1], data.num_classes)
    net = build_mlp(sizes, activation, seed)
    x, y = torch.as_tensor(data.x), torch.as_tensor(data.y)
    perm = torch.as_tensor(flip_permutation(data.shape))

    def loss_fn(xb, out, outg, idx):
        if model == "classifier":
            return torch.nn.functional.cross_entropy(out, y[idx]), (outg - out).pow(2).sum(1).mean()
        return (out - xb).pow(2).sum(1).mean(), (outg - out[:, perm]).pow(2).sum(1).mean()

    train_flip_pairs(net, x, lambda xb: xb[:, perm], loss_fn, equivariance_weight, weight_decay, steps, lr, batch,
                     seed, num_threads)
    return net.eval()


def train_flip_pairs(net, x, flip, loss_fn, equivariance_weight, weight_decay, steps, lr, batch, seed,
                     num_threads: int | None = 1) -> None:
    """The training loop of every layerwise experiment (MLPs and CNNs), in place.

    AdamW on minibatches drawn with replacement from x (seeded by `seed`); each step runs the batch
    and its flip `flip(xb)` in one forward pass, and `loss_fn(xb, out, out_flipped, idx)` returns
    (task loss, equivariance term); the term is added with `equivariance_weight` when that is > 0.
    `num_threads`: torch threads while training (None keeps the current setting).
    """
    old = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
        gen = torch.Generator().manual_seed(seed)
        for _ in range(steps):
            idx = torch.randint(0, len(x), (min(batch, len(x)),), generator=gen)
            xb = x[idx]
            out, outg = net(torch.cat([xb, flip(xb)])).chunk(2)
            loss, eq = loss_fn(xb, out, outg, idx)
            if equivariance_weight > 0:
                loss = loss + equivariance_weight * eq
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    finally:
        torch.set_num_threads(old)


def _task(model: str, data: ImageData):
    if model == "classifier":
        return lambda out: float((out.argmax(1) == data.y).mean())  # accuracy
    return lambda out: float(((out - data.x) ** 2).sum(1).mean())  # reconstruction MSE


@dataclass
class ExperimentResult:
    """One trained network's readout (see `analyse`)."""

    label: str
    actions: LatentActions
    metric: float
    metric_name: str
    equivariance: float
    data_errors: np.ndarray
    near_linear: np.ndarray
    reduction: dict
    projection: dict = field(default_factory=dict)

    def row(self) -> dict:
        c = self.actions.count_list()[0]
        cd = self.actions.count_list(level="data")[0]
        return {"layer1_counts_data": cd, "label": self.label, "errors": self.actions.errors.tolist(),
                "random": self.actions.baseline.tolist(), "data_errors": self.data_errors.tolist(),
                "near_linear": self.near_linear.tolist(), self.metric_name: self.metric,
                "equivariance": self.equivariance, "layer1_counts": c, "reduction": self.reduction,
                "projection": {k: v for k, v in self.projection.items() if k != "projected"}}


def analyse(net, model: str, test: ImageData, label: str = "", threshold: float = DEFAULT_THRESHOLD,
            project: bool = True) -> ExperimentResult:
    """Recover flip actions of a trained network and read them against baseline, data, projection."""
    mlp = as_mlp(net)
    R = flip_matrix(test.shape)
    rho_out = None if model == "classifier" else R
    acts = recover_latent_actions(mlp, R, rho_out, data=test.x, threshold=threshold)
    task = _task(model, test)
    metric_name = "accuracy" if model == "classifier" else "mse"
    from symfast.layerwise.projection import equivariance_error

    eq = equivariance_error(mlp, test.x, R, rho_out)
    red = identifiable_submodel(mlp, data=test.x)
    red_acts = recover_latent_actions(red.model, R, rho_out, threshold=threshold)
    reduction = {"removed": [len(r) for r in red.removed], "function_error": red.function_error,
                 "errors_after": red_acts.errors.tolist()}
    proj = {}
    if project:
        try:
            proj = projection_report(mlp, acts, test.x, R, rho_out, loss_fn=task)
        except ValueError as e:  # recovered actions generate a huge group: not a representation
            proj = {"skipped": str(e)}
    return ExperimentResult(label, acts, task(mlp(test.x)), metric_name, eq, acts.data_errors,
                            near_linear_fraction(mlp, test.x), reduction, proj)


def run_experiment(data: ImageData, model: str = "classifier", activation: str = "tanh",
                   equivariance_weight: float = 1.0, weight_decay: float = 0.0, steps: int = 2000,
                   seeds=(0,), control: bool = True, threshold: float = DEFAULT_THRESHOLD, lr: float = 2e-3,
                   batch: int = 256, progress: Progress = False) -> dict:
    """Train with the equivariance loss (and a control without it) per seed and analyse each network.

    Returns:
        dict with "equivariant" and "control" lists of ExperimentResult (one per seed) and the
        trained nets under "nets".
    """
    return run_variants(
        data, equivariance_weight, seeds, control, progress, f"{model} ({activation})", steps,
        lambda train, w, seed: train_equivariant(model, train, activation, w, weight_decay, steps, lr, batch, seed),
        lambda net, test, label, seed: analyse(net, model, test, label, threshold))


def run_variants(data: ImageData, equivariance_weight: float, seeds, control: bool, progress: Progress, what: str,
                 steps: int, train_fn, analyse_fn) -> dict:
    """The experiment loop shared by MLPs and CNNs: per seed, train with the equivariance loss (and a
    control without it) on 75 % of `data` and analyse each net on the held-out 25 %.

    `train_fn(train_data, weight, seed)` returns a net, `analyse_fn(net, test_data, label, seed)` its
    result. Returns {"equivariant": [...], "control": [...], "nets": {(variant, seed): net}}.
    """
    train, test = train_test_split(data)
    out = {"equivariant": [], "control": [], "nets": {}}
    variants = [("equivariant", equivariance_weight)] + ([("control", 0.0)] if control else [])
    for seed in seeds:
        for name, w in variants:
            reporter(progress, "symfast.layerwise")(f"training {what} {name} seed {seed}: {steps} steps")
            net = train_fn(train, w, seed)
            out["nets"][(name, seed)] = net
            out[name].append(analyse_fn(net, test, f"{name}/seed{seed}", seed))
    return out


def format_results(res: dict) -> str:
    """Per-layer error table: equivariant vs control vs random baseline, mean over seeds."""
    lines = []
    for name in ("equivariant", "control"):
        rs = res.get(name) or []
        if not rs:
            continue
        e = np.mean([r.actions.errors for r in rs], 0)
        b = np.mean([r.actions.baseline for r in rs], 0)
        dz = np.mean([r.data_errors for r in rs], 0)
        nl = np.mean([np.append(r.near_linear, np.nan) for r in rs], 0)
        m = np.mean([r.metric for r in rs])
        q = np.mean([r.equivariance for r in rs])
        lines.append(f"{name}: {rs[0].metric_name} {m:.4f}, end-to-end equivariance error {q:.4f}")
        lines.append(f"  {'layer':>5} {'weight':>8} {'random':>8} {'data':>8} {'linear':>7}  "
                     "fixed/anti/cycled/unmatched (weights | data)")
        fmt = lambda c: f"{c['fixed']}/{c['antisymmetric']}/{c['cycled']}/{c['unmatched']}"  # noqa: E731
        for l in range(len(e)):
            if l < len(rs[0].actions.actions):
                c = fmt(rs[0].actions.count_list()[l]) + " | " + fmt(rs[0].actions.count_list(level="data")[l])
            else:
                c = "output"
            nls = "" if np.isnan(nl[l]) else f"{nl[l]:.2f}"
            lines.append(f"  {l + 1:>5} {e[l]:8.4f} {b[l]:8.4f} {dz[l]:8.4f} {nls:>7}  {c}")
        if len(rs) > 1:
            sd = np.std([r.actions.errors for r in rs], 0)
            lines.append(f"  seed spread (std of weight errors over {len(rs)} seeds): {np.round(sd, 4).tolist()}")
            per_seed = [r.actions.count_list(level="data")[0] for r in rs]
            lines.append("  layer-1 symmetric/antisymmetric/paired per seed (data level): "
                         + ", ".join(f"{c['fixed']}/{c['antisymmetric']}/{c['cycled']}" for c in per_seed))
        p = rs[0].projection
        if "skipped" in p:
            lines.append(f"  projection skipped: {p['skipped']}")
        elif p:
            lines.append(f"  projection onto recovered actions: {rs[0].metric_name} {p['loss_before']:.4f} -> "
                         f"{p['loss_after']:.4f} (random actions: {p.get('loss_random', float('nan')):.4f}); "
                         f"equivariance {p['equivariance_before']:.4f} -> {p['equivariance_after']:.2e}")
        red = rs[0].reduction
        lines.append(f"  identifiable reduction removed {red['removed']} neurons (function error "
                     f"{red['function_error']:.1e}); errors after: {np.round(red['errors_after'], 4).tolist()}")
    return "\n".join(lines)
