"""The layerwise summary: architectures x activations, and the autoencoder regime grid.

`run_suite` trains, per (architecture, activation), a flip-invariant classifier and a control on
images, and tabulates the layer-1 weight / data errors against the random baseline, the counts of
symmetric / antisymmetric / paired filters, and the accuracy before and after projecting onto the
recovered actions (and onto random pairings). `autoencoder_regimes` asks when an autoencoder with the
equivariance loss shows the structure: it scales the inputs (pushing tanh out of its linear range)
and the weight decay, and reports the near-linear fraction next to the errors and counts.
"""
from __future__ import annotations

import numpy as np

from symfast._optional import require
from symfast._progress import Progress, reporter
from symfast.layerwise.cnn_experiments import analyse_cnn, train_cnn
from symfast.layerwise.data import ImageData
from symfast.layerwise.experiments import analyse, train_equivariant
from symfast.layerwise.protocol import rows_markdown, train_test_split

__all__ = ["run_suite", "format_suite", "autoencoder_regimes", "format_regimes", "plot_regimes"]


def _counts(c: dict) -> str:
    return f"{c['fixed']}/{c['antisymmetric']}/{c['cycled']}"


def run_suite(data: ImageData, models=("mlp", "cnn"), activations=("tanh", "sigmoid", "relu"), steps: int = 600,
              cnn_steps: int = 500, cnn_channels=(8, 16), equivariance_weight: float = 1.0, seed: int = 0,
              progress: Progress = False, figures_dir: str | None = None) -> list:
    """One row per (model, activation, variant); variant "equivariant" (loss on) or "control" (off).

    figures_dir: if given, the layer-1 filters of each model's first activation are drawn by orbit
    (filters_<variant>.png for the MLP, filters_cnn_<variant>.png for the CNN's kernels).
    """
    import os

    from symfast.layerwise.conv import as_cnn
    from symfast.layerwise.network import as_mlp
    from symfast.layerwise.plots import lit_pixels, plot_filters_by_orbit

    train, test = train_test_split(data)
    rows = []
    for model in models:
        for act in activations:
            for variant, w in (("equivariant", equivariance_weight), ("control", 0.0)):
                reporter(progress, "symfast.layerwise")(f"suite: {model} ({act}) {variant}")
                if model == "mlp":
                    net = train_equivariant("classifier", train, act, w, steps=steps, seed=seed)
                    r = analyse(net, "classifier", test)
                    W1, shape, lit = as_mlp(net).layers[0][0], data.shape, lit_pixels(train.x)
                    p = r.projection
                    acc = (p.get("loss_before", np.nan), p.get("loss_after", np.nan), p.get("loss_random", np.nan))
                    data_err = float(r.data_errors[0])
                elif model == "cnn":
                    net = train_cnn(train, act, cnn_channels, w, steps=cnn_steps, seed=seed)
                    r = analyse_cnn(net, test)
                    W1 = as_cnn(net).convs[0][0]
                    W1, shape, lit = W1.reshape(len(W1), -1), W1.shape[1:], None  # kernels slide: all lit
                    p = r.projection
                    acc = (p["accuracy_before"], p["accuracy_after"], p["accuracy_random"])
                    data_err = float(r.data_errors[0])
                else:
                    raise ValueError(f"model must be 'mlp' or 'cnn', got {model!r}")
                if figures_dir is not None and act == activations[0]:
                    name = f"filters_{variant}.png" if model == "mlp" else f"filters_{model}_{variant}.png"
                    plot_filters_by_orbit(W1, shape, r.actions, os.path.join(figures_dir, name), lit=lit,
                                          title=f"{model} ({act}), {variant}: layer-1 filters by orbit")
                rows.append({"model": model, "activation": act, "variant": variant,
                             "weight_error": float(r.actions.errors[0]), "random": float(r.actions.baseline[0]),
                             "data_error": data_err, "end_to_end": float(r.equivariance),
                             "counts": r.actions.count_list()[0], "accuracy": acc})
    return rows


def format_suite(rows: list) -> str:
    """Markdown table of `run_suite` rows (layer 1; counts at the weight level, residual < threshold)."""
    return rows_markdown(
        ["model", "activation", "variant", "L1 weight err", "random", "L1 data err", "end-to-end err",
         "sym/anti/paired (weights)", "accuracy", "projected", "random proj."],
        [(r["model"], r["activation"], r["variant"],
          *(f"{r[k]:.3f}" for k in ("weight_error", "random", "data_error", "end_to_end")), _counts(r["counts"]),
          *(f"{a:.3f}" for a in r["accuracy"])) for r in rows])


def autoencoder_regimes(data: ImageData, scales=(1.0, 4.0), weight_decays=(0.0, 0.5), activation: str = "tanh",
                        steps: int = 400, seed: int = 0, progress: Progress = False) -> list:
    """Autoencoders (64-128-32-128-64, equivariance loss weight 1) over input scale x weight decay.

    Scaling the inputs by s moves the pre-activations out of tanh's near-linear range, where the
    hidden basis is defined only up to an invertible linear map (no permutation structure can be
    identified). Returns one dict per setting with near-linear fractions, layer-1 errors, counts (weight
    and data level) and the relative reconstruction error.
    """
    train, test = train_test_split(data)
    rows = []
    for s in scales:
        tr = ImageData(train.x * s, train.y, train.shape, train.name)
        te = ImageData(test.x * s, test.y, test.shape, test.name)
        for wd in weight_decays:
            reporter(progress, "symfast.layerwise")(f"autoencoder regime: input scale {s}, weight decay {wd}")
            r = analyse(train_equivariant("autoencoder", tr, activation, 1.0, weight_decay=wd, steps=steps, seed=seed),
                        "autoencoder", te, project=False)
            rows.append({"scale": float(s), "weight_decay": float(wd), "near_linear": r.near_linear.tolist(),
                         "weight_error": float(r.actions.errors[0]), "random": float(r.actions.baseline[0]),
                         "data_error": float(r.data_errors[0]), "counts": r.actions.count_list()[0],
                         "counts_data": r.actions.count_list(level="data")[0],
                         "relative_mse": float(r.metric / max((te.x ** 2).sum(1).mean(), 1e-300))})
    return rows


def format_regimes(rows: list) -> str:
    return rows_markdown(
        ["input scale", "weight decay", "near-linear (layer 1)", "L1 weight err", "random", "L1 data err",
         "sym/anti/paired (weights)", "sym/anti/paired (data)", "relative MSE"],
        [(f"{r['scale']:g}", f"{r['weight_decay']:g}", f"{r['near_linear'][0]:.2f}",
          *(f"{r[k]:.3f}" for k in ("weight_error", "random", "data_error")), _counts(r["counts"]),
          _counts(r["counts_data"]), f"{r['relative_mse']:.3f}") for r in rows])


def plot_regimes(rows: list, path=None, axes=None):
    """Layer-1 weight error / random baseline against the near-linear fraction, one point per setting,
    and the counts of symmetric / antisymmetric / paired units per setting.

    Args:
        rows: `autoencoder_regimes` rows.
        path: optional PNG path. axes: optional pair of Axes.

    Returns:
        the figure (the matplotlib backend is left as it is).
    """
    plt = require("matplotlib.pyplot", "plotting")

    from symfast.plotting import FONT, SMALL, finish, legend_outside

    created = axes is None
    if created:
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.0), layout="constrained")
    ax = list(np.ravel(axes))
    fig = ax[0].figure
    nl = [r["near_linear"][0] for r in rows]
    ax[0].scatter(nl, [r["weight_error"] / r["random"] for r in rows], c="C0", label="weights: error / random")
    ax[0].scatter(nl, [r["data_error"] for r in rows], c="C1", marker="s", label="data: relative error")
    ax[0].axhline(1.0, color="0.5", ls=":", lw=1, label="random permutation level")
    for r, x in zip(rows, nl):
        ax[0].annotate(f"s={r['scale']:g}, wd={r['weight_decay']:g}", (x, r["weight_error"] / r["random"]),
                       fontsize=SMALL, xytext=(3, 3), textcoords="offset points")
    ax[0].set_xlabel("fraction of layer-1 pre-activations with |z| < 0.5 (near-linear tanh)", fontsize=SMALL)
    ax[0].set_ylabel("layer-1 error (unitless)", fontsize=SMALL)
    ax[0].tick_params(labelsize=SMALL)
    ax[0].set_title("equivariance error of the recovered action vs regime", fontsize=FONT)
    legend_outside(ax[0], where="below", ncol=2, bbox_to_anchor=(0.5, -0.16))
    labels = [f"s={r['scale']:g}\nwd={r['weight_decay']:g}" for r in rows]
    x = np.arange(len(rows))
    for k, (key, name) in enumerate((("fixed", "symmetric"), ("antisymmetric", "antisymmetric"),
                                     ("cycled", "paired"))):
        ax[1].bar(x + 0.27 * (k - 1), [r["counts_data"][key] for r in rows], 0.27, label=name)
    ax[1].set_xticks(x, labels, fontsize=SMALL)
    ax[1].set_xlabel("input scale s, weight decay wd", fontsize=SMALL)
    ax[1].set_ylabel("layer-1 units (data level)", fontsize=SMALL)
    ax[1].tick_params(axis="y", labelsize=SMALL)
    ax[1].set_title("units per orbit type of the recovered action", fontsize=FONT)
    legend_outside(ax[1])
    fig.suptitle("autoencoder with flip-equivariance loss: regime vs recovered structure", fontsize=FONT)
    return finish(fig, path, created)
