"""The exactness sweep: does the layer-level error close as end-to-end equivariance becomes exact?

The layerwise theorem ("Identifiable Equivariant Networks are Layerwise Equivariant", Shahverdi,
Marchetti, Bökman, Kohn) is about networks equivariant on all of R^n. The study's classifiers are
trained with an invariance penalty on data only, and the data cannot pin the flip down there (on
digits pixel 0 is always 0, its mirror pixel 7 is not). Here the penalty weight `lam` is swept and
the penalty is applied on inputs that cover the space: the data batch (its flip is the other half of
each pair, so mirrored data is covered too) and as many off-data samples, uniform in the data's
bounding cube or Gaussian around the flip-symmetrised mean (training: `symfast.layerwise.penalty_training`).
For every trained net the end-to-end error on held-out covering inputs is read next to the recovered
action's per-layer weight error, its bias error and the random-permutation baseline
(`symfast.layerwise.measurement`).

The relation is the slope of log(layer-1 error) against log(end-to-end error), fitted per
activation with a bootstrap interval over seeds. Its verdict (`exactness_claims`) is read on
held-out seeds, never on the seeds the figure and the table show, against bars fixed before the
first sweep was run (`SLOPE_BAR`, `EXACT_RATIO_BAR`; the seeds, the split and the bars are the
study's protocol, `symfast.layerwise.protocol`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from symfast._optional import require
from symfast._progress import Progress, reporter
from symfast.activations import activation as activation_entry
from symfast.layerwise.data import ImageData, flip_permutation
from symfast.layerwise.measurement import measure
from symfast.layerwise.penalty_training import ExactnessSettings, covering_inputs, train_sweep
from symfast.layerwise.protocol import (EXACT_RATIO_BAR, FIT, HELDOUT, SLOPE_BAR, TRAINED_ACCURACY, check_columns,
                                        claims_markdown, combine_verdicts, fit_slope, heldout_rows, law_generator,
                                        markdown_table, no_heldout_claim, seed_medians, seed_roles, seeds_text,
                                        slope_and_ratio, slope_cells, slope_fits, stage_steps, theorem_note,
                                        train_test_split, verdict_claim)
from symfast.report.claim import Verdict

pd = require("pandas", "the layerwise sweeps (their tables)")

__all__ = ["ExactnessResult", "exactness_sweep", "exactness_claims", "plot_exactness", "format_exactness",
           "summary_table", "ACTIVATIONS", "COLUMNS", "E2E_MEASURES"]

# tanh, sigmoid and the odd polynomial z + z^3/3: identifiability proven; relu: conjectural.
ACTIVATIONS = ("tanh", "sigmoid", "odd_poly", "relu")

# One row per trained net (`ExactnessResult.table`); the per-layer columns are layer1_*, layer2_*, output_*
# (`symfast.layerwise.measurement.LAYER_COLUMNS`).
COLUMNS = ["activation", "lam", "seed", "split", "end_to_end", "end_to_end_data", "end_to_end_law", "accuracy"]
# The end-to-end errors a relation is read against (column: words): on held-out covering inputs (test
# digits and as many fresh samples of the covering law), and on the fresh law samples alone, the inputs
# the penalty covers (exact there, on an open set, an analytic net is exact on all of R^n).
E2E_MEASURES = {"end_to_end": "end-to-end error", "end_to_end_law": "end-to-end error on the covering law"}


def exactness_claims(table: pd.DataFrame, bootstrap: int = 1000) -> list:
    """One verdict row per activation and end-to-end measure in the table (`E2E_MEASURES`), read on the
    held-out seeds (split == "heldout") only.

    Held when the log-log slope's 95 % interval lies above `SLOPE_BAR` and, at the sweep's largest
    penalty weight, the interval of the mean layer-1 error / random ratio lies below
    `EXACT_RATIO_BAR`; missed when either interval lies on the wrong side; otherwise not
    comparable (overlapping intervals, too few seeds, or end-to-end errors spanning
    less than `MIN_DECADES` decades; at least `symfast.report.claim.MIN_SEEDS` seeds are needed), or when
    the held-out nets' median test accuracy at the largest penalty weight is below `TRAINED_ACCURACY`.
    Both comparisons are `ranking_verdict` on intervals, the bar being a point interval
    (`symfast.layerwise.protocol.slope_and_ratio`).

    Returns:
        list of `Claim` (study "layerwise"), per activation in the table one per measure.
    """
    check_columns(table, ("activation", "lam", "seed", "split", "end_to_end", "layer1_error", "layer1_ratio"),
                  "the exactness table")
    e2e_cols = [c for c in E2E_MEASURES if c in table.columns]  # the law's only where it was measured
    claims = []
    for act, t in heldout_rows(table):
        kind, note = theorem_note(act)
        for col in e2e_cols:
            claim = f"Layer error -> 0 as {E2E_MEASURES[col]} -> 0 ({act}, identifiability {kind})"
            expected = (f"log-log slope of layer-1 error vs {E2E_MEASURES[col]} > {SLOPE_BAR:g} and layer-1 error / "
                        f"random < {EXACT_RATIO_BAR:g} at the largest penalty weight (held-out seeds, 95 % intervals)")
            if t.empty:
                claims.append(no_heldout_claim(claim, expected))
                continue
            r = slope_and_ratio(t, "layer1_error", "layer1_ratio", bootstrap, e2e_col=col)
            s, lo, hi, rr, rlo, rhi, decades, seeds, n, top = (r[k] for k in (
                "slope", "lo", "hi", "ratio", "ratio_lo", "ratio_hi", "decades", "seeds", "n", "top"))
            v = combine_verdicts([r["v_slope"], r["v_ratio"]], decades)
            acc = float(top["accuracy"].median()) if "accuracy" in top.columns else float("nan")
            if acc < TRAINED_ACCURACY:  # NaN (no accuracy column) passes: nothing to gate on
                v = Verdict("not comparable", f"not trained: median test accuracy {acc:.2f} at lam "
                                              f"{top['lam'].iloc[0]:g} (< {TRAINED_ACCURACY:g})")
            measured = (f"slope {s:.2f} [{lo:.2f}, {hi:.2f}]; ratio {rr:.2f} [{rlo:.2f}, {rhi:.2f}] at lam "
                        f"{top['lam'].iloc[0]:g}; {E2E_MEASURES[col]} {t[col].min():.1e}..{t[col].max():.1e} "
                        f"({decades:.1f} decades); seeds {seeds[0]}..{seeds[-1]} (n = {n})")
            claims.append(verdict_claim(claim, expected, measured, v, note))
    return claims


@dataclass
class ExactnessResult:
    """What `exactness_sweep` returns.

    Attributes:
        table: one row per trained net (`COLUMNS`, then layer1_/layer2_/output_ error, bias_error,
            random, ratio, and layer1_near_linear, dead_units, duplicate_units).
        fits: per activation and end-to-end measure ("against", `E2E_MEASURES`), the slope with its
            interval on the fit seeds and on the held-out seeds.
        claims: `exactness_claims` of the table (held-out seeds only).
        settings: the `ExactnessSettings` used.
    """

    table: pd.DataFrame
    fits: pd.DataFrame
    claims: list
    settings: ExactnessSettings


def exactness_sweep(data: ImageData, activations=ACTIVATIONS, settings: ExactnessSettings | None = None,
                    progress: Progress = False) -> ExactnessResult:
    """Train flip-invariant classifiers along the penalty path per activation and read each one.

    Fit seeds 0..seeds-1 and held-out seeds seed_offset.. train on the same 75 % of `data`; every net
    is read on the other 25 % and on as many fresh covering inputs (`measure`).
    """
    s = settings or ExactnessSettings()
    for a in activations:
        activation_entry(a)  # raises on an unknown name
    train, test = train_test_split(data)
    perm = flip_permutation(data.shape)
    law = covering_inputs(train.x, perm, s.covering)(len(test.x), law_generator()).numpy()
    cover = np.concatenate([test.x, law])
    split = seed_roles(s.seeds, s.heldout_seeds, s.seed_offset)
    rows = []
    for act in activations:
        reporter(progress, "symfast.layerwise")(f"exactness: {act}, {len(s.lams)} penalty weights x {len(split)} seeds")
        nets = train_sweep(train, act, s.lams, list(split), s)
        for (lam, sd), net in nets.items():
            rows.append({"activation": act, "lam": lam, "seed": sd, "split": split[sd], **measure(net, test, cover, law=law)})
    table = pd.DataFrame(rows)
    fits = [{"activation": act, "against": col,
             **slope_fits(table[table["activation"] == act], col, "layer1_error", s.bootstrap)}
            for act in activations for col in E2E_MEASURES]
    return ExactnessResult(table, pd.DataFrame(fits), exactness_claims(table, s.bootstrap), s)


def summary_table(table: pd.DataFrame) -> pd.DataFrame:
    """Medians over the fit seeds per (activation, lam): the table the figure and the guide show."""
    t = table[table["split"] == FIT]
    cols = ["end_to_end", "end_to_end_data", "end_to_end_law", "accuracy", "accuracy_projected",
            "accuracy_random_projection", "layer1_error", "layer1_bias_error", "layer1_random", "layer1_ratio",
            "layer1_data_error", "layer2_error", "layer2_random", "layer2_data_error", "layer1_near_linear",
            "dead_units", "duplicate_units"]
    cols = [c for c in cols if c in t.columns]
    return seed_medians(t, ["activation", "lam"], cols)


def format_exactness(res: ExactnessResult) -> str:
    """Markdown: the per-point medians (fit seeds), the slopes, the verdict rows (held-out seeds)."""
    s = res.settings
    head = (f"Penalty weights {list(s.lams)}; MLP {list(s.sizes)} hidden; {s.steps} steps for the first weight, "
            f"{stage_steps(s.steps, 1)} per further weight (continuation); penalty on data + {s.covering} off-data "
            f"samples; {seeds_text(s.seeds, s.heldout_seeds, s.seed_offset)}."
            + (f" Polish stage: penalty weights {list(s.polish_lams)}, each {s.polish_iters} full-batch L-BFGS "
               f"iterations (float64, memory {s.polish_history}) on the training digits + {s.polish_samples} fixed "
               f"off-data samples per net."
               if s.polish_lams else ""))
    summ = summary_table(res.table)
    fmt = {c: (lambda v: f"{v:.2e}") if c.startswith("end_to_end") else (lambda v: f"{v:.3g}") for c in summ.columns}
    slopes = pd.DataFrame([{"activation": f["activation"], "against": E2E_MEASURES[f["against"]], **slope_cells(f)}
                           for _, f in res.fits.iterrows()])
    lines = [head, "", "### Medians over the fit seeds", "", markdown_table(summ, fmt), "",
             "### Slopes of log(layer-1 error) vs log(end-to-end error), 95 % bootstrap intervals over seeds", "",
             markdown_table(slopes), "", f"### Verdicts (held-out seeds; bars fixed before any run: slope > "
             f"{SLOPE_BAR:g}, ratio < {EXACT_RATIO_BAR:g})", "", claims_markdown(res.claims)]
    return "\n".join(lines)


def plot_exactness(table: pd.DataFrame, path=None):
    """Log-log: layer-1 (and layer-2) error and the random baseline against the end-to-end error, one
    panel per activation, fit seeds (filled) and held-out seeds (open); a second row of panels against
    the error on the covering law alone where the table has it (`E2E_MEASURES`).

    Returns:
        the figure (the matplotlib backend is left as it is).
    """
    plt = require("matplotlib.pyplot", "plotting")

    from symfast.plotting import FONT, SMALL, finish, legend_outside

    acts = list(dict.fromkeys(table["activation"]))
    if not acts:
        raise ValueError("the exactness table is empty")
    measures = [c for c in E2E_MEASURES if c in table.columns]
    fig, axes = plt.subplots(len(measures), len(acts), figsize=(3.6 * len(acts), 3.6 * len(measures)),
                             layout="constrained", squeeze=False)
    for axrow, col in zip(axes, measures):
        for ax, act in zip(axrow, acts):
            t = table[table["activation"] == act]
            for part, face in ((FIT, None), (HELDOUT, "none")):
                p = t[t["split"] == part]
                lab = "" if part == FIT else " (held-out)"
                ax.scatter(p[col], p["layer1_error"], s=14, c="C0" if face is None else "none",
                           edgecolors="C0", label="layer 1" + lab)
                if "layer2_error" in p and (p["layer2_error"] > 0).any():
                    ax.scatter(p[col], p["layer2_error"].where(p["layer2_error"] > 0), s=14, marker="^",
                               c="C1" if face is None else "none", edgecolors="C1", label="layer 2" + lab)
                ax.scatter(p[col], p["layer1_random"], s=10, marker="x", c="0.5",
                           label="layer 1, random permutation" if part == FIT else None)
            f = t[t["split"] == FIT]
            if f["seed"].nunique() >= 1 and f[col].nunique() >= 2:
                k = fit_slope(f[col], f["layer1_error"], f["seed"], bootstrap=1)[0]
                lx = np.log(f[col])
                xs = np.exp(np.linspace(lx.min(), lx.max(), 2))
                ax.plot(xs, np.exp(np.log(f["layer1_error"]).mean() + k * (np.log(xs) - lx.mean())), color="C0",
                        lw=1, label="layer 1 fit (fit seeds)")
                ax.text(0.03, 0.03, f"slope {k:.2f}", transform=ax.transAxes, fontsize=SMALL)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(act, fontsize=FONT)
            ax.set_xlabel(E2E_MEASURES[col], fontsize=SMALL)
            ax.tick_params(which="both", labelsize=SMALL)
        axrow[0].set_ylabel("recovered-action weight error (relative)", fontsize=SMALL)
    legend_outside(axes[0][-1], where="right")
    return finish(fig, path)
