"""A stack of B trained PE+MLP neural fields: weights, config, losses, interop, I/O.

Weights are stored fan-in first, as the batched kernels use them:
weights[l]: [B, fan_in, fan_out], biases[l]: [B, fan_out]. Member b of the
paper's convention has first-layer matrix `W1 = weights[0][b].T` (`[H, d]`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import pandas as pd
import torch

from symfast.readout.encodings import FourierPE
from symfast.ops.fourier_mlp.reference import ACTIVATIONS, fourier_mlp

__all__ = ["Ensemble"]

_ACT_MODULES = {"relu": torch.nn.ReLU, "tanh": torch.nn.Tanh, "silu": torch.nn.SiLU}


@dataclass
class Ensemble:
    """B independent PE+MLP models sharing one encoding.

    Attributes:
        pe: the shared Fourier encoding.
        weights, biases: lists of [B, fan_in, fan_out] and [B, fan_out] tensors.
        activation: hidden activation name.
        shapes, seeds: per-member shape name and seed (length B).
        losses: [steps, B] training loss per step (float32; empty if imported).
        config: the training settings (see `symfast.fit_sdf`).
    """

    pe: FourierPE
    weights: list
    biases: list
    activation: str
    shapes: list
    seeds: list
    losses: torch.Tensor = field(default_factory=lambda: torch.zeros(0, 0))
    config: dict = field(default_factory=dict)

    def __post_init__(self):
        B = self.weights[0].shape[0]
        if len(self.weights) != len(self.biases):
            raise ValueError("weights and biases must have the same number of layers")
        if self.weights[0].shape[1] != self.pe.dim:
            raise ValueError(f"weights[0] must be [B, {self.pe.dim}, H] for this encoding, "
                             f"got {list(self.weights[0].shape)}")
        if self.weights[-1].shape[2] != 1:
            raise ValueError(f"the last layer must have one output, got {list(self.weights[-1].shape)}")
        if len(self.shapes) != B or len(self.seeds) != B:
            raise ValueError(f"shapes and seeds must have one entry per model (B = {B})")
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; choose from {sorted(ACTIVATIONS)}")

    # -- views --------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.weights[0].shape[0]

    @property
    def hidden(self) -> tuple:
        return tuple(w.shape[2] for w in self.weights[:-1])

    @property
    def members(self) -> pd.DataFrame:
        """One row per model: index, shape, seed, final training loss."""
        final = self.losses[-1].tolist() if self.losses.numel() else [float("nan")] * len(self)
        return pd.DataFrame({"index": range(len(self)), "shape": self.shapes, "seed": self.seeds,
                             "final_loss": final})

    def indices(self, shape) -> list[int]:
        """Member indices trained on `shape` (a Shape or its name)."""
        name = getattr(shape, "name", shape)
        idx = [i for i, s in enumerate(self.shapes) if s == name]
        if not idx:
            raise ValueError(f"no member trained on shape {name!r}; have {sorted(set(self.shapes))}")
        return idx

    def subset(self, idx) -> "Ensemble":
        idx = list(idx)
        t = torch.as_tensor(idx, dtype=torch.long)
        return Ensemble(self.pe, [w[t] for w in self.weights], [b[t] for b in self.biases], self.activation,
                        [self.shapes[i] for i in idx], [self.seeds[i] for i in idx],
                        self.losses[:, t] if self.losses.numel() else self.losses, dict(self.config))

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Evaluate every member at x: [N, 2] (shared) or [B, N, 2] -> [B, N]."""
        x = torch.as_tensor(x, dtype=self.weights[0].dtype)
        return fourier_mlp(x, self.pe.frequencies, self.pe.phases, self.weights, self.biases, self.activation)

    # -- interop with ordinary PyTorch ---------------------------------------------------------
    def to_sequential(self, i: int) -> torch.nn.Sequential:
        """Member i as nn.Sequential(FourierPE, Linear, act, ..., Linear)."""
        if not 0 <= i < len(self):
            raise IndexError(f"member {i} out of range for an ensemble of {len(self)}")
        if self.activation not in _ACT_MODULES:
            raise ValueError(f"activation {self.activation!r} has no torch.nn module to export to")
        layers: list[torch.nn.Module] = [FourierPE.from_config(self.pe.config())]
        for l, (w, b) in enumerate(zip(self.weights, self.biases)):
            lin = torch.nn.Linear(w.shape[1], w.shape[2], dtype=w.dtype)
            with torch.no_grad():
                lin.weight.copy_(w[i].T)
                lin.bias.copy_(b[i])
            layers.append(lin)
            if l < len(self.weights) - 1:
                layers.append(_ACT_MODULES[self.activation]())
        return torch.nn.Sequential(*layers)

    @staticmethod
    def from_sequentials(models, shapes, seeds=None) -> "Ensemble":
        """Stack nn.Sequential(FourierPE, Linear, act, ..., Linear) models (same encoding and
        architecture) into an Ensemble; `shapes` names each model's target."""
        models = list(models)
        if not models:
            raise ValueError("need at least one model")
        pe = models[0][0]
        if not isinstance(pe, FourierPE):
            raise ValueError("each model must start with a symfast FourierPE module")
        linears = [[m for m in seq if isinstance(m, torch.nn.Linear)] for seq in models]
        acts = {type(m) for seq in models for m in seq if not isinstance(m, (torch.nn.Linear, FourierPE))}
        names = [k for k, v in _ACT_MODULES.items() if {v} == acts]
        if len(names) != 1:
            raise ValueError(f"models must use one activation among {sorted(_ACT_MODULES)}, got {acts}")
        for seq, lin in zip(models, linears):
            if not torch.equal(seq[0].frequencies, pe.frequencies) or not torch.equal(seq[0].phases, pe.phases):
                raise ValueError("all models must share the same encoding")
            if [l.weight.shape for l in lin] != [l.weight.shape for l in linears[0]]:
                raise ValueError("all models must share the same architecture")
        weights = [torch.stack([lin[l].weight.detach().T for lin in linears]) for l in range(len(linears[0]))]
        biases = [torch.stack([lin[l].bias.detach() for lin in linears]) for l in range(len(linears[0]))]
        seeds = list(range(len(models))) if seeds is None else list(seeds)
        shapes = [getattr(s, "name", s) for s in shapes]
        return Ensemble(pe, weights, biases, names[0], shapes, seeds)

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path) -> None:
        """Write the ensemble (weights, encoding, config, losses) atomically with torch.save."""
        path = os.fspath(path)
        tmp = f"{path}.tmp-{os.getpid()}"
        torch.save({"format": "symfast.Ensemble/1", "pe": self.pe.config(), "weights": self.weights,
                    "biases": self.biases, "activation": self.activation, "shapes": self.shapes,
                    "seeds": self.seeds, "losses": self.losses, "config": self.config}, tmp)
        os.replace(tmp, path)

    @staticmethod
    def load(path) -> "Ensemble":
        """Read an ensemble written by `save`; rejects files with NaN/Inf weights."""
        d = torch.load(os.fspath(path), map_location="cpu", weights_only=True)
        if not isinstance(d, dict) or d.get("format") != "symfast.Ensemble/1":
            raise ValueError(f"{path} is not a symfast ensemble file")
        for kind in ("weights", "biases"):
            for l, t in enumerate(d[kind]):
                if not torch.isfinite(t).all():
                    raise ValueError(f"{path}: {kind}[{l}] contains NaN or Inf")
        return Ensemble(FourierPE.from_config(d["pe"]), d["weights"], d["biases"], d["activation"],
                        d["shapes"], d["seeds"], d["losses"], d["config"])
