"""Conversions between the fused PE+MLP models and ordinary `nn.Sequential(pe, Linear, act, ...,
Linear)` models (pe a `symfast.nn.FourierPE`), so a model trained here runs anywhere and a plain
PyTorch model gets the fused kernels. Activation names are those of the fused op
(`symfast.ops.fourier_mlp.ACTIVATIONS`); `ACTIVATION_MODULES` gives their nn.Module form.

Other pointwise activations without parameters (nn.GELU, nn.Softplus, nn.Sigmoid, ...) are kept as
the module itself: such models stack into an `Ensemble` (the readout's Gram observables read the
weights only), evaluate through the module in plain PyTorch, and convert back to `nn.Sequential`,
but have no fused form (`Ensemble.to_module` refuses them). "Pointwise" is the caller's promise:
a module that mixes features would make the evaluation wrong, not the readout.
"""
from __future__ import annotations

import copy

import torch
from torch import nn

from symfast.activations import ACTIVATION_TABLE, FUSED, Sine
from symfast.nn.encodings import FourierPE

__all__ = ["Sine", "ACTIVATION_MODULES", "parse_sequential", "stack_sequentials", "to_sequential",
           "activation_fn", "activation_label", "check_activation"]

# What parse_sequential says when the first module is not a FourierPE.
_NOT_FOURIER_PE = (
    "expected nn.Sequential(FourierPE, Linear, act, ..., Linear) with >= 1 hidden layer; a model with another "
    "library's Fourier encoding (NeRF's and nerfstudio's all sines first, then all cosines; tiny-cuda-nn's "
    "Frequency encoding) converts exactly with symfast.Ensemble.from_modules(models, shapes) or "
    "symfast.nn.read_layout(model) (symfast.nn.from_sin_then_cos(frequencies, mlp) for a sin-then-cos layout)")


# The nn.Module form of each activation the fused op implements (same names, same functions).
ACTIVATION_MODULES = {name: ACTIVATION_TABLE[name].module for name in FUSED}


def _act_name(mod: nn.Module):
    """The fused name of an activation module, else the module itself (a pointwise activation
    without parameters); ValueError for anything else."""
    for name, cls in ACTIVATION_MODULES.items():
        if type(mod) is cls:
            return name
    check_activation(mod)
    return mod


def check_activation(act) -> None:
    """ValueError unless act is a fused activation name or a parameter-free nn.Module (taken as pointwise)."""
    if isinstance(act, str):
        if act not in ACTIVATION_MODULES:
            raise ValueError(f"unknown activation {act!r}; choose from {sorted(ACTIVATION_MODULES)} "
                             "or pass a pointwise nn.Module")
        return
    if not isinstance(act, nn.Module) or isinstance(act, (nn.Linear, nn.Sequential, FourierPE)):
        raise ValueError(f"unsupported activation {type(act).__name__}; expected one of {sorted(ACTIVATION_MODULES)} "
                         "or a pointwise activation nn.Module (nn.GELU(), nn.Softplus(), ...)")
    if any(True for _ in act.parameters()):
        raise ValueError(f"activation {act!r} has parameters; only parameter-free pointwise activations are "
                         "supported")


def _act_key(act):
    return act if isinstance(act, str) else (type(act), repr(act))


def activation_label(act) -> str:
    """The activation's name: the fused name, or the module's repr (e.g. "GELU(approximate='none')")."""
    return act if isinstance(act, str) else repr(act)


def activation_fn(act):
    """The callable z -> act(z) for a fused name or an activation module."""
    return ACTIVATION_TABLE[act].torch_fn if isinstance(act, str) else act


def parse_sequential(seq: nn.Sequential):
    """(pe, [W [fan_in, fan_out]], [b [fan_out]], activation) from Sequential(pe, Linear, act, ..., Linear).

    The last Linear may have any number K of outputs. activation: the fused name, or the activation
    module itself for any other pointwise one."""
    mods = list(seq)
    if len(mods) < 4 or not isinstance(mods[0], FourierPE):
        raise ValueError(_NOT_FOURIER_PE)
    pe, rest = mods[0], mods[1:]
    linears, acts = rest[0::2], rest[1::2]
    if len(linears) != len(acts) + 1 or not all(isinstance(m, nn.Linear) for m in linears):
        raise ValueError("layers after the PE must alternate Linear, activation, ..., Linear")
    found = [_act_name(a) for a in acts]
    if len({_act_key(a) for a in found}) != 1:
        raise ValueError(f"all hidden activations must be the same, got {sorted({activation_label(a) for a in found})}")
    if linears[0].in_features != pe.dim:
        raise ValueError(f"the first Linear must take d = {pe.dim} features (the encoding's output), "
                         f"got {linears[0].in_features}")
    ws = [m.weight.detach().T.contiguous() for m in linears]
    bs = [(m.bias.detach() if m.bias is not None else m.weight.new_zeros(m.out_features)) for m in linears]
    return pe, ws, bs, found[0]


def stack_sequentials(seqs):
    """(pe, weights [B, fan_in, fan_out] list, biases [B, fan_out] list, activation) of
    same-architecture Sequential(pe, Linear, act, ..., Linear) models sharing one encoding."""
    seqs = list(seqs)
    if not seqs:
        raise ValueError("need at least one model")
    parsed = [parse_sequential(s) for s in seqs]
    pe, _, _, act = parsed[0]
    shapes = [[w.shape for w in p[1]] for p in parsed]
    if any(s != shapes[0] for s in shapes) or any(_act_key(p[3]) != _act_key(act) for p in parsed):
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
            mods.append(ACTIVATION_MODULES[activation]() if isinstance(activation, str) else copy.deepcopy(activation))
    return nn.Sequential(*mods)
