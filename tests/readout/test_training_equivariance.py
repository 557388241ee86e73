"""Which exact lifts does training respect?

The readout's null hypothesis, "the expected Gram is invariant under rho(g)", holds when training
maps a twin started at rho(g) W1 on points g x to rho(g) times the original. Adam scales each
coordinate separately and the init draws each weight independently from a uniform law, so that
holds for signed-permutation lifts (every axis encoding's) and fails for lifts that rotate
(cos, sin) pairs into each other (random Fourier features with random phases: r180).
"""
import math

import numpy as np
import pytest
import torch

import symfast as sf
from symfast.ops.fourier_mlp import fourier_mlp_train_step
from symfast.readout import training


def twin_gap(pe, g, steps=20):
    """max |W1(twin) - rho W1| after `steps` Adam steps of the reference kernel in float64."""
    rho = torch.as_tensor(pe.lift(g), dtype=torch.float64)
    M = torch.as_tensor(np.asarray(g.matrix), dtype=torch.float64)
    W, b = training.init_weights([3], [pe.dim, 16, 16, 1], torch.float64)
    start = [W, [(rho @ W[0][0]).unsqueeze(0), *W[1:]]]
    params = [[t.clone().requires_grad_(True) for t in w + b] for w in start]
    opts = [training.make_adam(p, 2e-3) for p in params]
    gen = torch.Generator().manual_seed(7)
    freq, phase = pe.frequencies.double(), pe.phases.double()
    for _ in range(steps):
        x = training._sample("disk", [gen], 128, 1.0, torch.float64)
        target = sf.shapes.square().sdf(x)
        for p, opt, pts in zip(params, opts, (x, x @ M.T)):  # the square's sdf is invariant under g
            opt.zero_grad()
            _, gw, gb = fourier_mlp_train_step(pts, target, freq, phase, p[:3], p[3:], "relu", backend="reference")
            for q, grad in zip(p, list(gw) + list(gb)):
                q.grad = grad
            opt.step()
    return (params[1][0][0].detach() - rho @ params[0][0][0].detach()).abs().max().item()


@pytest.mark.parametrize("pe, g", [
    (sf.DyadicAxisPE(K=4), sf.reflection(0.0)),
    (sf.DyadicAxisPE(K=4), sf.rotation(math.pi / 2)),
    (sf.TriAxisPE(K=4), sf.rotation(math.pi)),
], ids=["dyadic-m0", "dyadic-r90", "triaxis-r180"])
def test_adam_training_respects_signed_permutation_lifts(pe, g):
    rho = np.asarray(pe.lift(g))
    assert ((np.abs(rho) > 1e-12).sum(1) == 1).all()  # a signed permutation
    assert twin_gap(pe, g) < 1e-12


def test_adam_training_breaks_the_rotating_lift_of_random_fourier_features():
    pe, g = sf.RandomFourierPE(n=8), sf.rotation(math.pi)
    rho = np.asarray(pe.lift(g))
    assert ((np.abs(rho) > 1e-12).sum(1) == 2).all()  # 2 x 2 rotations of (cos, sin) pairs
    assert twin_gap(pe, g) > 1e-3


def test_readout_marks_lifts_that_training_does_not_respect():
    pe = sf.RandomFourierPE(n=8)
    ens = sf.fit_sdf(["square"], pe, seeds=4, hidden=(8,), steps=3, points=32, backend="reference", progress=False)
    r = sf.readout(ens, candidates=sf.dihedral(4), sweep=0)
    t = r.table.set_index("element")
    assert t.loc["r0", "lift_permutation"] and not t.loc["r180", "lift_permutation"]
    assert not t.loc["r90", "lift_permutation"]  # not liftable at all
    assert "exact lift not a signed permutation: {r180}" in r.report()
    axis = sf.readout(sf.fit_sdf(["square"], sf.DyadicAxisPE(K=2), seeds=4, hidden=(8,), steps=3, points=32,
                                 backend="reference", progress=False), candidates=sf.dihedral(4), sweep=0)
    assert axis.table["lift_permutation"].all() and "signed permutation" not in axis.report()
