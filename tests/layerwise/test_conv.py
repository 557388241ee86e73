"""CNN channel actions under horizontal flip: planted recovery for every activation, projection, data errors."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symfast.activations import ACTIVATION_TABLE, activation
from symfast.layerwise.conv import (CNN, ConvNet, as_cnn, conv_data_errors, conv_equivariance_error, planted_cnn,
                                    project_conv, recover_conv_actions)
from symfast.layerwise.cnn_experiments import analyse_cnn, format_cnn_results, run_cnn_experiment
from symfast.layerwise.data import ImageData, load_digits


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(sorted(ACTIVATION_TABLE)), seed=st.integers(0, 10_000),
       channels=st.tuples(st.integers(1, 3), st.integers(3, 9), st.integers(3, 9)))
def test_planted_cnn_actions_recovered_exactly(name, seed, channels):
    net, planted = planted_cnn(list(channels), name, seed=seed)
    x = np.random.default_rng(seed).normal(size=(6, channels[0], 8, 8))
    assert conv_equivariance_error(net, x) < 1e-10
    res = recover_conv_actions(net)
    assert res.mode == activation(name).mode
    assert res.errors.max() < 1e-9 and res.bias_errors.max() < 1e-9, (res.errors, res.bias_errors)
    for l, (got, want) in enumerate(zip(res.actions, planted)):
        np.testing.assert_allclose(got.matrix, want.matrix, atol=1e-9, err_msg=f"{name} conv {l + 1}")
    assert conv_data_errors(net, res, x).max() < 1e-9
    assert (res.baseline > 0.1).all()


def test_conv_flip_identity_and_projection_idempotent():
    rng = np.random.default_rng(0)
    net, planted = planted_cnn([2, 6, 5], "sigmoid", seed=3)
    noisy = net.with_weights([(W + 0.05 * W.std() * rng.normal(size=W.shape), b) for W, b in net.convs], net.head)
    x = rng.normal(size=(10, 2, 8, 8))
    res = recover_conv_actions(noisy)
    assert 1e-3 < res.errors[:-1].max() < 0.5 * res.baseline[:-1].min()
    for got, want in zip(res.actions, planted):  # recovered despite 5% noise
        np.testing.assert_array_equal(got.matrix, want.matrix)
    proj = project_conv(noisy, res)
    assert conv_equivariance_error(noisy, x) > 1e-4 and conv_equivariance_error(proj, x) < 1e-12
    again = project_conv(proj, recover_conv_actions(proj))
    for (W1, b1), (W2, b2) in zip(proj.convs, again.convs):
        np.testing.assert_allclose(W1, W2, atol=1e-12)
        np.testing.assert_allclose(b1, b2, atol=1e-12)


def test_convnet_matches_numpy_cnn():
    torch.manual_seed(0)
    m = ConvNet((1, 4, 5), num_classes=3, activation="cube").double()
    x = np.random.default_rng(0).normal(size=(3, 1, 8, 8))
    np.testing.assert_allclose(m(torch.as_tensor(x)).detach().numpy(), as_cnn(m)(x), atol=1e-10)


def test_cnn_bad_inputs():
    W = np.zeros((4, 1, 3, 3))
    with pytest.raises(ValueError, match="input channels"):
        CNN([(W, np.zeros(4)), (np.zeros((2, 3, 3, 3)), np.zeros(2))], (np.zeros((1, 2)), np.zeros(1)))
    with pytest.raises(ValueError, match="NaN"):
        CNN([(W * np.nan, np.zeros(4))], (np.zeros((1, 4)), np.zeros(1)))
    with pytest.raises(TypeError, match="must be real"):
        CNN([(W * 1j, np.zeros(4))], (np.zeros((1, 4)), np.zeros(1)))
    net = CNN([(W, np.zeros(4))], (np.zeros((1, 4)), np.zeros(1)))
    with pytest.raises(ValueError, match=r"x must be \[N, 1, H, W\]"):
        net(np.zeros((2, 8, 8)))
    with pytest.raises(ValueError, match="unknown activation"):
        CNN([(W, np.zeros(4))], (np.zeros((1, 4)), np.zeros(1)), "bogus")


def test_cnn_experiment_on_digits_small():
    d = load_digits()
    small = ImageData(d.x[:400], d.y[:400], d.shape, d.name)
    res = run_cnn_experiment(small, "tanh", steps=150, channels=(6, 8))
    eq, ctl = res["equivariant"][0], res["control"][0]
    assert eq.equivariance < 0.5 * ctl.equivariance  # the invariance loss works
    assert eq.projection["equivariance_after"] < 1e-10
    assert eq.projection["accuracy_random"] <= eq.projection["accuracy_after"] + 0.05
    text = format_cnn_results(res)
    assert "symmetric/antisymmetric/paired" in text and "control" in text
