"""nn.Modules over the fused PE+MLP op: one model (`FourierMLP`) or B at once (`FourierMLPEnsemble`).

Both convert to and from an ordinary `nn.Sequential(pe, Linear(d, H), act, ..., Linear(H, 1))`
(pe a `symfast.FourierPE`), so a model trained here runs anywhere, and a plain PyTorch
model gets the fused kernels by `FourierMLP.from_sequential(seq)`.
"""
from __future__ import annotations

import copy
import math

import torch
from torch import nn

from symfast.readout.encodings import FourierPE
from symfast.ops.fourier_mlp import ACTIVATIONS, fourier_mlp, fourier_mlp_train_step

__all__ = ["FourierMLP", "FourierMLPEnsemble", "Sine"]


class Sine(nn.Module):
    """sin(x) as a module (the "sine" activation in nn.Sequential form)."""

    def forward(self, x):
        return torch.sin(x)


_ACT_MODULES = {"relu": nn.ReLU, "tanh": nn.Tanh, "silu": nn.SiLU, "sine": Sine}


def _act_name(mod: nn.Module) -> str:
    for name, cls in _ACT_MODULES.items():
        if type(mod) is cls:
            return name
    raise ValueError(f"unsupported activation module {type(mod).__name__}; use one of "
                     f"{[c.__name__ for c in _ACT_MODULES.values()]}")


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


def _to_sequential(pe, ws, bs, activation) -> nn.Sequential:
    mods: list[nn.Module] = [copy.deepcopy(pe)]
    for l, (w, b) in enumerate(zip(ws, bs)):
        lin = nn.Linear(w.shape[0], w.shape[1], dtype=w.dtype, device=w.device)
        with torch.no_grad():
            lin.weight.copy_(w.T)
            lin.bias.copy_(b)
        mods.append(lin)
        if l < len(ws) - 1:
            mods.append(_ACT_MODULES[activation]())
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

    Parameters: weights[l]: [B, fan_in, fan_out], biases[l]: [B, fan_out].
    """

    def __init__(self, pe: FourierPE, hidden=(64, 64), num_models: int = 1, activation: str = "relu",
                 backend: str = "auto", dtype=torch.float32, device=None, generator=None):
        super().__init__()
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

    def _pe_args(self, x):
        return self.pe.frequencies.to(x.device, x.dtype), self.pe.phases.to(x.device, x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [B, N, 2] (per model) or [N, 2] (shared) -> [B, N]."""
        x = x.contiguous()
        f, p = self._pe_args(x)
        return fourier_mlp(x, f, p, list(self.weights), list(self.biases), self.activation, self.backend)

    def train_step(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Fused forward + per-model MSE + backward; sets p.grad (replacing it) and returns loss [B].

        x: [B, N, 2] or [N, 2]; targets: [B, N]. Follow with optimizer.step().
        """
        x, targets = x.contiguous(), targets.contiguous()
        f, p = self._pe_args(x)
        loss, dw, db = fourier_mlp_train_step(x, targets, f, p, list(self.weights), list(self.biases),
                                              self.activation, self.backend)
        for param, g in zip(list(self.weights) + list(self.biases), dw + db):
            param.grad = g
        return loss

    def __getitem__(self, i: int) -> "FourierMLP":
        """Model i as a standalone FourierMLP (a copy)."""
        return FourierMLP._from_params(self.pe, [w[i].detach() for w in self.weights],
                                       [b[i].detach() for b in self.biases], self.activation, self.backend)

    def to_sequential(self, i: int) -> nn.Sequential:
        """Model i as nn.Sequential(pe, Linear, act, ..., Linear) (output [..., 1])."""
        return _to_sequential(self.pe, [w[i].detach() for w in self.weights],
                              [b[i].detach() for b in self.biases], self.activation)

    @classmethod
    def from_sequentials(cls, seqs, backend: str = "auto") -> "FourierMLPEnsemble":
        """Stack same-architecture nn.Sequential(pe, Linear, act, ..., Linear) models into one ensemble."""
        parsed = [_parse_sequential(s) for s in seqs]
        if not parsed:
            raise ValueError("need at least one model")
        pe, _, _, act = parsed[0]
        shapes = [[w.shape for w in p[1]] for p in parsed]
        if any(s != shapes[0] for s in shapes) or any(p[3] != act for p in parsed):
            raise ValueError("all models must have the same layer shapes and activation")
        if any(not torch.equal(p[0].frequencies, pe.frequencies) or not torch.equal(p[0].phases, pe.phases)
               for p in parsed):
            raise ValueError("all models must share the same Fourier encoding")
        ens = cls(pe, [w.shape[1] for w in parsed[0][1][:-1]], len(parsed), act, backend,
                  dtype=parsed[0][1][0].dtype, device=parsed[0][1][0].device)
        with torch.no_grad():
            for l in range(len(ens.weights)):
                ens.weights[l].copy_(torch.stack([p[1][l] for p in parsed]))
                ens.biases[l].copy_(torch.stack([p[2][l] for p in parsed]))
        return ens


class FourierMLP(FourierMLPEnsemble):
    """One PE + MLP model on the fused kernels: x [..., 2] -> [...] (an ensemble of size 1)."""

    def __init__(self, pe: FourierPE, hidden=(64, 64), activation: str = "relu", backend: str = "auto",
                 dtype=torch.float32, device=None, generator=None):
        super().__init__(pe, hidden, 1, activation, backend, dtype, device, generator)

    @classmethod
    def _from_params(cls, pe, ws, bs, activation, backend):
        m = cls(pe, [w.shape[1] for w in ws[:-1]], activation, backend, dtype=ws[0].dtype, device=ws[0].device)
        with torch.no_grad():
            for l, (w, b) in enumerate(zip(ws, bs)):
                m.weights[l].copy_(w[None])
                m.biases[l].copy_(b[None])
        return m

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: [..., 2] -> [...]."""
        lead = x.shape[:-1]
        return super().forward(x.reshape(-1, 2))[0].reshape(lead)

    def train_step(self, x: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """x: [N, 2], targets: [N] -> scalar MSE; sets p.grad."""
        return super().train_step(x.reshape(-1, 2), targets.reshape(1, -1))[0]

    def to_sequential(self, i: int = 0) -> nn.Sequential:
        return super().to_sequential(i)

    @classmethod
    def from_sequential(cls, seq: nn.Sequential, backend: str = "auto") -> "FourierMLP":
        pe, ws, bs, act = _parse_sequential(seq)
        return cls._from_params(pe, ws, bs, act, backend)
