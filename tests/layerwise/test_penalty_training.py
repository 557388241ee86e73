"""Training along the penalty path: settings, the covering law, stacked Adam, the L-BFGS polish."""
import numpy as np
import pytest
import torch

from symfast.layerwise.data import ImageData, flip_matrix, flip_permutation, load_digits
from symfast.layerwise.measurement import measure
from symfast.layerwise.penalty_training import ExactnessSettings, covering_inputs, polish_net, train_sweep
from symfast.layerwise.projection import equivariance_error
from symfast.layerwise.protocol import train_test_split


def _digits(n: int = 400) -> ImageData:
    d = load_digits()
    idx = np.random.default_rng(0).permutation(len(d.x))[:n]
    return ImageData(d.x[idx], d.y[idx], d.shape, d.name)


@pytest.mark.parametrize("kw, match", [
    (dict(seeds=5, seed_offset=3), "seed_offset"),
    (dict(lams=(1.0, 0.0)), "penalty weights"),
    (dict(covering="ball"), "covering"),
    (dict(steps=0), "steps"),
    (dict(lams=(1.0, 10.0), polish_lams=(5.0,)), "polish penalty weights"),
    (dict(polish_lams=(np.inf,)), "polish penalty weights"),
    (dict(polish_iters=0), "polish_iters"),
    (dict(polish_samples=0), "polish_samples"),
    (dict(polish_history=0), "polish_history"),
], ids=["overlap", "zero-lam", "covering", "steps", "polish-below", "polish-inf", "polish-iters", "polish-samples",
        "polish-history"])
def test_settings_refuse_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        ExactnessSettings(**kw)


@pytest.mark.parametrize("kind", ["uniform", "gaussian"])
def test_covering_law_is_flip_invariant(kind):
    d = _digits(300)
    perm = flip_permutation(d.shape)
    x = covering_inputs(d.x, perm, kind)(8000, torch.Generator().manual_seed(0)).numpy()
    assert x.shape == (8000, 64)
    # the flipped samples have the same per-pixel law: compare means and spreads pixel by pixel
    np.testing.assert_allclose(x.mean(0), x[:, perm].mean(0), atol=0.03)
    np.testing.assert_allclose(x.std(0), x[:, perm].std(0), atol=0.03)
    assert (x.std(0) > 0.1).all()  # every direction is exercised, also pixels (4, 0), (4, 7) the data never lights
    with pytest.raises(ValueError, match=r"\[N >= 2, 64\]"):
        covering_inputs(d.x[:, :10], perm, kind)


def test_stacked_training_equals_training_alone():
    train = _digits(200)
    s = ExactnessSettings(lams=(1e-2, 1.0), seeds=1, heldout_seeds=1, seed_offset=7, sizes=(8,), steps=20, batch=32)
    both = train_sweep(train, "tanh", s.lams, [0, 7], s)
    alone = train_sweep(train, "tanh", s.lams, [7], s)
    for lam in s.lams:
        for (W, b), (Wa, ba) in zip(both[(lam, 7)].layers, alone[(lam, 7)].layers):
            np.testing.assert_allclose(W, Wa, atol=1e-6)
            np.testing.assert_allclose(b, ba, atol=1e-6)


def test_polish_stage_closes_the_end_to_end_error_further():
    """The L-BFGS polish continues the path: at larger lam the end-to-end error falls well below the
    Adam path's last point, the default (no polish) trains exactly the Adam-only sweep, and the
    polish's memory reaches the optimiser."""
    d = _digits(300)
    train, test = train_test_split(d)
    draw = covering_inputs(train.x, flip_permutation(d.shape), "uniform")
    cover = np.concatenate([test.x, draw(len(test.x), torch.Generator().manual_seed(5)).numpy()])
    base = dict(lams=(1e-2, 1.0), seeds=1, heldout_seeds=1, seed_offset=7, sizes=(12, 8), steps=150, batch=64)
    plain = train_sweep(train, "tanh", base["lams"], [0], ExactnessSettings(**base))
    s = ExactnessSettings(**base, polish_lams=(1e2, 1e4), polish_iters=150, polish_samples=512)
    nets = train_sweep(train, "tanh", s.lams, [0], s)
    assert set(nets) == {(lam, 0) for lam in (1e-2, 1.0, 1e2, 1e4)}
    for lam in base["lams"]:  # the Adam path is untouched by the polish
        for (W, b), (Wp, bp) in zip(plain[(lam, 0)].layers, nets[(lam, 0)].layers):
            np.testing.assert_array_equal(W, Wp)
            np.testing.assert_array_equal(b, bp)
    e = [measure(nets[(lam, 0)], test, cover)["end_to_end"] for lam in (1.0, 1e2, 1e4)]
    assert e[1] < e[0] and e[2] < e[1] / 3 and e[2] < e[0] / 30, e
    assert (nets[(1e4, 0)](test.x).argmax(1) == test.y).mean() > 0.5  # still a classifier
    # a longer L-BFGS memory closes the penalised residual faster per iteration (why it is a setting):
    # 100 curvature pairs against 3, the same 60 iterations from the same net
    fixed = np.concatenate([train.x, draw(512, torch.Generator().manual_seed(0)).numpy()])
    short, long = (equivariance_error(polish_net(plain[(1.0, 0)], train, fixed, 1e4, 60, h), fixed,
                                      flip_matrix(d.shape)) for h in (3, 100))
    assert long < short / 2, (short, long)


def test_polish_net_refuses_bad_input():
    d = _digits(100)
    net = train_sweep(d, "tanh", (1.0,), [0], ExactnessSettings(lams=(1.0,), seeds=1, heldout_seeds=1,
                                                                  seed_offset=7, sizes=(4,), steps=2))[(1.0, 0)]
    with pytest.raises(ValueError, match="lam > 0"):
        polish_net(net, d, d.x, 0.0)
    with pytest.raises(ValueError, match=r"\[N, 64\]"):
        polish_net(net, d, d.x[:, :10], 1.0)
    with pytest.raises(ValueError, match="history >= 1"):
        polish_net(net, d, d.x, 1.0, history=0)


def test_weight_decay_shrinks_weights_and_keeps_stacked_training_exact():
    train = _digits(200)
    base = dict(lams=(1.0,), seeds=1, heldout_seeds=1, seed_offset=7, sizes=(8,), steps=20, batch=32)
    plain = train_sweep(train, "tanh", (1.0,), [0], ExactnessSettings(**base))[(1.0, 0)]
    s = ExactnessSettings(**base, weight_decay=2.0)
    both = train_sweep(train, "tanh", (1.0,), [0, 7], s)
    alone = train_sweep(train, "tanh", (1.0,), [0], s)[(1.0, 0)]
    for (W, b), (Wa, ba) in zip(both[(1.0, 0)].layers, alone.layers):
        np.testing.assert_allclose(W, Wa, atol=1e-6)
    assert np.linalg.norm(alone.layers[0][0]) < 0.95 * np.linalg.norm(plain.layers[0][0])
    with pytest.raises(ValueError, match="weight_decay"):
        ExactnessSettings(weight_decay=-1.0)
