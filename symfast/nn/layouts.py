"""Other libraries' Fourier encodings read as a symfast `FourierPE`, exactly.

A Fourier encoding computes sin and cos of u = x @ W^T + b; libraries differ only in the order of
those 2m features (and in how W is built). symfast interleaves them per frequency,
[sin u_0, cos u_0, sin u_1, ...]. The layouts read here:

- "symfast": the model starts with a `symfast.nn.FourierPE` (nothing to convert).
- "sin_then_cos": all sines, then all cosines (NeRF's and nerfstudio's `NeRFEncoding`, without
  include_input): frequencies 2 pi 2^e_f e_i, feature k = i F + f (`nerf_frequencies`).
- "tcnn_frequency": tiny-cuda-nn's "Frequency" encoding: per input dimension i, per octave f,
  sin then cos of pi 2^f x_i (interleaved, `tcnn_frequencies`), then any padding features of value 1
  (folded into the first layer's bias).
- "interleaved": another module with the frequencies you pass, laid out as symfast does.

`read_layout` finds the layout by evaluating the encoding at probe points and comparing with each
candidate, so a model converts only when its features are (to the encoding's precision) the ones
the layout predicts; the converted model computes the same function with the first Linear's
columns permuted. Encodings that also pass x through (include_input) have no exact FourierPE form.
"""
from __future__ import annotations

import copy
import logging

import torch
from torch import nn

from symfast.nn.encodings import FourierPE
from symfast.nn.sequential import parse_sequential

__all__ = ["LAYOUTS", "nerf_frequencies", "tcnn_frequencies", "from_sin_then_cos", "read_layout"]

LOG = logging.getLogger("symfast.nn")

# name -> what it is (the error for an unrecognised encoding lists these)
LAYOUTS = {
    "symfast": "a symfast.nn.FourierPE (sin, cos interleaved per frequency)",
    "sin_then_cos": "all sines, then all cosines (NeRF; nerfstudio's NeRFEncoding with include_input=False)",
    "tcnn_frequency": "tiny-cuda-nn's Frequency encoding (per input dimension, per octave: sin, cos of "
                      "pi 2^f x_i; padding features of value 1)",
    "interleaved": "another module with frequencies= given, sin and cos interleaved per frequency",
}
_PROBES = 64  # points the encoding is evaluated at to tell the layouts apart


def nerf_frequencies(num_frequencies: int, min_freq_exp: float, max_freq_exp: float, in_dim: int = 3,
                     dtype=torch.float64) -> torch.Tensor:
    """The frequency vectors of a NeRF positional encoding (nerfstudio's `NeRFEncoding` without
    include_input): feature k of the sine block is sin(2 pi 2^e_f x_i) with k = i F + f, the
    exponents e_f = linspace(min_freq_exp, max_freq_exp, F), F = num_frequencies.

    Returns:
        [in_dim * F, in_dim] rows 2 pi 2^e_f e_i, in that order (for `from_sin_then_cos`).
    """
    if num_frequencies < 1 or in_dim not in (2, 3):
        raise ValueError(f"need num_frequencies >= 1 and in_dim 2 or 3, got {num_frequencies}, {in_dim}")
    freqs = 2.0 ** torch.linspace(min_freq_exp, max_freq_exp, num_frequencies, dtype=torch.float64)
    return _axis_octaves(2 * torch.pi * freqs, in_dim).to(dtype)


def tcnn_frequencies(n_frequencies: int, in_dim: int = 3, dtype=torch.float64) -> torch.Tensor:
    """The frequency vectors of tiny-cuda-nn's Frequency encoding, in its feature order: row
    i F + f is pi 2^f e_i (f = 0..F-1, F = n_frequencies); its features are sin, cos of each row
    in turn (symfast's interleaved order).

    Returns:
        [in_dim * F, in_dim].
    """
    if n_frequencies < 1 or in_dim not in (2, 3):
        raise ValueError(f"need n_frequencies >= 1 and in_dim 2 or 3, got {n_frequencies}, {in_dim}")
    return _axis_octaves(torch.pi * 2.0 ** torch.arange(n_frequencies, dtype=torch.float64), in_dim).to(dtype)


def _axis_octaves(scales: torch.Tensor, in_dim: int) -> torch.Tensor:
    """[in_dim * F, in_dim] rows scales[f] e_i, input dimension outer, scale inner."""
    eye = torch.eye(in_dim, dtype=torch.float64)
    return (eye[:, None, :] * scales[None, :, None]).reshape(in_dim * len(scales), in_dim)


def _order(layout: str, m: int) -> torch.Tensor:
    """[2m] symfast feature index of each of the layout's features (their column k is our order[k])."""
    if layout == "sin_then_cos":
        return torch.cat([2 * torch.arange(m), 2 * torch.arange(m) + 1])
    return torch.arange(2 * m)  # interleaved (symfast's, tcnn's)


def _first_linear(mlp, d: int, m: int, pad: int, layout: str):
    """(pe-ready copy of mlp) with the first Linear's columns in symfast's order and padding
    features (value 1) folded into its bias."""
    mods = list(copy.deepcopy(mlp))
    if not mods or not isinstance(mods[0], nn.Linear):
        raise ValueError("the layers after the encoding must be nn.Sequential(Linear, act, ..., Linear)")
    first = mods[0]
    if first.in_features != d:
        need = f"2m = {2 * m}" if not pad else f"{d} (2m = {2 * m} and {pad} padding)"
        raise ValueError(f"the first Linear must take {need} features (m = {m} frequencies; {LAYOUTS[layout]}), "
                         f"got {first.in_features}; an encoding that also passes x through (include_input) has "
                         "no exact FourierPE form")
    w = first.weight.detach()
    new = nn.Linear(2 * m, first.out_features, bias=True, dtype=w.dtype, device=w.device)
    with torch.no_grad():
        new.weight[:, _order(layout, m)] = w[:, :2 * m]
        bias = first.bias.detach() if first.bias is not None else torch.zeros_like(new.bias)
        new.bias.copy_(bias + w[:, 2 * m:].sum(1))
    return [new, *mods[1:]]


def from_sin_then_cos(frequencies, mlp: nn.Sequential, phases=None, name: str = "sin_then_cos") -> nn.Sequential:
    """An exact symfast model from one whose encoding lays out all sines, then all cosines.

    The model y = mlp([sin(u) | cos(u)]), u = x @ frequencies^T + phases (NeRF's layout; symfast
    interleaves sin and cos per frequency), becomes nn.Sequential(FourierPE, Linear, act, ...,
    Linear) with the first Linear's input columns permuted to symfast's order: the same function,
    now readable by `symfast.readout` and trainable on the fused kernels.

    Args:
        frequencies: [m, D] the frequency vector of each sine (column j) and cosine (column m + j);
            for a NeRF encoding, `nerf_frequencies(...)`.
        mlp: nn.Sequential(Linear(2m, ...), act, ..., Linear): the layers after the encoding (copied).
        phases: [m] phases (default zeros; a cosine written as sin(u + pi/2) has phase 0 here).
        name: the encoding's name in tables.

    Returns:
        nn.Sequential(FourierPE, Linear, act, ..., Linear).
    """
    pe = FourierPE(frequencies, phases, name=name)
    seq = nn.Sequential(pe, *_first_linear(mlp, pe.dim, pe.dim // 2, 0, "sin_then_cos"))
    parse_sequential(seq)  # the rest must alternate Linear / activation, as any symfast model
    return seq


def _candidates(enc, frequencies, phases):
    """(layout, frequencies [m, D], phases or None, padding features) the encoding may be, from
    what it says about itself (nerfstudio's and tiny-cuda-nn's attributes) and frequencies=."""
    out = []
    if frequencies is not None:
        f = torch.as_tensor(frequencies, dtype=torch.float64)
        out += [("interleaved", f, phases, 0), ("sin_then_cos", f, phases, 0)]
    if all(hasattr(enc, a) for a in ("num_frequencies", "min_freq", "max_freq", "in_dim")):  # nerfstudio
        if getattr(enc, "include_input", False):
            raise ValueError("this NeRF encoding has include_input=True: it passes x through beside the sines and "
                             "cosines, which no FourierPE computes; build it with include_input=False")
        out.append(("sin_then_cos", nerf_frequencies(int(enc.num_frequencies), float(enc.min_freq),
                                                     float(enc.max_freq), int(enc.in_dim)), None, 0))
    cfg = getattr(enc, "encoding_config", None)
    if isinstance(cfg, dict) and cfg.get("otype") == "Frequency":  # tiny-cuda-nn
        D = int(cfg.get("n_dims_to_encode", getattr(enc, "n_input_dims", 0)))
        f = tcnn_frequencies(int(cfg["n_frequencies"]), D)
        pad = int(getattr(enc, "n_output_dims", 2 * len(f))) - 2 * len(f)
        out.append(("tcnn_frequency", f, None, pad))
    return out


def _probe(enc, D: int) -> tuple[torch.Tensor, torch.Tensor, float, float]:
    """(x [N, D] float64, enc(x) as float64 on the CPU, the epsilons of the output's and the points'
    dtypes). The points are float32 values, given as float32 first (what most encodings compute in,
    their frequencies rounded to float32 too), as float64 to an encoding that refuses float32."""
    x = (torch.rand(_PROBES, D, generator=torch.Generator().manual_seed(0)) * 2 - 1).double()
    ref = next(iter(enc.parameters()), None)
    if ref is None:
        ref = next(iter(enc.buffers()), None)
    device = ref.device if ref is not None else torch.device("cpu")
    with torch.no_grad():
        try:
            y, given = enc(x.float().to(device)), torch.float32
        except (RuntimeError, TypeError):  # an encoding with float64 frequencies takes float64 points
            y, given = enc(x.to(device)), torch.float64
    if not isinstance(y, torch.Tensor) or y.ndim != 2 or y.shape[0] != _PROBES:
        raise ValueError(f"the encoding must map [N, {D}] points to [N, d] features")
    return x, y.detach().to("cpu", torch.float64), torch.finfo(y.dtype).eps, torch.finfo(given).eps


def _matches(x, y, layout, freqs, phases, pad) -> float:
    """The largest difference between the encoding's features and the layout's prediction (inf when
    the feature count or the dimension differs)."""
    m = freqs.shape[0]
    if freqs.shape[1] != x.shape[1] or y.shape[1] != 2 * m + pad or pad < 0:
        return float("inf")
    u = x @ freqs.T + (0 if phases is None else torch.as_tensor(phases, dtype=torch.float64))
    ours = torch.stack([torch.sin(u), torch.cos(u)], -1).reshape(len(x), 2 * m)
    diff = (y[:, :2 * m] - ours[:, _order(layout, m)]).abs().max().item()
    return max(diff, (y[:, 2 * m:] - 1).abs().max().item() if pad else 0.0)


def read_layout(model, frequencies=None, phases=None, name: str | None = None) -> tuple[nn.Sequential, str]:
    """(nn.Sequential(FourierPE, Linear, act, ..., Linear), layout name) computing the same function as
    `model`, whose encoding is any of `LAYOUTS`.

    Args:
        model: nn.Sequential(encoding, Linear, act, ..., Linear), or a pair (encoding, mlp).
        frequencies, phases: [m, D] / [m] for an encoding that does not say its own (a module
            other than nerfstudio's NeRFEncoding or tiny-cuda-nn's Frequency encoding).
        name: the encoding's name in tables (default: the layout's).

    Raises:
        ValueError: the encoding's features match none of the layouts (the message lists them).
    """
    if isinstance(model, (tuple, list)) and len(model) == 2:
        enc, mlp = model
    elif isinstance(model, nn.Sequential) and len(model) > 1:
        enc, mlp = model[0], nn.Sequential(*list(model)[1:])
    else:
        raise ValueError("expected nn.Sequential(encoding, Linear, act, ..., Linear) or a pair (encoding, mlp)")
    if isinstance(enc, FourierPE):
        seq = nn.Sequential(enc, *mlp)
        parse_sequential(seq)
        return seq, "symfast"
    if not isinstance(enc, nn.Module):
        raise ValueError(f"the encoding must be an nn.Module, got {type(enc).__name__}")
    expected = "; ".join(f"{k}: {v}" for k, v in LAYOUTS.items())
    cands = _candidates(enc, frequencies, phases)
    if not cands:
        raise ValueError(f"cannot tell the frequencies of {type(enc).__name__}; expected one of {expected} "
                         "(for another module pass frequencies= [m, D])")
    x, y, eps_out, eps_in = _probe(enc, cands[0][1].shape[1])
    misses = []
    for layout, freqs, ph, pad in cands:
        # the output's rounding (no finer than the points'), plus the argument's w.x in the points' dtype
        tol = 4 * max(eps_out, eps_in) + 8 * eps_in * max(1.0, freqs.abs().max().item() * x.abs().max().item())
        err = _matches(x, y, layout, freqs, ph, pad)
        if err <= tol:
            pe = FourierPE(freqs, ph, name=name or layout)
            seq = nn.Sequential(pe, *_first_linear(mlp, 2 * len(freqs) + pad, len(freqs), pad, layout))
            parse_sequential(seq)
            LOG.info("symfast.nn: %s read as layout %r (%s)", type(enc).__name__, layout, LAYOUTS[layout])
            return seq, layout
        misses.append(f"{layout}: {'feature count differs' if err == float('inf') else f'off by {err:.2g}'}")
    raise ValueError(f"the features of {type(enc).__name__} ([N, {y.shape[1]}]) match no layout symfast reads "
                     f"({', '.join(misses)}); expected one of {expected}")
