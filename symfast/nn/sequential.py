"""Conversions between the fused PE+MLP models and ordinary `nn.Sequential(pe, Linear, act, ...,
Linear)` models (pe a `symfast.nn.FourierPE`), so a model trained here runs anywhere and a plain
PyTorch model gets the fused kernels. Activation names are those of the fused op
(`symfast.ops.fourier_mlp.ACTIVATIONS`); `ACTIVATION_MODULES` gives their nn.Module form.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from symfast.activations import ACTIVATION_TABLE, FUSED, Sine
from symfast.nn.encodings import FourierPE

__all__ = ["Sine", "ACTIVATION_MODULES", "parse_sequential", "stack_sequentials", "to_sequential"]


# The nn.Module form of each activation the fused op implements (same names, same functions).
ACTIVATION_MODULES = {name: ACTIVATION_TABLE[name].module for name in FUSED}


def _act_name(mod: nn.Module) -> str:
    for name, cls in ACTIVATION_MODULES.items():
        if type(mod) is cls:
            return name
    raise ValueError(f"unsupported activation module {type(mod).__name__}; use one of "
                     f"{[c.__name__ for c in ACTIVATION_MODULES.values()]}")


def parse_sequential(seq: nn.Sequential):
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


def stack_sequentials(seqs):
    """(pe, weights [B, fan_in, fan_out] list, biases [B, fan_out] list, activation) of
    same-architecture Sequential(pe, Linear, act, ..., Linear) models sharing one encoding."""
    seqs = list(seqs)
    if not seqs:
        raise ValueError("need at least one model")
    parsed = [parse_sequential(s) for s in seqs]
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


def to_sequential(pe, ws, bs, activation) -> nn.Sequential:
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
