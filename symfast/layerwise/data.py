"""Image data for the layerwise experiments, and the horizontal-flip representation.

Default: scikit-learn's bundled 8x8 digits (real images, shipped with the
package, nothing downloaded). Any dataset the user has locally plugs in through
`from_dataset` (a torchvision-style dataset object: len() and (image, label)
items), `load_local` (torchvision CIFAR10 / MNIST / FashionMNIST from a root
directory, always with download=False) or `load_npz` (arrays `images`, `labels`).
"""
from __future__ import annotations

import os
import pickle
from dataclasses import dataclass

import numpy as np
import torch

from symfast._optional import require

__all__ = ["ImageData", "load_digits", "from_dataset", "load_local", "load_npz", "load_image_data", "load_cifar10",
           "flip_permutation", "flip_matrix"]


@dataclass
class ImageData:
    """Flattened images in [0, 1].

    Attributes:
        x: [N, C*H*W] float32; y: [N] int64 labels; shape: (C, H, W); name: dataset name.
    """

    x: np.ndarray
    y: np.ndarray
    shape: tuple
    name: str

    def split(self, test_fraction: float = 0.25, seed: int = 0):
        """Shuffled (train, test) ImageData pair."""
        if not 0 < test_fraction < 1:
            raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
        idx = np.random.default_rng(seed).permutation(len(self.x))
        n_test = max(1, int(round(test_fraction * len(idx))))
        te, tr = idx[:n_test], idx[n_test:]
        return (ImageData(self.x[tr], self.y[tr], self.shape, self.name),
                ImageData(self.x[te], self.y[te], self.shape, self.name))

    @property
    def num_classes(self) -> int:
        return int(self.y.max()) + 1


def flip_permutation(shape) -> np.ndarray:
    """Index p with (flipped x)[k] = x[p[k]] for flattened [C, H, W] images (horizontal flip)."""
    if len(shape) == 2:
        shape = (1,) + tuple(shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ValueError(f"image shape must be (C, H, W) or (H, W), got {shape}")
    return np.arange(int(np.prod(shape))).reshape(shape)[:, :, ::-1].reshape(-1).copy()


def flip_matrix(shape) -> np.ndarray:
    """[D, D] permutation matrix of the horizontal flip: flipped x = R @ x."""
    p = flip_permutation(shape)
    R = np.zeros((p.size, p.size))
    R[np.arange(p.size), p] = 1.0
    return R


def load_digits() -> ImageData:
    """scikit-learn's bundled 8x8 digits (1797 images, 10 classes), pixels scaled to [0, 1]."""
    d = require("sklearn.datasets", "loading the bundled 8x8 digits").load_digits()
    return ImageData((d.data / 16.0).astype(np.float32), d.target.astype(np.int64), (1, 8, 8), "digits")


def _to_chw(img) -> np.ndarray:
    if isinstance(img, torch.Tensor):
        a = img.detach().cpu().numpy()
        return a[None] if a.ndim == 2 else a  # torchvision tensors are already [C, H, W]
    a = np.asarray(img)
    if a.ndim == 2:
        return a[None]
    if a.ndim == 3:  # PIL / numpy images are [H, W, C]
        return np.moveaxis(a, -1, 0)
    raise ValueError(f"image must be 2D or 3D, got shape {list(a.shape)}")


def from_dataset(dataset, limit: int | None = None, name: str = "dataset") -> ImageData:
    """Convert a torchvision-style dataset (len() and (image, label) items) to ImageData.

    Images may be PIL images, [H, W(, C)] numpy arrays or [C, H, W] tensors; uint8 is scaled by 1/255.
    """
    if not hasattr(dataset, "__len__") or not hasattr(dataset, "__getitem__"):
        raise ValueError("dataset must support len() and indexing returning (image, label)")
    n = len(dataset) if limit is None else min(int(limit), len(dataset))
    if n < 1:
        raise ValueError("dataset is empty")
    xs, ys = [], []
    for i in range(n):
        img, label = dataset[i]
        a = _to_chw(img)
        xs.append(a.astype(np.float32) / (255.0 if a.dtype == np.uint8 else 1.0))
        ys.append(int(label))
    shapes = {a.shape for a in xs}
    if len(shapes) != 1:
        raise ValueError(f"images have different shapes: {sorted(shapes)[:3]}")
    shape = shapes.pop()
    x = np.stack(xs).reshape(n, -1)
    if not np.isfinite(x).all():
        raise ValueError("images contain NaN or inf")
    return ImageData(x, np.asarray(ys, np.int64), tuple(int(s) for s in shape), name)


# What a CIFAR10 batch pickle may reference: numpy array reconstruction and nothing else.
_PICKLE_ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
                   ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
                   ("numpy._core.multiarray", "scalar"), ("_codecs", "encode")}


class _ArraysOnlyUnpickler(pickle.Unpickler):
    """Unpickles builtins and numpy arrays only; any other class or function is refused."""

    def find_class(self, module, name):
        if (module, name) in _PICKLE_ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dataset pickle")


def _read_cifar_batch(path: str):
    with open(path, "rb") as f:
        d = _ArraysOnlyUnpickler(f, encoding="bytes").load()
    if not isinstance(d, dict):
        raise ValueError(f"{path!r} is not a CIFAR10 batch (a dict), got {type(d).__name__}")
    d = {(k.decode() if isinstance(k, bytes) else k): v for k, v in d.items()}
    if "data" not in d or "labels" not in d:
        raise ValueError(f"{path!r} must hold 'data' and 'labels', has {sorted(map(str, d))}")
    x = np.asarray(d["data"])
    y = np.asarray(d["labels"], dtype=np.int64)
    if x.dtype != np.uint8 or x.ndim != 2 or x.shape[1] != 3072 or len(y) != len(x):
        raise ValueError(f"{path!r}: data must be uint8 [N, 3072] with N labels, got {x.dtype} {list(x.shape)}, "
                         f"{len(y)} labels")
    return x, y


def load_cifar10(root: str, train: bool = True, limit: int | None = None) -> ImageData:
    """CIFAR10 from its own on-disk format (python pickle batches), without torchvision.

    Args:
        root: a directory holding `cifar-10-batches-py/` or the batch files themselves
            (`data_batch_1` ... `data_batch_5`, `test_batch`; each a dict with `data` uint8 [N, 3072]
            (R, G, B planes of 32 x 32) and `labels` [N]). The pickles are read with an unpickler that
            only builds numpy arrays and builtins, never arbitrary classes.
        train: data_batch_* (True) or test_batch (False).

    Returns:
        ImageData with x [N, 3072] in [0, 1], shape (3, 32, 32).
    """
    if not root or not os.path.isdir(root):
        raise FileNotFoundError(f"dataset root {root!r} is not a directory (symfast never downloads data)")
    base = os.path.join(root, "cifar-10-batches-py")
    base = base if os.path.isdir(base) else root
    names = [f"data_batch_{i}" for i in range(1, 6)] if train else ["test_batch"]
    files = [os.path.join(base, n) for n in names if os.path.isfile(os.path.join(base, n))]
    if not files:
        raise FileNotFoundError(f"no CIFAR10 batches ({names[0]}, ...) under {root!r} (symfast never downloads data)")
    xs, ys, n = [], [], 0
    for path in files:
        x, y = _read_cifar_batch(path)
        xs.append(x)
        ys.append(y)
        n += len(x)
        if limit is not None and n >= limit:
            break
    x, y = np.concatenate(xs), np.concatenate(ys)
    if limit is not None:
        x, y = x[:limit], y[:limit]
    return ImageData(x.astype(np.float32) / 255.0, y, (3, 32, 32), "cifar10")


def load_local(name: str, root: str, train: bool = True, limit: int | None = None) -> ImageData:
    """A torchvision dataset the user already has under `root` (never downloaded).

    Args:
        name: "cifar10", "mnist" or "fashionmnist".
        root: the directory torchvision would use (e.g. the one containing cifar-10-batches-py).
    """
    table = {"cifar10": "CIFAR10", "mnist": "MNIST", "fashionmnist": "FashionMNIST"}
    key = name.lower().replace("-", "").replace("_", "")
    if key not in table:
        raise ValueError(f"unknown local dataset {name!r}; choose from {sorted(table)} or use from_dataset()")
    if not root or not os.path.isdir(root):
        raise FileNotFoundError(f"dataset root {root!r} is not a directory (symfast never downloads data)")
    if key == "cifar10":  # its own pickle format, read safely without torchvision
        return load_cifar10(root, train, limit)
    try:
        import torchvision
    except ImportError as e:
        raise ValueError("torchvision is needed to read local CIFAR10/MNIST; install it, or pass your own "
                         "dataset object to symfast.layerwise.data.from_dataset") from e
    try:
        ds = getattr(torchvision.datasets, table[key])(root=root, train=train, download=False)
    except RuntimeError as e:  # torchvision: "Dataset not found or corrupted"
        raise FileNotFoundError(f"{table[key]} not found under {root!r}: {e}") from e
    return from_dataset(ds, limit=limit, name=key)


MAX_CLASSES = 1 << 16  # labels are class indices; the classifier has one output per class


def load_npz(path: str, limit: int | None = None) -> ImageData:
    """Images from an .npz with `images` [N, H, W] / [N, C, H, W] (uint8, or finite floats) and integer
    `labels` [N] in 0..MAX_CLASSES-1; anything else raises ValueError naming the file (no pickles are read)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no such file: {path!r}")
    with np.load(path) as f:
        if "images" not in f or "labels" not in f:
            raise ValueError(f"{path!r} must contain arrays 'images' and 'labels', has {sorted(f.files)}")
        images, labels = f["images"], f["labels"]
    if images.ndim == 3:
        images = images[:, None]
    if images.ndim != 4 or labels.ndim != 1 or len(labels) != len(images) or len(images) == 0:
        raise ValueError(f"{path!r}: images must be [N, (C,) H, W] with N >= 1 and labels [N], got images "
                         f"{list(images.shape)} and labels {list(labels.shape)}")
    if images.dtype != np.uint8 and images.dtype.kind != "f":
        raise ValueError(f"{path!r}: images must be uint8 or float, got {images.dtype}")
    if images.dtype.kind == "f" and not np.isfinite(images).all():
        raise ValueError(f"{path!r}: images contain NaN or Inf")
    if labels.dtype.kind not in "iu":
        raise ValueError(f"{path!r}: labels must be integers, got {labels.dtype}")
    if labels.min() < 0 or labels.max() >= MAX_CLASSES:
        raise ValueError(f"{path!r}: labels must be class indices in 0..{MAX_CLASSES - 1}, got values "
                         f"{labels.min()}..{labels.max()}")
    if limit is not None and (isinstance(limit, bool) or int(limit) != limit or limit < 1):
        raise ValueError(f"limit must be a positive integer, got {limit!r}")
    n = len(images) if limit is None else min(int(limit), len(images))
    x = images[:n].astype(np.float32) / (255.0 if images.dtype == np.uint8 else 1.0)
    return ImageData(x.reshape(n, -1), np.asarray(labels[:n], np.int64), tuple(images.shape[1:]), "npz")


def load_image_data(data: str = "digits", root: str | None = None, limit: int | None = None) -> ImageData:
    """CLI dispatcher: "digits", "cifar10"/"mnist"/"fashionmnist" (with root), or a path to an .npz."""
    if data == "digits":
        d = load_digits()
        return d if limit is None else ImageData(d.x[:limit], d.y[:limit], d.shape, d.name)
    if data.endswith(".npz"):
        return load_npz(data, limit)
    if root is None:
        raise ValueError(f"--data {data} needs --root (a local directory; nothing is downloaded)")
    return load_local(data, root, limit=limit)
