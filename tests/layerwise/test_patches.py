"""Natural-image patches from scikit-image's bundled photographs, and the layer-1 filter classes."""
import sys

import numpy as np
import pytest

from symfast.cli import main
from symfast.layerwise.data import flip_matrix, flip_permutation
from symfast.layerwise.patches import SAMPLE_IMAGES, filter_classes, load_patches


def _planted_autoencoder(shape, n_plus, n_minus, n_pairs, seed=0, invariant=False):
    """d-H-d tanh autoencoder equivariant under the flip F by construction: s+ units have F-symmetric filters,
    s- units antisymmetric filters and zero bias, paired units mirrored filters; decoder columns transform
    alike (an invariant net gets a readout that sums each pair and drops the s- units). Units relabelled."""
    rng = np.random.default_rng(seed)
    F = flip_matrix(shape)
    d = F.shape[0]
    W1, b1, W2 = [], [], []
    for _ in range(n_plus):
        v, u = rng.normal(size=d), rng.normal(size=d)
        W1.append((v + F @ v) / 2)
        b1.append(rng.normal())
        W2.append((u + F @ u) / 2)
    for _ in range(n_minus):
        v, u = rng.normal(size=d), rng.normal(size=d)
        W1.append((v - F @ v) / 2)
        b1.append(0.0)
        W2.append((u - F @ u) / 2)
    for _ in range(n_pairs):
        v, u, b = rng.normal(size=d), rng.normal(size=d), rng.normal()
        W1 += [v, F @ v]
        b1 += [b, b]
        W2 += [u, F @ u]
    perm = rng.permutation(len(W1))
    W1, b1, W2 = np.array(W1)[perm], np.array(b1)[perm], np.array(W2).T[:, perm]
    u = rng.normal(size=d)
    if invariant:  # one output: each s+ unit and each pair with one weight, s- units weighted 0
        W2 = np.where(np.array([np.allclose(F @ w, -w) for w in W1])[None], 0.0, 1.0)
        return [(W1, b1), (W2, np.zeros(1))], F
    return [(W1, b1), (W2, (u + F @ u) / 2)], F


@pytest.mark.parametrize("counts", [(5, 3, 4), (0, 6, 0), (7, 0, 2), (1, 1, 10)], ids=str)
def test_planted_filter_classes_exact(counts):
    n_plus, n_minus, n_pairs = counts
    shape = (1, 4, 6)
    layers, F = _planted_autoencoder(shape, *counts, seed=sum(counts))
    x = np.random.default_rng(1).normal(size=(50, F.shape[0]))
    W1, b1 = layers[0]
    W2, b2 = layers[1]
    f = lambda z: np.tanh(z @ W1.T + b1) @ W2.T + b2  # noqa: E731
    assert np.abs(f(x @ F.T) - f(x) @ F.T).max() < 1e-12  # the planted net is exactly equivariant
    c = filter_classes(layers, shape, data=x)
    assert (c["s+"], c["s-"], c["paired"], c["unmatched"]) == (n_plus, n_minus, 2 * n_pairs, 0)
    assert c["error"] < 1e-12 and c["data_error"] < 1e-12
    assert c["matching"] == {k: c[k] for k in ("s+", "s-", "paired", "unmatched")}
    assert c["random"] > 0.5


def test_planted_invariant_filter_classes_exact():
    layers, F = _planted_autoencoder((1, 4, 4), 4, 3, 5, seed=7, invariant=True)
    c = filter_classes(layers, (1, 4, 4), rho_out=None)
    assert (c["s+"], c["s-"], c["paired"], c["unmatched"]) == (4, 3, 10, 0)
    assert c["error"] < 1e-12


def test_large_biases_do_not_make_random_filters_symmetric():
    # tiny random filters under large distinct biases: the [filter, bias] rows match each unit to itself with a
    # small residual, but no mirrored filter resembles its match; only the filter-level count says so
    rng = np.random.default_rng(3)
    shape, H = (1, 4, 4), 12
    W1, b1 = 1e-3 * rng.normal(size=(H, 16)), np.arange(1.0, H + 1)
    layers = [(W1, b1), (rng.normal(size=(16, H)), np.zeros(16))]
    c = filter_classes(layers, shape)
    assert c["matching"]["s+"] == H  # the bias-dominated matching rule alone
    assert (c["s+"], c["s-"], c["paired"], c["unmatched"]) == (0, 0, 0, H)
    assert c["actions"].counts().iloc[0]["unmatched"] == H  # the returned actions carry the filter-level residual


def test_filter_classes_bad_input():
    layers, _ = _planted_autoencoder((1, 4, 4), 2, 2, 2)
    with pytest.raises(ValueError, match="rho_out must be 'flip' or None"):
        filter_classes(layers, (1, 4, 4), rho_out="mirror")
    with pytest.raises(ValueError, match=r"rho_in must be \[16, 16\]"):
        filter_classes(layers, (1, 4, 5))


def test_missing_scikit_image_names_the_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "skimage", None)
    with pytest.raises(ImportError, match="pip install scikit-image"):
        load_patches(8, 10)


def test_patches_shape_normalisation_and_seed():
    pytest.importorskip("skimage")
    a, b, c = load_patches(8, 300, seed=3), load_patches(8, 300, seed=3), load_patches(8, 300, seed=4)
    assert a.x.shape == (300, 64) and a.x.dtype == np.float32 and a.shape == (1, 8, 8) and (a.y == 0).all()
    np.testing.assert_array_equal(a.x, b.x)
    assert not np.array_equal(a.x, c.x)
    assert np.abs(a.x.mean(1)).max() < 1e-5 and abs(float(a.x.std()) - 1.0) < 1e-4
    np.testing.assert_allclose(load_patches(8, 300, seed=3, scale=8.0).x, 8 * a.x, rtol=1e-6)
    raw = load_patches(16, 50, seed=3, normalize=False, color="channels")
    assert raw.x.shape == (50, 256) and raw.x.min() >= 0.0 and raw.x.max() <= 1.0


def test_patches_flip_closed():
    pytest.importorskip("skimage")
    d = load_patches(12, 400, seed=1, flip_closed=True)
    perm = flip_permutation(d.shape)
    np.testing.assert_array_equal(d.x[200:], d.x[:200][:, perm])
    rows = lambda x: x[np.lexsort(x.T[::-1])]  # noqa: E731
    np.testing.assert_array_equal(rows(d.x), rows(d.x[:, perm]))  # the set is its own mirror image
    open_set = load_patches(12, 400, seed=1)
    assert not np.array_equal(rows(open_set.x), rows(open_set.x[:, perm]))


def test_patches_bad_input():
    pytest.importorskip("skimage")
    with pytest.raises(ValueError, match="count must be even"):
        load_patches(8, 11, flip_closed=True)
    with pytest.raises(ValueError, match="patch size must be an integer in 4..32"):
        load_patches(3, 10)
    with pytest.raises(ValueError, match="patch scale must be a finite number > 0"):
        load_patches(8, 10, scale=float("nan"))
    with pytest.raises(ValueError, match="color must be one of"):
        load_patches(8, 10, color="rgb")
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        load_patches(8, 10, names=("data.png",))
    assert len(SAMPLE_IMAGES) >= 10


def test_cli_patches_bad_input(tmp_path, capsys):
    pytest.importorskip("skimage")
    out = str(tmp_path)
    assert main(["layerwise", "--patches", "--patch-size", "3", "--out", out]) == 2
    assert "patch size must be an integer in 4..32" in capsys.readouterr().err
    assert main(["layerwise", "--patches", "--flip-closed", "--patch-count", "401", "--out", out]) == 2
    assert "count must be even" in capsys.readouterr().err
    assert main(["layerwise", "--patches", "--suite", "--out", out]) == 2
    assert "pick one" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_patches_writes_table_and_figures(tmp_path, capsys):
    pytest.importorskip("skimage")
    out = str(tmp_path)
    assert main(["layerwise", "--patches", "--patch-count", "400", "--steps", "20", "--out", out]) == 0
    text = capsys.readouterr().out
    assert "| variant | seed | s+ | s- |" in text
    for name in ("patches.md", "patches.csv", "filters_equivariant.png", "filters_control.png", "results.json"):
        assert (tmp_path / name).stat().st_size > 0, name
