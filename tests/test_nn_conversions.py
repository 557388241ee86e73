"""Models from other libraries' layouts: a NeRF (nerfstudio NeRFEncoding) field converts exactly."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import symfast as sf


class NeRFStyleEncoding(nn.Module):
    """nerfstudio's NeRFEncoding formula (include_input=False), written out: x scaled by 2 pi, times
    2^linspace(min, max, F) per input dimension, then sin of [u, u + pi/2] (all sines, then cosines)."""

    def __init__(self, in_dim, num_frequencies, min_freq_exp, max_freq_exp):
        super().__init__()
        self.freqs = 2.0 ** torch.linspace(min_freq_exp, max_freq_exp, num_frequencies, dtype=torch.float64)

    def forward(self, x):
        u = (2 * math.pi * x)[..., None] * self.freqs  # [..., D, F]
        u = u.reshape(*u.shape[:-2], -1)
        return torch.sin(torch.cat([u, u + math.pi / 2], dim=-1))


@pytest.mark.parametrize("in_dim", [2, 3])
def test_a_nerf_layout_field_converts_exactly_and_is_read_out(in_dim):
    torch.manual_seed(0)
    enc = NeRFStyleEncoding(in_dim, 4, 0.0, 3.0)
    mlp = nn.Sequential(nn.Linear(2 * in_dim * 4, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 1)).double()
    theirs = nn.Sequential(enc, *mlp)
    ours = sf.nn.from_sin_then_cos(sf.nn.nerf_frequencies(4, 0.0, 3.0, in_dim), mlp, name="nerf")
    x = torch.rand(257, in_dim, dtype=torch.float64) * 2 - 1
    torch.testing.assert_close(ours(x), theirs(x), rtol=1e-12, atol=1e-12)
    assert torch.equal(mlp[0].weight, theirs[1].weight)  # the caller's model is not changed
    if in_dim == 2:  # the readout takes it like any symfast model
        shapes = ["square"] * 3
        models = [sf.nn.from_sin_then_cos(sf.nn.nerf_frequencies(4, 0.0, 3.0, 2), m, name="nerf")
                  for m in (mlp, *[nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(),
                                                 nn.Linear(16, 1)).double() for _ in range(2)])]
        r = sf.readout(models, shapes=shapes, sweep=0, num_null=8)
        assert set(r.table["pe"]) == {"nerf"} and "r0" in r.observed("square").names


def test_a_nerf_layout_sequential_is_refused_with_the_way_to_convert():
    seq = nn.Sequential(NeRFStyleEncoding(2, 4, 0.0, 3.0), nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 1))
    with pytest.raises(ValueError, match=r"cannot tell the frequencies of NeRFStyleEncoding; expected one of .*"
                                         r"all sines, then all cosines .*pass frequencies="):
        sf.Ensemble.from_sequentials([seq], shapes=["square"])
    ens = sf.Ensemble.from_sequentials([seq], ["square"], frequencies=sf.nn.nerf_frequencies(4, 0.0, 3.0, 2))
    assert ens.config["layout"] == "sin_then_cos"
    with pytest.raises(ValueError, match=r"all sines first, then all cosines.*symfast.Ensemble.from_modules"):
        sf.nn.FourierMLPEnsemble.from_sequentials([seq])
    with pytest.raises(ValueError, match=r"2m = 16 features .*\(include_input\)"):
        sf.nn.from_sin_then_cos(sf.nn.nerf_frequencies(4, 0.0, 3.0, 2), nn.Sequential(nn.Linear(18, 4), nn.ReLU(),
                                                                                      nn.Linear(4, 1)))
