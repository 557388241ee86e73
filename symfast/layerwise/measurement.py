"""Reading one trained flip-invariant MLP classifier: the table row every MLP sweep records per net.

`measure` reads a net against the flip: its end-to-end error on held-out covering inputs (and on the
covering law alone), its test accuracy, per layer the error of the recovered action
(`recover_latent_actions`) next to the random-permutation baseline, the accuracy after projecting
onto the recovered actions, and the near-linear fraction and dead or duplicated units the
identifiable reduction (`identifiable_submodel`) finds. The exactness sweep
(`symfast.layerwise.exactness`) and the identifiability sweeps (`symfast.layerwise.identifiability`,
`symfast.layerwise.matched`) build their tables from it.
"""
from __future__ import annotations

import numpy as np

from symfast.layerwise.data import ImageData, flip_matrix
from symfast.layerwise.network import MLP
from symfast.layerwise.recovery import recover_latent_actions
from symfast.layerwise.reduction import identifiable_submodel, near_linear_fraction

__all__ = ["measure", "LAYER_COLUMNS"]

# The per-layer columns of a row, each as <layer>_<column> for layer1, layer2, ..., output.
LAYER_COLUMNS = ["error", "bias_error", "random", "ratio"]


def _layer_names(n: int) -> list:
    return [f"layer{l + 1}" for l in range(n - 1)] + ["output"]


def measure(net: MLP, test: ImageData, cover: np.ndarray, reduced: bool = False, law: np.ndarray | None = None) -> dict:
    """One trained invariant classifier read against the flip: a table row (without its keys).

    Args:
        net: the trained MLP; test: held-out data; cover: [N, D] held-out covering inputs (test
            data and off-data samples), where the end-to-end error is measured.
        reduced: also read the identifiable sub-model (`identifiable_submodel` on `cover`): per layer
            its recovered action's error, random error and ratio (columns <layer>_<c>_reduced), and
            the near-linear fraction of every hidden layer (layer<l>_near_linear).
        law: [M, D] fresh samples of the covering law alone (no data): also report end_to_end_law,
            the error on them, i.e. on the space the penalty covers rather than on new digits.

    Returns:
        end_to_end (on `cover`), end_to_end_data (on the test data), [end_to_end_law], accuracy; per layer (layer1,
        layer2, ..., output) the recovered action's weight error, bias error, random-permutation
        error and their ratio; per hidden layer its data-level error on the test data
        (<layer>_data_error, `data_errors`); test accuracy after projecting the weights onto the
        recovered actions and onto random pairings (accuracy_projected, accuracy_random_projection,
        `projection_report`; NaN where the actions generate too large a group); layer-1 near-linear
        fraction on `cover`; dead / duplicate units removed by the identifiable reduction.
    """
    from symfast.layerwise.projection import equivariance_error, projection_report

    if np.ndim(cover) != 2 or np.shape(cover)[1] != net.sizes[0] or test.x.shape[1] != net.sizes[0]:
        raise ValueError(f"cover and test.x must be [N, {net.sizes[0]}], got {list(np.shape(cover))}, "
                         f"{list(test.x.shape)}")
    if law is not None and (np.ndim(law) != 2 or np.shape(law)[1] != net.sizes[0] or len(law) == 0):
        raise ValueError(f"law must be [M >= 1, {net.sizes[0]}], got {list(np.shape(law))}")

    def accuracy(out):
        return float((out.argmax(1) == test.y).mean())

    R = flip_matrix(test.shape)
    acts = recover_latent_actions(net, R, data=test.x)
    row = {"end_to_end": equivariance_error(net, cover, R), "end_to_end_data": equivariance_error(net, test.x, R)}
    if law is not None:
        row["end_to_end_law"] = equivariance_error(net, law, R)
    row["accuracy"] = accuracy(net(test.x))
    for name, e, be, r in zip(_layer_names(net.num_layers), acts.errors, acts.bias_errors, acts.baseline):
        row.update({f"{name}_{c}": float(v) for c, v in zip(LAYER_COLUMNS, (e, be, r, e / r))})
    # the hidden layers' data-level errors (the output's is end_to_end_data)
    row.update({f"{name}_data_error": float(v) for name, v in zip(_layer_names(net.num_layers)[:-1], acts.data_errors)})
    try:  # accuracy after projecting the weights onto the recovered actions, and onto random pairings
        proj = projection_report(net, acts, test.x, R, loss_fn=accuracy)
        row["accuracy_projected"], row["accuracy_random_projection"] = proj["loss_after"], proj["loss_random"]
    except ValueError:  # the recovered actions generate a huge group: no projection to read
        row["accuracy_projected"] = row["accuracy_random_projection"] = float("nan")
    near = near_linear_fraction(net, cover)
    row["layer1_near_linear"] = float(near[0])
    red = identifiable_submodel(net, data=cover)
    whys = [why for layer in red.removed for _, why in layer]
    row["dead_units"] = sum(w in ("zero-out", "constant", "dead-on-data") for w in whys)
    row["duplicate_units"] = sum(w.startswith("duplicate") for w in whys)
    if reduced:
        row.update({f"layer{l + 1}_near_linear": float(v) for l, v in enumerate(near)})
        racts = recover_latent_actions(red.model, R)
        for name, e, r in zip(_layer_names(red.model.num_layers), racts.errors, racts.baseline):
            row.update({f"{name}_error_reduced": float(e), f"{name}_random_reduced": float(r),
                        f"{name}_ratio_reduced": float(e / r)})
    return row

