"""One trained classifier read against the flip: the row every MLP sweep records per net."""
import numpy as np
import pytest

from symfast.layerwise.data import ImageData, flip_matrix, load_digits
from symfast.layerwise.measurement import measure
from symfast.layerwise.planted import planted_mlp
from symfast.layerwise.projection import equivariance_error


def _digits(n: int = 400) -> ImageData:
    d = load_digits()
    idx = np.random.default_rng(0).permutation(len(d.x))[:n]
    return ImageData(d.x[idx], d.y[idx], d.shape, d.name)


def test_measure_reads_an_exactly_invariant_network_as_exact():
    d = _digits(200)
    net, _ = planted_mlp([64, 12, 6, 10], flip_matrix(d.shape), activation="tanh", seed=3)
    row = measure(net, d, d.x)
    assert row["end_to_end"] < 1e-12 and row["end_to_end_data"] < 1e-12 and "end_to_end_law" not in row
    law = np.random.default_rng(0).uniform(0, 1, (50, 64))
    assert measure(net, d, d.x, law=law)["end_to_end_law"] < 1e-12
    with pytest.raises(ValueError, match="law must be"):
        measure(net, d, d.x, law=law[:, :10])
    # a net that is not invariant: the law error is the relative error on the law samples alone
    W1, b1 = net.layers[0]
    skew = net.with_layers([(W1 + 0.3 * np.random.default_rng(1).standard_normal(W1.shape), b1), *net.layers[1:]])
    row_skew = measure(skew, d, d.x, law=law)
    assert row_skew["end_to_end_law"] > 1e-3
    assert row_skew["end_to_end_law"] == pytest.approx(equivariance_error(skew, law, flip_matrix(d.shape)))
    assert row_skew["end_to_end_law"] != pytest.approx(row_skew["end_to_end"])
    assert row_skew["layer1_data_error"] > 1e-3  # the skewed layer 1 is no longer equivariant on data
    for name in ("layer1", "layer2", "output"):
        assert row[f"{name}_error"] < 1e-10 and row[f"{name}_random"] > 0.3
    assert row["layer1_data_error"] < 1e-10 and row["layer2_data_error"] < 1e-10 and "output_data_error" not in row
    # projecting an exactly equivariant net onto its recovered actions changes nothing
    assert row["accuracy_projected"] == row["accuracy"] and 0 <= row["accuracy_random_projection"] <= 1
    assert 0 <= row["layer1_near_linear"] <= 1
    # a duplicated layer-1 unit (outgoing weight split in two) keeps the function and is counted
    (W1, b1), (W2, b2) = net.layers[:2]
    W2d = np.concatenate([W2, 0.5 * W2[:, :1]], 1)
    W2d[:, 0] *= 0.5
    dup = net.with_layers([(np.concatenate([W1, W1[:1]]), np.append(b1, b1[0])), (W2d, b2), *net.layers[2:]])
    row2 = measure(dup, d, d.x)
    assert row2["end_to_end"] < 1e-12 and np.abs(dup(d.x) - net(d.x)).max() < 1e-12
    assert row2["duplicate_units"] == row["duplicate_units"] + 1 and row2["dead_units"] == row["dead_units"]


def test_measure_reads_the_identifiable_submodel():
    d = _digits(200)
    net, _ = planted_mlp([64, 12, 6, 10], flip_matrix(d.shape), activation="tanh", seed=3)
    (W1, b1), (W2, b2) = net.layers[:2]
    W2d = np.concatenate([W2, 0.5 * W2[:, :1]], 1)
    W2d[:, 0] *= 0.5
    dup = net.with_layers([(np.concatenate([W1, W1[:1]]), np.append(b1, b1[0])), (W2d, b2), *net.layers[2:]])
    row = measure(dup, d, d.x, reduced=True)
    assert row["duplicate_units"] == 1
    for name in ("layer1", "layer2", "output"):
        assert row[f"{name}_error_reduced"] < 1e-10 and row[f"{name}_random_reduced"] > 0.3
        assert row[f"{name}_ratio_reduced"] == pytest.approx(row[f"{name}_error_reduced"] / row[f"{name}_random_reduced"])
    assert 0 <= row["layer2_near_linear"] <= 1 and row["layer1_near_linear"] == row["layer1_near_linear"]
    assert "layer1_ratio_reduced" not in measure(dup, d, d.x)
    with pytest.raises(ValueError, match=r"\[N, 64\]"):
        measure(dup, d, d.x[:, :10])
