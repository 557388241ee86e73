"""Natural-image patches from the photographs scikit-image ships, and the flip-equivariant autoencoder on them.

The layerwise paper ("Identifiable Equivariant Networks are Layerwise Equivariant", Shahverdi, Marchetti,
Bökman, Kohn) trains small MLPs on CIFAR10 with a horizontal-flip equivariance loss and finds symmetric and
antisymmetric first-layer filters. CIFAR10 cannot be downloaded here, so this module cuts patches out of the
sample photographs inside the scikit-image wheel (`SAMPLE_IMAGES`; read from the wheel's data directory, never
fetched: the images scikit-image downloads on demand are not used), trains the autoencoder of
`symfast.layerwise.experiments` on them (equivariance loss |f(Fx) - F f(x)|^2, and a control without it) and
sorts the layer-1 filters by the recovered signed permutation (`filter_classes`): symmetric (s+, the flip maps
the unit to itself), antisymmetric (s-, to minus itself), paired, or unmatched, counting a unit only when its
mirrored filter matches, bias left out (`filter_level`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np

from symfast._progress import Progress
from symfast.layerwise.recovery import DEFAULT_THRESHOLD, LatentActions, LayerAction, recover_latent_actions
from symfast.layerwise.data import ImageData, flip_matrix
from symfast.layerwise.network import as_mlp

__all__ = ["SAMPLE_IMAGES", "sample_images", "load_patches", "filter_classes", "filter_level", "PatchSettings",
           "patch_study", "format_patch_study", "INSTALL_HINT"]

# Photographs (and two textures) inside the scikit-image wheel's data directory, present offline. Excluded:
# drawings, documents, binary masks, stereo duplicates, and every image scikit-image fetches on demand.
SAMPLE_IMAGES = ("astronaut.png", "brick.png", "camera.png", "chelsea.png", "coffee.png", "coins.png", "grass.png",
                 "gravel.png", "hubble_deep_field.jpg", "moon.png", "motorcycle_left.png", "rocket.jpg")
INSTALL_HINT = "pip install scikit-image (or pip install 'symfast[layerwise]')"
COLORS = ("gray", "channels")


def _skimage():
    try:
        import skimage
        import skimage.color
        import skimage.io
    except ImportError as e:
        raise ImportError(f"natural-image patches read scikit-image's bundled photographs: {INSTALL_HINT}") from e
    return skimage


def sample_images(names=SAMPLE_IMAGES, color: str = "gray") -> list:
    """The bundled photographs as float arrays in [0, 1], read from the installed wheel (nothing is fetched).

    Args:
        names: file names in scikit-image's data directory (default `SAMPLE_IMAGES`).
        color: "gray" (colour images converted with skimage.color.rgb2gray) or "channels" (each RGB
            channel of a colour image as its own gray image).

    Returns:
        list of (name, [H, W] float64 array).
    """
    if color not in COLORS:
        raise ValueError(f"color must be one of {COLORS}, got {color!r}")
    ski = _skimage()
    root = os.path.join(os.path.dirname(ski.__file__), "data")
    out = []
    for name in names:
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{name!r} is not in scikit-image's data directory {root!r} (only images the "
                                    "wheel ships are used; nothing is downloaded)")
        a = ski.io.imread(path)
        a = a[..., :3] if a.ndim == 3 else a
        a = a.astype(np.float64) / (255.0 if a.dtype == np.uint8 else max(float(a.max()), 1.0))
        if a.ndim == 2:
            out.append((name, a))
        elif color == "gray":
            out.append((name, ski.color.rgb2gray(a)))
        else:
            out.extend((f"{name}[{c}]", a[..., k]) for k, c in enumerate("RGB"))
    return out


def load_patches(size: int = 8, count: int = 20000, seed: int = 0, color: str = "gray", flip_closed: bool = False,
                 normalize: bool = True, scale: float = 1.0, names=SAMPLE_IMAGES) -> ImageData:
    """Square patches cut at random positions out of the bundled photographs, deterministic by seed.

    Args:
        size: patch side, 4..32 (the paper-like range is 8..16).
        count: number of patches; with flip_closed it must be even (count / 2 patches and their mirrors).
        seed: positions are drawn with numpy's default_rng(seed); each patch comes from an image chosen with
            probability proportional to its number of patch positions.
        color: "gray" or "channels" (see `sample_images`).
        flip_closed: append the horizontal mirror of every patch, so the set is closed under the flip.
        normalize: subtract each patch's mean and divide by the standard deviation of all centred pixels
            (both commute with the flip); False keeps raw intensities in [0, 1].
        scale: multiplies the result (pixel standard deviation `scale` when normalized); larger inputs push
            tanh units out of their near-linear range, where the hidden basis is only defined up to a linear map.
        names: image files to cut from (default `SAMPLE_IMAGES`).

    Returns:
        ImageData with x [count, size * size] float32, y all zero (patches have no labels), shape (1, size, size).
    """
    if isinstance(size, bool) or int(size) != size or not 4 <= size <= 32:
        raise ValueError(f"patch size must be an integer in 4..32, got {size!r}")
    if isinstance(count, bool) or int(count) != count or count < 2:
        raise ValueError(f"patch count must be an integer >= 2, got {count!r}")
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not np.isfinite(scale) or scale <= 0:
        raise ValueError(f"patch scale must be a finite number > 0, got {scale!r}")
    if flip_closed and count % 2:
        raise ValueError(f"a flip-closed patch set holds patches and their mirrors: count must be even, got {count}")
    images = sample_images(names, color)
    rng = np.random.default_rng(seed)
    positions = np.array([(a.shape[0] - size + 1) * (a.shape[1] - size + 1) for _, a in images], dtype=np.float64)
    n = count // 2 if flip_closed else count
    which = rng.choice(len(images), size=n, p=positions / positions.sum())
    x = np.empty((n, size, size))
    for k, (_, a) in enumerate(images):
        sel = np.flatnonzero(which == k)
        rows = rng.integers(0, a.shape[0] - size + 1, sel.size)
        cols = rng.integers(0, a.shape[1] - size + 1, sel.size)
        win = np.lib.stride_tricks.sliding_window_view(a, (size, size))
        x[sel] = win[rows, cols]
    if flip_closed:
        x = np.concatenate([x, x[:, :, ::-1]])
    if normalize:
        x = x - x.mean(axis=(1, 2), keepdims=True)
        x = x / max(float(x.std()), 1e-12)
    x = x * scale
    return ImageData(x.reshape(len(x), -1).astype(np.float32), np.zeros(len(x), np.int64), (1, size, size),
                     f"patches{size}")


def filter_level(acts: LatentActions, W1) -> LatentActions:
    """`acts` with layer 1's residual replaced by max(matching residual, filter residual).

    The matching residual ||a_i - s_i b_pi(i)|| / ||a_i|| compares rows [filter, bias]; when the biases are large
    next to the filters (e.g. large inputs with weight decay) it can be small although the mirrored filter is
    nothing like s_i times the matched one. The filter residual ||(W1 rho_in)_i - s_i (W1)_pi(i)|| / ||(W1 rho_in)_i||
    leaves the bias out; a unit counts as s+ / s- / paired only when both lie below the threshold (the rule of
    `LayerAction.counts`, given this residual). Errors, baselines and deeper layers are unchanged.

    Args:
        acts: recovered actions of an MLP; W1: [H, D] its first-layer weights.
    """
    W1 = np.asarray(W1, dtype=np.float64)
    a = acts.actions[0]
    if W1.shape != (a.size, acts.rho_in.shape[0]):
        raise ValueError(f"W1 must be [{a.size}, {acts.rho_in.shape[0]}], got {list(W1.shape)}")
    mirrored = W1 @ acts.rho_in
    n = np.linalg.norm(mirrored, axis=1)
    res = np.linalg.norm(mirrored - a.scale[:, None] * W1[a.index], axis=1) / np.where(n > 0, n, 1.0)
    first = LayerAction(a.index, a.scale, np.maximum(np.nan_to_num(a.residual, nan=0.0), res))
    return replace(acts, actions=[first] + list(acts.actions[1:]))


def _classes(acts: LatentActions) -> dict:
    c = acts.count_list()[0]
    return {"s+": c["fixed"], "s-": c["antisymmetric"], "paired": c["cycled"], "unmatched": c["unmatched"]}


def filter_classes(net, shape, rho_out="flip", threshold: float = DEFAULT_THRESHOLD, data=None) -> dict:
    """Layer-1 filters sorted by the signed permutation recovered for the horizontal flip.

    Args:
        net: an MLP (nn.Sequential, `MLP` or list of (W, b)) on flattened images of `shape`.
        shape: (C, H, W) image shape of the input.
        rho_out: "flip" (an equivariant autoencoder: the output is flipped too) or None (an invariant network).
        threshold: residual threshold (`LayerAction.counts`).
        data: optional [N, D] inputs for the data-level error.

    Returns:
        dict with "s+" (units the flip maps to themselves), "s-" (to minus themselves), "paired" (units in
        longer cycles), "unmatched", counted on the filter-level residual (`filter_level`); "matching" (the same
        counts on the matching residual alone, the rule of the suite's tables); "error" and "random" (layer-1
        weight error of the recovered action and of random signed permutations); "actions" (`filter_level`'s
        LatentActions).
    """
    if rho_out not in ("flip", None):
        raise ValueError(f"rho_out must be 'flip' or None, got {rho_out!r}")
    mlp = as_mlp(net)
    R = flip_matrix(shape)
    acts = recover_latent_actions(mlp, R, R if rho_out == "flip" else None, data=data, threshold=threshold)
    filt = filter_level(acts, mlp.layers[0][0])
    out = {**_classes(filt), "matching": _classes(acts), "error": float(acts.errors[0]),
           "random": float(acts.baseline[0]), "actions": filt}
    if data is not None:
        out["data_error"] = float(acts.data_errors[0])
    return out


@dataclass
class PatchSettings:
    """One patch study: data, network and training settings (the autoencoder is d-128-32-128-d, tanh)."""

    size: int = 8
    count: int = 20000
    color: str = "gray"
    flip_closed: bool = False
    scale: float = 1.0
    data_seed: int = 0
    seeds: tuple = (0,)
    steps: int = 3000
    equivariance_weight: float = 1.0
    weight_decay: float = 0.0
    activation: str = "tanh"
    threshold: float = DEFAULT_THRESHOLD
    lr: float = 2e-3
    batch: int = 256
    control: bool = True


def patch_study(s: PatchSettings, progress: Progress = False, data: ImageData | None = None) -> dict:
    """Train the flip-equivariant autoencoder (and a control) per seed on patches and read its layer-1 filters.

    `data`: the patches, when already loaded (`load_patches` with the settings' size, count, ... by default).
    75 % of the patches train, the held-out 25 % measure (`run_experiment`).

    Returns:
        {"data": ImageData, "rows": [dict per (variant, seed)], "run": `run_experiment`'s dict, with
        "filters": {(variant, seed): `filter_level` LatentActions}}. A row's s+ / s- / paired / unmatched are
        counted on the filter-level residual; "matching s+/s-/paired" on the matching residual alone.
    """
    from symfast.layerwise.experiments import run_experiment

    if data is None:
        data = load_patches(s.size, s.count, s.data_seed, s.color, s.flip_closed, scale=s.scale)
    run = run_experiment(data, "autoencoder", s.activation, s.equivariance_weight, s.weight_decay, s.steps,
                         tuple(s.seeds), s.control, s.threshold, s.lr, s.batch, progress=progress)
    rows, run["filters"] = [], {}
    for variant in ("equivariant", "control"):
        for seed, r in zip(s.seeds, run[variant]):
            filt = filter_level(r.actions, as_mlp(run["nets"][(variant, seed)]).layers[0][0])
            run["filters"][(variant, seed)] = filt
            m = _classes(r.actions)
            rows.append({"variant": variant, "seed": seed, **_classes(filt),
                         "matching s+/s-/paired": f"{m['s+']}/{m['s-']}/{m['paired']}",
                         "layer1_error": float(r.actions.errors[0]), "layer1_random": float(r.actions.baseline[0]),
                         "layer1_data_error": float(r.data_errors[0]), "near_linear": float(r.near_linear[0]),
                         "mse": float(r.metric), "equivariance": float(r.equivariance)})
    return {"data": data, "rows": rows, "run": run}


def format_patch_study(rows: list, s: PatchSettings) -> str:
    """Markdown table of `patch_study` rows with the settings in a header line."""
    from symfast.layerwise.protocol import rows_markdown  # here: the protocol needs pandas, the patches do not

    head = (f"{s.count} {s.color} {s.size}x{s.size} patches (data seed {s.data_seed}, flip-closed {s.flip_closed}, "
            f"pixel std {s.scale:g}), "
            f"{s.activation} autoencoder d-128-32-128-d, {s.steps} steps, equivariance weight {s.equivariance_weight}, "
            f"weight decay {s.weight_decay}, threshold {s.threshold}")
    cols = ["variant", "seed", "s+", "s-", "paired", "unmatched", "matching s+/s-/paired", "layer1_error",
            "layer1_random", "layer1_data_error", "near_linear", "mse", "equivariance"]
    table = rows_markdown(cols, ([f"{r[c]:.3f}" if isinstance(r[c], float) else str(r[c]) for c in cols]
                                 for r in rows))
    return "\n".join([head, "", table])
