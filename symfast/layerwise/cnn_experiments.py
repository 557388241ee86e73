"""Flip-invariant CNN classifiers on images and the readout of their channel actions.

Train `ConvNet` with the invariance loss weight * |f(F x) - f(x)|^2 (and a control without it),
recover the channel actions (`conv.recover_conv_actions`), read them against the random baseline
and at the data level, count symmetric / antisymmetric / paired channels, and project onto the
recovered actions (accuracy before / after, and after projecting onto random pairings).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symfast._progress import Progress
from symfast.layerwise.conv import (ConvNet, as_cnn, conv_data_errors, conv_equivariance_error, project_conv,
                                    recover_conv_actions)
from symfast.layerwise.data import ImageData
from symfast.layerwise.experiments import run_variants, train_flip_pairs
from symfast.layerwise.layer_action import DEFAULT_THRESHOLD, LayerAction

__all__ = ["train_cnn", "analyse_cnn", "CNNResult", "run_cnn_experiment", "format_cnn_results"]


def _images(data: ImageData) -> np.ndarray:
    C, H, W = data.shape if len(data.shape) == 3 else (1,) + tuple(data.shape)
    return data.x.reshape(len(data.x), C, H, W)


def train_cnn(data: ImageData, activation: str = "tanh", channels=(16, 32), equivariance_weight: float = 1.0,
              weight_decay: float = 0.0, steps: int = 1500, lr: float = 3e-3, batch: int = 128,
              seed: int = 0) -> ConvNet:
    """Train a ConvNet classifier with the flip-invariance loss; returns the float32 module."""
    if steps < 1 or batch < 1 or lr <= 0 or equivariance_weight < 0 or weight_decay < 0:
        raise ValueError("steps, batch and lr must be positive; equivariance_weight and weight_decay >= 0")
    torch.manual_seed(seed)
    x = torch.as_tensor(_images(data))
    y = torch.as_tensor(data.y)
    net = ConvNet((x.shape[1],) + tuple(channels), num_classes=data.num_classes, activation=activation)

    def loss_fn(xb, out, outg, idx):
        return torch.nn.functional.cross_entropy(out, y[idx]), (outg - out).pow(2).sum(1).mean()

    # one thread: small convs gain nothing from more, and extra threads only contend
    train_flip_pairs(net, x, lambda xb: xb.flip(-1), loss_fn, equivariance_weight, weight_decay, steps, lr, batch,
                     seed, num_threads=1)
    return net


def _random_pairing(H: int, rng) -> LayerAction:
    p = rng.permutation(H)
    idx = np.arange(H)
    idx[p[0:H - 1:2]], idx[p[1:H:2]] = p[1:H:2], p[0:H - 1:2]
    return LayerAction(idx, np.ones(H))


@dataclass
class CNNResult:
    """One trained CNN's readout."""

    label: str
    actions: object
    accuracy: float
    equivariance: float
    data_errors: np.ndarray
    projection: dict

    def row(self) -> dict:
        return {"label": self.label, "errors": self.actions.errors.tolist(), "random": self.actions.baseline.tolist(),
                "data_errors": self.data_errors.tolist(), "accuracy": self.accuracy,
                "equivariance": self.equivariance, "counts": self.actions.count_list(), "projection": self.projection}


def analyse_cnn(net, test: ImageData, label: str = "", threshold: float = DEFAULT_THRESHOLD, seed: int = 0) -> CNNResult:
    """Recover the flip's channel actions of a trained CNN and read them against baseline, data, projection."""
    cnn = as_cnn(net)
    x = _images(test)
    acc = lambda m: float((m(x).argmax(1) == test.y).mean())  # noqa: E731
    acts = recover_conv_actions(cnn, threshold=threshold, seed=seed)
    proj = project_conv(cnn, acts)
    rng = np.random.default_rng(seed)
    rand = type(acts)(acts.name, acts.rho_in, acts.rho_out, [_random_pairing(a.size, rng) for a in acts.actions],
                      acts.errors, acts.bias_errors, acts.baseline, acts.mode, activation=acts.activation)
    rproj = project_conv(cnn, rand)
    projection = {"accuracy_before": acc(cnn), "accuracy_after": acc(proj), "accuracy_random": acc(rproj),
                  "equivariance_after": conv_equivariance_error(proj, x)}
    return CNNResult(label, acts, acc(cnn), conv_equivariance_error(cnn, x), conv_data_errors(cnn, acts, x),
                     projection)


def run_cnn_experiment(data: ImageData, activation: str = "tanh", equivariance_weight: float = 1.0,
                       weight_decay: float = 0.0, steps: int = 1500, seeds=(0,), control: bool = True,
                       threshold: float = DEFAULT_THRESHOLD, channels=(16, 32), lr: float = 3e-3,
                       batch: int = 128, progress: Progress = False) -> dict:
    """Train (equivariant and control) CNNs per seed and analyse each: dict of CNNResult lists and nets."""
    return run_variants(
        data, equivariance_weight, seeds, control, progress, f"cnn ({activation})", steps,
        lambda train, w, seed: train_cnn(train, activation, channels, w, weight_decay, steps, lr, batch, seed),
        lambda net, test, label, seed: analyse_cnn(net, test, label, threshold, seed))


def format_cnn_results(res: dict) -> str:
    """Per-layer table: weight / random / data errors and channel counts, accuracy before / after projection."""
    lines = []
    fmt = lambda c: f"{c['fixed']}/{c['antisymmetric']}/{c['cycled']}/{c['unmatched']}"  # noqa: E731
    for name in ("equivariant", "control"):
        for r in res.get(name) or []:
            p = r.projection
            lines.append(f"{name} ({r.label}): accuracy {r.accuracy:.4f}, end-to-end equivariance error "
                         f"{r.equivariance:.4f}")
            lines.append(f"  {'layer':>5} {'weight':>8} {'random':>8} {'data':>8}  symmetric/antisymmetric/paired/unmatched")
            counts = r.actions.count_list()
            for l, (e, b, d) in enumerate(zip(r.actions.errors, r.actions.baseline, r.data_errors)):
                c = fmt(counts[l]) if l < len(counts) else "head"
                lines.append(f"  {l + 1:>5} {e:8.4f} {b:8.4f} {d:8.4f}  {c}")
            lines.append(f"  projection onto recovered actions: accuracy {p['accuracy_before']:.4f} -> "
                         f"{p['accuracy_after']:.4f} (random pairings: {p['accuracy_random']:.4f}); "
                         f"equivariance -> {p['equivariance_after']:.1e}")
    return "\n".join(lines)
