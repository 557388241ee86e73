"""CIFAR10 adapter on files written in CIFAR10's own on-disk format (pickle batches), read safely."""
import os
import pickle

import numpy as np
import pytest

from symfast.cli import main
from symfast.layerwise.data import flip_permutation, load_cifar10, load_image_data


def _write_batches(root, n=12, batches=2, seed=0):
    rng = np.random.default_rng(seed)
    d = os.path.join(root, "cifar-10-batches-py")
    os.makedirs(d)
    out = []
    for i in range(1, batches + 1):
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = rng.integers(0, 10, n).tolist()
        with open(os.path.join(d, f"data_batch_{i}"), "wb") as f:  # as the originals: bytes keys, protocol 2
            pickle.dump({b"batch_label": b"training batch", b"data": data, b"labels": labels,
                         b"filenames": [b"x.png"] * n}, f, protocol=2)
        out.append((data, labels))
    with open(os.path.join(d, "test_batch"), "wb") as f:
        pickle.dump({b"data": out[0][0][:5], b"labels": out[0][1][:5]}, f, protocol=2)
    return out


def test_cifar10_batches_roundtrip(tmp_path):
    written = _write_batches(str(tmp_path))
    d = load_cifar10(str(tmp_path))
    assert d.shape == (3, 32, 32) and d.x.shape == (24, 3072) and d.x.dtype == np.float32
    raw = np.concatenate([w[0] for w in written])
    np.testing.assert_array_equal(d.x, raw.astype(np.float32) / 255.0)
    np.testing.assert_array_equal(d.y, np.concatenate([w[1] for w in written]))
    # pixel layout: R, G, B planes of 32 x 32 rows; the flip reverses each row of each plane
    img = raw[0].reshape(3, 32, 32)
    np.testing.assert_array_equal(d.x[0][flip_permutation(d.shape)].reshape(3, 32, 32) * 255.0,
                                  img[:, :, ::-1].astype(np.float32))
    assert len(load_cifar10(str(tmp_path), limit=5).x) == 5
    assert len(load_cifar10(str(tmp_path), train=False).x) == 5
    assert len(load_image_data("cifar10", str(tmp_path), limit=7).x) == 7  # the CLI path, no torchvision


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_cifar10_refuses_arbitrary_pickles(tmp_path):
    d = tmp_path / "cifar-10-batches-py"
    d.mkdir()
    with open(d / "data_batch_1", "wb") as f:
        pickle.dump({b"data": _Evil(), b"labels": [0]}, f)
    with pytest.raises(pickle.UnpicklingError, match="refusing to load"):
        load_cifar10(str(tmp_path))
    with open(d / "data_batch_1", "wb") as f:
        pickle.dump({b"data": np.zeros((2, 100), np.uint8), b"labels": [0, 1]}, f)
    with pytest.raises(ValueError, match=r"uint8 \[N, 3072\]"):
        load_cifar10(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_cifar10(str(tmp_path / "missing"))


def test_cli_cnn_on_cifar10_format(tmp_path, capsys):
    _write_batches(str(tmp_path / "data"), n=30)
    rc = main(["layerwise", "--model", "cnn", "--data", "cifar10", "--root", str(tmp_path / "data"),
               "--steps", "5", "--no-control", "--out", str(tmp_path / "out")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "symmetric/antisymmetric/paired" in text
    assert (tmp_path / "out" / "filters_equivariant.png").stat().st_size > 0
