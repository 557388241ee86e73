"""nn.Modules over the fused PE+MLP op: one model (`FourierMLP`) or B at once (`FourierMLPEnsemble`).

These are the trainable form of `symfast.Ensemble`, the package's one PE+MLP data type
(what `fit_sdf` returns, `readout` reads and `save`/`load` store): `Ensemble.to_module()`
and `module.to_ensemble()` convert exactly (same tensors, same activation; the module
keeps each model's `shapes` and `seeds`, so `symfast.readout(module)` works once it knows
its shapes). Both also convert to and from an ordinary
`nn.Sequential(pe, Linear(d, H), act, ..., Linear(H, 1))` (pe a `symfast.FourierPE`), so a
model trained here runs anywhere, and a plain PyTorch model gets the fused kernels by
`FourierMLP.from_sequential(seq)`. Activation names are those of
`symfast.ops.fourier_mlp.reference.ACTIVATIONS`; `ACTIVATION_MODULES` gives their
nn.Module form for Sequential models.
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

from symfast.readout.encodings import FourierPE
from symfast.ops.fourier_mlp import fourier_mlp, fourier_mlp_train_step
from symfast.ops.fourier_mlp.reference import ACTIVATIONS

__all__ = ["FourierMLP", "FourierMLPEnsemble", "Sine", "ACTIVATION_MODULES"]


class Sine(nn.Module):
    """sin(x) as a module (the "sine" activation in nn.Sequential form)."""

    def forward(self, x):
        return torch.sin(x)


# The nn.Module form of each activation in ACTIVATIONS (same names, same functions).
ACTIVATION_MODULES = {"relu": nn.ReLU, "tanh": nn.Tanh, "silu": nn.SiLU, "sine": Sine}
assert set(ACTIVATION_MODULES) == set(ACTIVATIONS), "every activation needs its nn.Module form"


def _act_name(mod: nn.Module) -> str:
    for name, cls in ACTIVATION_MODULES.items():
        if type(mod) is cls:
            return name
    raise ValueError(f"unsupported activation module {type(mod).__name__}; use one of "
                     f"{[c.__name__ for c in ACTIVATION_MODULES.values()]}")


def _parse_sequential(seq: nn.Sequential):
    """(pe, [W [fan_in, fan_out]], [b [fan_out]], activation) from Sequential(pe, Linear, act, ..., Linear)."""
    mods = list(seq)
    if len(mods) < 4 or not isinstance(mods[0], FourierPE):
        raise ValueError("expected nn.Sequential(FourierPE, Linear, act, ..., Linear) with >= 1 hidden layer")
    pe, rest = mods[0], mods[1:]
    linears, acts = rest[0::2], rest[1::2]
    if len(linears) != len(acts) + 1 or not all(isinstance(m, nn.Linear) for m in linears):
        raise ValueError("layers after the PE must alternate Linear, activation, ..., Linear")
    names = {_act_name(a) for a in acts}
    if len(names) != 1:
        raise ValueError(f"all hidden activations must be the same, got {sorted(names)}")
    if linears[-1].out_features != 1 or linears[0].in_features != pe.dim:
        raise ValueError(f"first Linear must take d = {pe.dim} features and the last give 1 output")
    ws = [m.weight.detach().T.contiguous() for m in linears]
    bs = [(m.bias.detach() if m.bias is not None else m.weight.new_zeros(m.out_features)) for m in linears]
    return pe, ws, bs, names.pop()


def _stack_sequentials(seqs):
    """(pe, weights [B, fan_in, fan_out] list, biases [B, fan_out] list, activation) of
    same-architecture Sequential(pe, Linear, act, ..., Linear) models sharing one encoding."""
    seqs = list(seqs)
    if not seqs:
        raise ValueError("need at least one model")
    parsed = [_parse_sequential(s) for s in seqs]
    pe, _, _, act = parsed[0]
    shapes = [[w.shape for w in p[1]] for p in parsed]
    if any(s != shapes[0] for s in shapes) or any(p[3] != act for p in parsed):
        raise ValueError("all models must have the same layer shapes and activation")
    if any(not torch.equal(p[0].frequencies, pe.frequencies) or not torch.equal(p[0].phases, pe.phases)
           for p in parsed):
        raise ValueError("all models must share the same Fourier encoding")
    L = len(parsed[0][1])
    return (pe, [torch.stack([p[1][l] for p in parsed]) for l in range(L)],
            [torch.stack([p[2][l] for p in parsed]) for l in range(L)], act)


def _to_sequential(pe, ws, bs, activation) -> nn.Sequential:
    """nn.Sequential(pe copy, Linear, act, ..., Linear) from one model's ws [fan_in, fan_out], bs [fan_out]."""
    mods: list[nn.Module] = [copy.deepcopy(pe)]
    for l, (w, b) in enumerate(zip(ws, bs)):
        lin = nn.Linear(w.shape[0], w.shape[1], dtype=w.dtype, device=w.device)
        with torch.no_grad():
            lin.weight.copy_(w.detach().T)
            lin.bias.copy_(b.detach())
        mods.append(lin)
        if l < len(ws) - 1:
            mods.append(ACTIVATION_MODULES[activation]())
    return nn.Sequential(*mods)


class FourierMLPEnsemble(nn.Module):
    """B independent PE + MLP models trained and evaluated together by the fused kernels.

    Args:
        pe: the Fourier encoding shared by all models (d = pe.dim features).
        hidden: hidden widths, e.g. (64, 64) for d -> 64 -> 64 -> 1.
        num_models: B.
        activation: "relu", "tanh", "silu" or "sine".
        backend: "auto", "cpu", "triton" or "reference" (see `symfast.fourier_mlp`).
        dtype, device: of the parameters. Initialised like nn.Linear (U(+-1/sqrt(fan_in))).
        shapes, seeds: optional, the Shape each model is fitted to and its seed (length B),
            carried into `to_ensemble()` (and so into `symfast.readout(module)`).

    Parameters: weights[l]: [B, fan_in, fan_out], biases[l]: [B, fan_out].
    """

    def __init__(self, pe: FourierPE, hidden=(64, 64), num_models: int = 1, activation: str = "relu",
                 backend: str = "auto", dtype=torch.float32, device=None, generator=None,
                 shapes=None, seeds=None):
        super().__init__()
        self.shapes = None if shapes is None else list(shapes)
        self.seeds = None if seeds is None else list(seeds)
        for name, v in (("shapes", self.shapes), ("seeds", self.seeds)):
            if v is not None and len(v) != num_models:
                raise ValueError(f"{name} must have one entry per model ({num_models}), got {len(v)}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"unsupported activation {activation!r}; choose from {list(ACTIVATIONS)}")
        if not isinstance(pe, FourierPE):
            raise ValueError(f"pe must be a symfast FourierPE, got {type(pe).__name__}")
        dims = [pe.dim, *[int(h) for h in hidden], 1]
        if len(dims) < 3 or min(dims) < 1 or num_models < 1:
            raise ValueError(f"need >= 1 hidden layer of positive width and num_models >= 1, got {hidden}")
        self.pe, self.activation, self.backend = pe, activation, backend
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for a, b in zip(dims[:-1], dims[1:]):
            bound = 1.0 / math.sqrt(a)
            w = (torch.rand(num_models, a, b, generator=generator, dtype=dtype) * 2 - 1) * bound
            bb = (torch.rand(num_models, b, generator=generator, dtype=dtype) * 2 - 1) * bound
            self.weights.append(nn.Parameter(w.to(device)))
            self.biases.append(nn.Parameter(bb.to(device)))

    @property
    def num_models(self) -> int:
        return self.weights[0].shape[0]

    @classmethod
    def from_tensors(cls, pe, weights, biases, activation: str = "relu", backend: str = "auto",
                     shapes=None, seeds=None) -> "FourierMLPEnsemble":
        """A module holding copies of weights[l]: [B, fan_in, fan_out] and biases[l]: [B, fan_out]."""
        ws, bs = list(weights), list(biases)
        m = cls.__new__(cls)
        FourierMLPEnsemble.__init__(m, copy.deepcopy(pe), [w.shape[2] for w in ws[:-1]], ws[0].shape[0], activation,
                                    backend, dtype=ws[0].dtype, device=ws[0].device, shapes=shapes, seeds=seeds)
        with torch.no_grad():
            for l, (w, b) in enumerate(zip(ws, bs)):
                if m.weights[l].shape != w.shape or m.biases[l].shape != b.shape:
                    raise ValueError(f"layer {l}: weights {list(w.shape)} / biases {list(b.shape)} do not chain")
                m.weights[l].copy_(w)
                m.biases[l].copy_(b)
        return m

    def to_ensemble(self, shapes=None, seeds=None):
        """This module as a `symfast.Ensemble` (copies); shapes/seeds default to the module's."""
        from symfast.readout.ensemble import Ensemble

        return Ensemble.from_module(self, shapes, seeds)

    def _pe_args(self, x):
        return self.pe.frequencies.to(x.device, x.dtype), self.pe.phases.to(x.device, x.dtype)

    def _as_input(self, x, name: str = "x") -> torch.Tensor:
        """Tensors pass through; numpy arrays and lists become tensors of the parameters' dtype/device."""
        if not isinstance(x, torch.Tensor):
            try:
                x = torch.as_tensor(x, dtype=self.weights[0].dtype, device=self.weights[0].device)
            except (TypeError, ValueError, RuntimeError) as e:
                raise TypeError(f"{name} must be a tensor or numeric array, got {type(x).__name__}: {e}") from None
        return x.contiguous()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, N, 2] (per model) or [N, 2] (shared) -> [B, N]."""
        x = self._as_input(x)
        f, p = self._pe_args(x)
        return fourier_mlp(x, f, p, list(self.weights), list(self.biases), self.activation, self.backend)

    def train_step(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Fused forward + per-model MSE + backward; sets p.grad (replacing it) and returns loss [B].

        x: [B, N, 2] or [N, 2]; targets: [B, N]. Follow with optimizer.step().
        """
        x, targets = self._as_input(x), self._as_input(targets, "targets")
        f, p = self._pe_args(x)
        loss, dw, db = fourier_mlp_train_step(x, targets, f, p, list(self.weights), list(self.biases),
                                              self.activation, self.backend)
        for param, g in zip(list(self.weights) + list(self.biases), dw + db):
            param.grad = g
        return loss

    def __getitem__(self, i: int) -> "FourierMLP":
        """Model i as a standalone FourierMLP (a copy, with its shape and seed if known)."""
        m = FourierMLP._from_params(self.pe, [w[i].detach() for w in self.weights],
                                    [b[i].detach() for b in self.biases], self.activation, self.backend)
        m.shapes = None if self.shapes is None else [self.shapes[i]]
        m.seeds = None if self.seeds is None else [self.seeds[i]]
        return m

    def to_sequential(self, i: int) -> nn.Sequential:
        """Model i as nn.Sequential(pe, Linear, act, ..., Linear) (output [..., 1])."""
        return _to_sequential(self.pe, [w[i].detach() for w in self.weights],
                              [b[i].detach() for b in self.biases], self.activation)

    @classmethod
    def from_sequentials(cls, seqs, backend: str = "auto") -> "FourierMLPEnsemble":
        """Stack same-architecture nn.Sequential(pe, Linear, act, ..., Linear) models into one ensemble."""
        pe, ws, bs, act = _stack_sequentials(seqs)
        return FourierMLPEnsemble.from_tensors(pe, ws, bs, act, backend)


class FourierMLP(FourierMLPEnsemble):
    """One PE + MLP model on the fused kernels: x [..., 2] -> [...] (an ensemble of size 1)."""

    def __init__(self, pe: FourierPE, hidden=(64, 64), activation: str = "relu", backend: str = "auto",
                 dtype=torch.float32, device=None, generator=None, shapes=None, seeds=None):
        super().__init__(pe, hidden, 1, activation, backend, dtype, device, generator, shapes, seeds)

    @classmethod
    def _from_params(cls, pe, ws, bs, activation, backend):
        """One model from ws[l]: [fan_in, fan_out], bs[l]: [fan_out]."""
        return cls.from_tensors(pe, [w[None] for w in ws], [b[None] for b in bs], activation, backend)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., D] (D: the encoding's input dimension, 2 or 3) -> [...]."""
        x = self._as_input(x)
        lead = x.shape[:-1]
        return super().forward(x.reshape(-1, x.shape[-1]))[0].reshape(lead)

    def train_step(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """x: [N, D], targets: [N] -> scalar MSE; sets p.grad."""
        x, targets = self._as_input(x), self._as_input(targets, "targets")
        return super().train_step(x.reshape(-1, x.shape[-1]), targets.reshape(1, -1))[0]

    def to_sequential(self, i: int = 0) -> nn.Sequential:
        return super().to_sequential(i)

    @classmethod
    def from_sequential(cls, seq: nn.Sequential, backend: str = "auto") -> "FourierMLP":
        pe, ws, bs, act = _parse_sequential(seq)
        return cls._from_params(pe, ws, bs, act, backend)
