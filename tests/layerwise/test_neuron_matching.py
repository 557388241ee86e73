"""The activation table: planted actions recovered exactly for every activation, sigmoid's affine sign
symmetry, real-scale matching against brute force, identifiable reduction with offsets."""
import itertools

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import symfast as sf
from symfast.layerwise import MLP, data_errors, planted_mlp, project_equivariant
from symfast.activations import ACTIVATION_TABLE, activation, table_markdown
from symfast.layerwise.neuron_matching import best_scales, match_neurons
from symfast.layerwise.data import flip_matrix
from symfast.layerwise.reduction import identifiable_submodel
from symfast.layerwise.network import Act, as_mlp
from symfast.layerwise.projection import equivariance_error

FLIP = flip_matrix((1, 4, 4))


def test_table_identities_hold():
    """act(d z) = phi(d) act(z) + offset(d) for group elements of every activation."""
    z = np.linspace(-3, 3, 101)
    for a in ACTIVATION_TABLE.values():
        ds = {"sign": [1.0, -1.0], "scale": [0.3, 2.0], "real_scale": [0.3, -1.7], "perm": [1.0]}[a.mode]
        for d in ds:
            lhs = a.fn(d * z)
            rhs = a.phi(np.array(d)) * a.fn(z) + a.offset(np.array(d))
            np.testing.assert_allclose(lhs, rhs, atol=1e-12, err_msg=f"{a.name}, d = {d}")
        np.testing.assert_allclose(a.torch_fn(torch.as_tensor(z)).numpy(), a.fn(z), atol=1e-12, err_msg=a.name)
    assert activation("sigmoid").affine and not activation("tanh").affine
    assert "sigmoid" in table_markdown() and activation("Sin").name == "sine"
    with pytest.raises(ValueError, match="unknown activation 'gelu2'"):
        activation("gelu2")


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(ACTIVATION_TABLE)), seed=st.integers(0, 10_000),
       widths=st.tuples(st.integers(10, 24), st.integers(8, 20)))
def test_planted_actions_recovered_exactly(name, seed, widths):
    net, chains = planted_mlp([16, *widths, 3], FLIP, activation=name, seed=seed)
    assert equivariance_error(net, np.random.default_rng(seed).normal(size=(32, 16)), FLIP) < 1e-10
    res = sf.recover_latent_actions(net.layers, FLIP, activation=name)
    assert res.mode == activation(name).mode
    assert res.errors.max() < 1e-9 and res.bias_errors.max() < 1e-9, (res.errors, res.bias_errors)
    for l, act in enumerate(res.actions):
        np.testing.assert_allclose(act.matrix, chains[0][l + 1], atol=1e-9, err_msg=f"{name} layer {l + 1}")
    # random permutations are far off (with real scalings a random row can shrink towards 0: lower baseline)
    assert (res.baseline[:-1] > (0.1 if res.mode == "real_scale" else 0.5)).all(), res.baseline
    x = np.random.default_rng(seed + 1).normal(size=(40, 16))
    assert data_errors(net, res, x).max() < 1e-9


def _sigmoid_pair_net(seed, H=12, d=16):
    """Invariant sigmoid network of pairs (w, b, v) and (-w P, -b, -v) (P the flip)."""
    rng = np.random.default_rng(seed)
    w, b, v = rng.normal(size=(H, d)), rng.normal(size=H), rng.normal(size=(3, H))
    W1 = np.concatenate([w, -w @ FLIP]); b1 = np.concatenate([b, -b])
    W2 = np.concatenate([v, -v], 1)
    return MLP([(W1, b1), (W2, rng.normal(size=3))], "sigmoid")


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sigmoid_pairs_recovered_with_affine_offset(seed):
    net = _sigmoid_pair_net(seed)
    x = np.random.default_rng(seed).normal(size=(64, 16))
    assert equivariance_error(net, x, FLIP) < 1e-12  # exactly invariant ...
    res = sf.recover_latent_actions(net.layers, FLIP, activation="sigmoid", data=x)
    assert res.errors.max() < 1e-12 and res.bias_errors.max() < 1e-12  # ... and recovered exactly
    assert res.data_errors.max() < 1e-12
    H = 12
    np.testing.assert_array_equal(res.actions[0].index, np.r_[np.arange(H, 2 * H), np.arange(H)])
    np.testing.assert_array_equal(res.actions[0].scale, -np.ones(2 * H))
    R, c = res.post_actions()[0]
    np.testing.assert_array_equal(c, np.ones(2 * H))  # sigma(-z) = 1 - sigma(z)
    # the old treatment (plain permutations) cannot see it: error at the random baseline
    perm = sf.recover_latent_actions(MLP(net.layers, "silu"), FLIP)
    assert perm.mode == "perm" and perm.errors[0] > 0.5 * perm.baseline[0]


def test_sigmoid_projection_keeps_function():
    """Projecting a noisy sigmoid pair network onto its recovered affine action: exact invariance."""
    net = _sigmoid_pair_net(4)
    rng = np.random.default_rng(0)
    noisy = net.with_layers([(W + 0.02 * rng.normal(size=W.shape), b) for W, b in net.layers])
    res = sf.recover_latent_actions(noisy.layers, FLIP, activation="sigmoid")
    proj = project_equivariant(noisy, res)
    x = rng.normal(size=(64, 16))
    assert equivariance_error(noisy, x, FLIP) > 1e-3 and equivariance_error(proj, x, FLIP) < 1e-12
    assert np.abs(proj(x) - net(x)).max() < np.abs(noisy(x) - net(x)).max()


@pytest.mark.parametrize("name,c", [("sigmoid", -1.0), ("cube", -2.5), ("square", 0.7), ("even_poly", -1.0),
                                    ("leaky_relu", 3.0)])
def test_identifiable_reduction_with_group_scalings(name, c):
    rng = np.random.default_rng(1)
    W1, b1 = rng.normal(size=(8, 5)), rng.normal(size=8) * 0.3
    W1[6], b1[6] = c * W1[2], c * b1[2]
    net = MLP([(W1, b1), (rng.normal(size=(2, 8)), rng.normal(size=2))], name)
    red = identifiable_submodel(net)
    assert [r.split()[0] for _, r in red.removed[0]] == ["duplicate-of-2"]
    assert red.function_error < 1e-12


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), H=st.integers(2, 6), mode=st.sampled_from(["real_scale", "sign", "scale"]))
def test_match_neurons_against_brute_force(seed, H, mode):
    rng = np.random.default_rng(seed)
    A, B = rng.normal(size=(H, 4)), rng.normal(size=(H, 4))
    idx, sc, res = match_neurons(torch.as_tensor(A), torch.as_tensor(B), mode)


    def cost(p):  # the assignment objective; "scale" allows c = 0 for rows that do not overlap
        Bp = B[list(p)]
        r = np.linalg.norm(A - best_scales(A, Bp, mode)[:, None] * Bp, axis=1) ** 2
        if mode == "scale":
            r = np.where((A * Bp).sum(1) > 0, r, (A ** 2).sum(1))
        return r.sum()

    assert cost(idx) <= min(cost(p) for p in itertools.permutations(range(H))) + 1e-9
    np.testing.assert_allclose(res, np.linalg.norm(A - sc[:, None] * B[idx], axis=1) / np.linalg.norm(A, axis=1))


def test_act_module_roundtrip():
    net, _ = planted_mlp([16, 12, 3], FLIP, activation="cube", seed=0)
    seq = net.to_sequential(torch.float64)
    assert any(isinstance(m, Act) for m in seq)
    back = as_mlp(seq)
    assert back.activation == "cube"
    x = np.random.default_rng(0).normal(size=(8, 16))
    np.testing.assert_allclose(seq(torch.as_tensor(x)).detach().numpy(), net(x), atol=1e-10)
    with pytest.raises(ValueError, match="slope"):
        as_mlp(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LeakyReLU(0.2), torch.nn.Linear(4, 1)))


def test_user_guide_shows_the_table():
    """The guide page carries the activation table verbatim (one source: ACTIVATION_TABLE)."""
    import pathlib

    page = pathlib.Path(__file__).resolve().parents[2] / "docs" / "guide" / "layerwise.md"
    assert table_markdown() in page.read_text()


def test_the_old_module_name_still_resolves_with_a_deprecation_warning():
    import symfast.layerwise.activations as old
    from symfast import activations
    from symfast.layerwise import neuron_matching

    with pytest.warns(DeprecationWarning, match="use symfast.layerwise.neuron_matching.match_neurons"):
        assert old.match_rows is neuron_matching.match_neurons
    with pytest.warns(DeprecationWarning, match="use symfast.activations.ACTIVATION_TABLE"):
        assert old.ACTIVATION_TABLE is activations.ACTIVATION_TABLE
    with pytest.raises(AttributeError):
        old.no_such_name
