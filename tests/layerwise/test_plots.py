"""Layerwise figures and verdict rows: the filter plot draws into the caller's figure, writes its file
when asked, leaves the matplotlib backend alone, says how many filters it shows, explains s+/s- and
greys out pixels the data never lights; the suite's numbers become expected / measured / held rows."""
import matplotlib.pyplot as plt
import numpy as np
import pytest

import symfast as sf
from symfast.layerwise import planted_mlp
from symfast.layerwise.claims import layerwise_claims
from symfast.layerwise.data import flip_matrix
from symfast.layerwise.plots import lit_pixels, orbit_groups, plot_filters_by_orbit
from symfast.layerwise.suite import plot_regimes

FLIP = flip_matrix((1, 4, 4))



@pytest.fixture(scope="module")
def planted():
    net, _ = planted_mlp([16, 40, 3], FLIP, activation="tanh", seed=0)
    return net, sf.recover_latent_actions(net.layers, FLIP, activation="tanh")


def test_filters_draw_into_given_figure_and_write_file(planted, tmp_path, no_backend_switch):
    net, res = planted
    fig = plt.figure()
    try:
        assert plot_filters_by_orbit(net.layers[0][0], (1, 4, 4), res, fig=fig) is fig
        assert any(ax.images for ax in fig.axes)
    finally:
        plt.close(fig)
    path = tmp_path / "f.png"
    plot_filters_by_orbit(net.layers[0][0], (1, 4, 4), res, str(path))
    assert path.stat().st_size > 0


def test_filters_title_counts_truncation_and_caption_explains_signs(planted):
    net, res = planted
    groups = orbit_groups(res)
    biggest = max(groups, key=lambda k: len(groups[k]))
    n = len(groups[biggest])
    fig = plot_filters_by_orbit(net.layers[0][0], (1, 4, 4), res, max_per_group=3)
    try:
        texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts) + fig._suptitle.get_text()
        texts += " ".join(t.get_text() for t in fig.texts)
        texts = " ".join(texts.split())  # the caption is wrapped
        assert f"{biggest}: 3 of {n} filters shown" in texts
        assert "s+" in texts and "s−" in texts and "mirrored filter equals minus the filter" in texts
        assert fig.axes[-1].get_ylabel() == "weight / max |weight| of the filter"  # the colour bar
    finally:
        plt.close(fig)


def test_filters_grey_out_unlit_pixels(planted):
    net, res = planted
    x = np.zeros((5, 16))
    x[:, 5] = x[:, 6] = 1.0  # only two centre pixels ever lit
    lit = lit_pixels(x)
    assert lit.sum() == 2
    fig = plot_filters_by_orbit(net.layers[0][0], (1, 4, 4), res, lit=lit)
    try:
        img = next(ax for ax in fig.axes if ax.images).images[0].get_array()
        assert np.ma.getmaskarray(img).sum() == 14
        vmin, vmax = fig.axes[-1].get_ylim()
        assert vmin == -vmax  # colour scale symmetric around 0
    finally:
        plt.close(fig)
    x[:, 6] = 0.0  # pixel 5 lit, its mirror 6 not: both are grey, so the filter is compared like with like
    fig = plot_filters_by_orbit(net.layers[0][0], (1, 4, 4), res, lit=lit_pixels(x))
    try:
        img = next(ax for ax in fig.axes if ax.images).images[0].get_array()
        assert np.ma.getmaskarray(img).all()
    finally:
        plt.close(fig)
    x = np.zeros((200, 16))
    x[:, 0] = 1.0
    x[:1, 1] = 1.0  # lit in 0.5% of the images: counts as unlit at the default 1%
    assert lit_pixels(x).tolist() == [True] + [False] * 15 and lit_pixels(x, 0).sum() == 2
    with pytest.raises(ValueError, match="lit must have 16 entries"):
        plot_filters_by_orbit(net.layers[0][0], (1, 4, 4), res, lit=np.ones(3, bool))


def _regime(scale, wd, near, err, rnd):
    c = {"fixed": 3, "antisymmetric": 1, "cycled": 2, "cycles": 1, "unmatched": 0}
    return {"scale": scale, "weight_decay": wd, "near_linear": [near], "weight_error": err, "random": rnd,
            "data_error": 0.2, "counts": c, "counts_data": c, "relative_mse": 0.1}


def test_regimes_draw_into_given_axes_and_write_file(tmp_path, no_backend_switch):
    rows = [_regime(1.0, 0.0, 0.99, 1.1, 1.2), _regime(4.0, 0.5, 0.4, 0.3, 1.2)]
    fig, axes = plt.subplots(1, 2)
    try:
        assert plot_regimes(rows, axes=axes) is fig and axes[0].has_data()
    finally:
        plt.close(fig)
    plot_regimes(rows, str(tmp_path / "r.png"))
    assert (tmp_path / "r.png").stat().st_size > 0


def test_layerwise_claims_expected_measured_held():
    suite = [{"model": "mlp", "activation": "tanh", "variant": "equivariant", "weight_error": 0.3, "random": 1.2,
              "accuracy": [0.95, 0.95, 0.1]},
             {"model": "mlp", "activation": "tanh", "variant": "control", "weight_error": 0.9, "random": 1.2,
              "accuracy": [0.96, 0.5, 0.1]},
             {"model": "cnn", "activation": "tanh", "variant": "equivariant", "weight_error": 0.9, "random": 1.0,
              "accuracy": [0.9, 0.7, 0.1]},
             {"model": "cnn", "activation": "tanh", "variant": "control", "weight_error": 0.8, "random": 1.0,
              "accuracy": [0.9, 0.5, 0.1]}]
    att = [{"variant": "equivariant", "param_error": 0.01, "random": 1.0, "heads": {"fixed": 2, "cycled": 2}}]
    fresh = {"quick": False, "steps": 1500, "seed_offset": 1000, "data": "digits"}
    claims = {c.claim: c for c in layerwise_claims({"suite": suite, "attention": att, "autoencoder_regimes": [
        _regime(1.0, 0.0, 0.99, 1.1, 1.2), _regime(4.0, 0.5, 0.4, 0.3, 1.2)], "settings": fresh})}
    assert all(c.study == "layerwise" for c in claims.values()) and len(claims) == 5
    fit = claims["Flip-invariant networks are layerwise equivariant: the recovered layer-1 action fits (proven: tanh, "
                 "sigmoid, polynomial activations)"]
    assert fit.verdict == "missed" and fit.measured.startswith("1 of 2: mlp/tanh 0.25, cnn/tanh 0.90")
    assert claims["The structure comes from equivariance: the control without the loss fits worse"].verdict == "missed"
    assert claims["Projecting onto the recovered actions keeps accuracy; random actions do not"].verdict == "missed"
    auto = claims["Without identifiability no permutation action: near-linear tanh autoencoders"]
    assert auto.verdict == "held" and auto.measured.startswith("1 of 1")
    assert claims["Equivariant attention carries a permutation of heads"].verdict == "held"
    assert layerwise_claims({}) == []


def _labels(fig) -> list:
    return [ax.get_title() for ax in fig.axes if ax.images]


def test_filter_labels_follow_one_rule_and_s_plus_filters_are_mirror_symmetric(planted):
    """Planted network, one s+ unit then broken: every 's+' filter is mirror-symmetric to tolerance,
    the broken one loses its sign label (the old rule labelled it by the sign of its scale alone)."""
    net, res = planted
    W1 = np.asarray(net.layers[0][0], dtype=np.float64)
    fig = plot_filters_by_orbit(W1, (1, 4, 4), res)
    try:
        labels = _labels(fig)
    finally:
        plt.close(fig)
    plus = [int(t.split()[0]) for t in labels if t.endswith("s+")]
    assert plus and any(t.endswith("s−") for t in labels) and any("↔" in t for t in labels)
    for i in plus:
        assert np.linalg.norm(W1[i] @ FLIP - W1[i]) <= 1e-6 * np.linalg.norm(W1[i])
    for t in labels:
        if "↔" in t:
            i, j = (int(v) for v in t.split()[0].split("↔"))
            assert np.linalg.norm(np.abs(W1[i] @ FLIP) - np.abs(W1[j])) <= 1e-6 * np.linalg.norm(W1[i])

    broken = [tuple(np.array(w, copy=True) for w in layer) for layer in net.layers]
    k = plus[0]
    broken[0][0][k] = W1[k] + np.random.default_rng(1).normal(size=16) * 2.0 * np.linalg.norm(W1[k])
    res2 = sf.recover_latent_actions(broken, FLIP, activation="tanh")
    fig = plot_filters_by_orbit(np.asarray(broken[0][0], dtype=np.float64), (1, 4, 4), res2)
    try:
        labels2 = _labels(fig)
    finally:
        plt.close(fig)
    assert f"{k} s+" not in labels2
    W2 = np.asarray(broken[0][0], dtype=np.float64)
    for t in labels2:
        if t.endswith("s+"):
            i = int(t.split()[0])
            assert np.linalg.norm(W2[i] @ FLIP - W2[i]) <= res2.threshold * np.linalg.norm(W2[i]) + 1e-9


def test_filter_title_counts_are_the_tables_counts_at_the_weight_level(planted):
    from symfast.layerwise.suite import _counts

    net, res = planted
    fig = plot_filters_by_orbit(net.layers[0][0], (1, 4, 4), res)
    try:
        title = fig._suptitle.get_text()
    finally:
        plt.close(fig)
    c = res.counts().iloc[0]  # what run_suite stores and format_suite prints
    assert f"weight-level counts sym/anti/paired/unmatched {_counts(c)}/{c['unmatched']}" in title
    groups = orbit_groups(res)
    assert (len(groups["symmetric"]), len(groups["antisymmetric"]), len(groups["paired"])) == \
        (c["fixed"], c["antisymmetric"], c["cycled"])
