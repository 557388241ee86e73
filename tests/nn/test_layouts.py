"""Other libraries' Fourier-encoding layouts read exactly: `Ensemble.from_modules` / `from_sequentials`
recognise symfast's, NeRF/nerfstudio's (all sines, then all cosines) and tiny-cuda-nn's Frequency
encoding, say which they found, and refuse anything else naming what they expected."""
from __future__ import annotations

import logging
import math

import pytest
import torch
from torch import nn

import symfast as sf


class NeRFEncodingLike(nn.Module):
    """nerfstudio's NeRFEncoding, written from its formula and attributes: x scaled by 2 pi, times
    2^linspace(min, max, F) per input dimension, then sin of [u, u + pi/2]."""

    def __init__(self, in_dim, num_frequencies, min_freq_exp, max_freq_exp, include_input=False, swap=False):
        super().__init__()
        self.in_dim, self.num_frequencies = in_dim, num_frequencies
        self.min_freq, self.max_freq, self.include_input, self.swap = min_freq_exp, max_freq_exp, include_input, swap

    def forward(self, x):
        freqs = 2.0 ** torch.linspace(self.min_freq, self.max_freq, self.num_frequencies, dtype=x.dtype)
        u = ((2 * math.pi * x)[..., None] * freqs).reshape(*x.shape[:-1], -1)  # [..., D * F], dimension outer
        parts = [u + math.pi / 2, u] if self.swap else [u, u + math.pi / 2]   # swap: cosines first (no layout)
        out = torch.sin(torch.cat(parts, dim=-1))
        return torch.cat([x, out], -1) if self.include_input else out


class TcnnFrequencyLike(nn.Module):
    """tiny-cuda-nn's Frequency encoding, from its documented feature order: feature j encodes input
    dimension j // (2F) at octave f = (j // 2) % F, sin(pi 2^f x + (j % 2) pi / 2); then padding
    features of value 1 up to n_output_dims."""

    def __init__(self, n_input_dims, n_frequencies, pad=0, dtype=torch.float64):
        super().__init__()
        self.n_input_dims, self.dtype = n_input_dims, dtype
        self.encoding_config = {"otype": "Frequency", "n_frequencies": n_frequencies}
        self.n_output_dims = 2 * n_input_dims * n_frequencies + pad

    def forward(self, x):
        F = self.encoding_config["n_frequencies"]
        j = torch.arange(2 * self.n_input_dims * F)
        arg = x[:, j // (2 * F)] * (2.0 ** ((j // 2) % F)).to(x.dtype) * math.pi + (j % 2).to(x.dtype) * (math.pi / 2)
        pad = x.new_ones(len(x), self.n_output_dims - len(j))
        return torch.cat([torch.sin(arg), pad], 1).to(self.dtype)


class Interleaved(nn.Module):
    """Any module computing sin, cos of x W^T + b per frequency (symfast's order), or sines then cosines."""

    def __init__(self, W, b, sin_then_cos=False):
        super().__init__()
        self.register_buffer("W", W)
        self.register_buffer("b", b)
        self.sin_then_cos = sin_then_cos

    def forward(self, x):
        u = x @ self.W.T + self.b
        if self.sin_then_cos:
            return torch.cat([torch.sin(u), torch.cos(u)], -1)
        return torch.stack([torch.sin(u), torch.cos(u)], -1).reshape(len(x), -1)


def mlp(d, seed, hidden=16):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(d, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                         nn.Linear(hidden, 1)).double()


def assert_exact(ens, models, in_dim):
    x = torch.rand(200, in_dim, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 2 - 1
    theirs = torch.stack([m(x)[:, 0] for m in models])
    torch.testing.assert_close(ens(x), theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("in_dim, F", [(2, 4), (3, 4), (2, 5)])  # F = 5: exponents 0, 0.75, ... (not integers)
def test_nerfstudio_layout_converts_exactly_and_says_so(in_dim, F, caplog):
    enc = NeRFEncodingLike(in_dim, F, 0.0, 3.0)
    models = [nn.Sequential(enc, *mlp(2 * in_dim * F, s)) for s in range(3)]
    with caplog.at_level(logging.INFO, logger="symfast.nn"):
        ens = sf.Ensemble.from_modules(models, ["square" if in_dim == 2 else "cube"] * 3)
    assert ens.config["layout"] == "sin_then_cos" and "'sin_then_cos'" in caplog.text
    assert ens.pe.name == "sin_then_cos" and len(ens) == 3
    assert_exact(ens, models, in_dim)
    assert torch.equal(models[0][1].weight, mlp(2 * in_dim * F, 0)[0].weight)  # the caller's model is not changed


@pytest.mark.parametrize("pad", [0, 8])
def test_tcnn_frequency_layout_converts_exactly_padding_folded_into_the_bias(pad):
    enc = TcnnFrequencyLike(3, 5, pad)
    models = [(enc, mlp(30 + pad, s)) for s in range(2)]  # (encoding, mlp) pairs
    ens = sf.Ensemble.from_sequentials([nn.Sequential(e, *m) for e, m in models], ["cube"] * 2)
    assert ens.config["layout"] == "tcnn_frequency" and ens.pe.dim == 30
    torch.testing.assert_close(ens.pe.frequencies, sf.nn.tcnn_frequencies(5, 3), rtol=0, atol=0)
    assert_exact(ens, [nn.Sequential(e, *m) for e, m in models], 3)
    assert sf.Ensemble.from_modules(models, ["cube"] * 2).config["layout"] == "tcnn_frequency"


def test_tcnn_half_precision_features_are_recognised_to_their_precision():
    enc = TcnnFrequencyLike(2, 3, dtype=torch.float16)
    seq, layout = sf.nn.read_layout(nn.Sequential(enc, *mlp(12, 0)))
    assert layout == "tcnn_frequency" and isinstance(seq[0], sf.FourierPE)


def test_symfast_and_given_frequency_layouts():
    pe = sf.DyadicAxisPE(3)
    ours = [nn.Sequential(pe, *mlp(pe.dim, s)) for s in range(2)]
    ens = sf.Ensemble.from_modules(ours, ["square"] * 2)
    assert ens.config["layout"] == "symfast"
    assert_exact(ens, ours, 2)
    W = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(2)) * 4
    b = torch.rand(5, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    for sin_then_cos, want in ((False, "interleaved"), (True, "sin_then_cos")):
        models = [nn.Sequential(Interleaved(W, b, sin_then_cos), *mlp(10, s)) for s in range(2)]
        ens = sf.Ensemble.from_modules(models, ["circle"] * 2, frequencies=W, phases=b)
        assert ens.config["layout"] == want
        assert_exact(ens, models, 2)


def test_unrecognised_layouts_are_refused_saying_what_was_expected():
    swapped = nn.Sequential(NeRFEncodingLike(2, 4, 0.0, 3.0, swap=True), *mlp(16, 0))
    with pytest.raises(ValueError, match=r"match no layout symfast reads \(sin_then_cos: off by .*expected one of "
                                         r"symfast: .*sin_then_cos: all sines, then all cosines.*tcnn_frequency"):
        sf.Ensemble.from_modules([swapped], ["square"])
    with pytest.raises(ValueError, match=r"cannot tell the frequencies of Tanh; expected one of .*pass frequencies="):
        sf.Ensemble.from_sequentials([nn.Sequential(nn.Tanh(), *mlp(16, 0))], ["square"])
    with pytest.raises(ValueError, match="include_input=True"):
        sf.nn.read_layout(nn.Sequential(NeRFEncodingLike(2, 4, 0.0, 3.0, include_input=True), *mlp(18, 0)))
    with pytest.raises(ValueError, match=r"first Linear must take 2m = 12 features"):
        sf.nn.read_layout((TcnnFrequencyLike(2, 3), mlp(10, 0)))


def test_the_readout_takes_nerfstudio_layout_models():
    enc = NeRFEncodingLike(2, 4, 0.0, 3.0)
    models = [nn.Sequential(enc, *mlp(16, s)) for s in range(3)]
    r = sf.readout(models, shapes=["square"] * 3, sweep=0, num_null=8)
    assert set(r.table["pe"]) == {"sin_then_cos"}
