"""The identifiability sweep: do recovered hidden-layer actions fit better once units leave their linear range?

"Identifiable Equivariant Networks are Layerwise Equivariant" (Shahverdi, Marchetti, Bökman, Kohn)
needs identifiable parameters. A tanh or sigmoid unit whose pre-activations stay in the near-linear
range on the inputs is not identifiable there: a layer of such units is defined only up to an
invertible linear map of its hidden space, and no permutation action needs to fit it. So the theorem
predicts that a flip-invariant network whose units are out of that range carries a recovered action
closer to exact (relative to random permutations) than one whose units are near-linear.

Here flip-invariant MLP classifiers are trained with the exactness sweep's recipe (`train_sweep`,
`symfast.layerwise.penalty_training`: penalty on data and off-data covering inputs, a short penalty
continuation ending at a fixed strong weight) over a regime grid: the inputs are multiplied by a
scale s (small s: near-linear units, large s: saturated ones) and AdamW weight decay is off or
strong (which pulls weights, and with them the pre-activations, towards 0). Every net is read at the
last penalty weight by `measure` (`symfast.layerwise.measurement`: near-linear fraction per layer,
dead and duplicated units, end-to-end error, accuracy, per layer the recovered action's error and
random baseline, before and after `identifiable_submodel`).

The verdict row (`identifiability_claims`) compares the layer-1 error / random ratio of the reduced
nets in the identifiable group (layer-1 near-linear fraction below `SATURATED_BELOW`) with the
near-linear group (above `LINEAR_ABOVE`), on held-out seeds only, with the rule and the thresholds
fixed below before the first sweep ran.
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
from symfast.layerwise.protocol import (FIT, SPLITS, STUDY, TRAINED_ACCURACY, check_columns, claims_markdown,
                                        heldout_rows, interval_text, law_generator, markdown_table, seed_medians,
                                        seed_roles, seeds_text, stage_steps, theorem_note, train_test_split)
from symfast.report.claim import MIN_SEEDS, Claim

pd = require("pandas", "the layerwise sweeps (their tables)")

__all__ = ["IdentifiabilitySettings", "IdentifiabilityResult", "identifiability_sweep", "identifiability_claims",
           "trained_cells", "trained_groups", "group_comparison", "group_claim", "effect_test", "regime_summary",
           "format_identifiability", "plot_identifiability", "scaled", "summary_formats", "group_fit_done",
           "group_interval", "group_cells", "GROUPS_TEXT", "ACTIVATIONS", "SATURATED_BELOW", "LINEAR_ABOVE",
           "EFFECT_MARGIN", "RATIO_COLUMN", "SUMMARY_COLUMNS"]

# Fixed in the code before the first sweep ran. Groups by the layer-1 near-linear fraction
# (`near_linear_fraction` on the covering inputs): the identifiable group lies below SATURATED_BELOW,
# the near-linear group above LINEAR_ABOVE; nets in between enter no group. The effect is held when
# the identifiable group's mean layer-1 error / random ratio is lower by at least EFFECT_MARGIN
# (the 95 % bootstrap interval of the difference of means lies above it) and the two groups'
# intervals do not overlap; missed when the difference's interval lies below EFFECT_MARGIN.
SATURATED_BELOW = 0.2
LINEAR_ABOVE = 0.8
EFFECT_MARGIN = 0.1
# The ratio the verdict reads: layer 1 of the identifiable sub-model (dead / duplicated units removed),
# the network the theorem speaks about.
RATIO_COLUMN = "layer1_ratio_reduced"
# The two groups in words, as the report heads of both identifiability sweeps state them.
GROUPS_TEXT = (f"Groups: layer-1 near-linear fraction < {SATURATED_BELOW:g} (identifiable) and > {LINEAR_ABOVE:g} "
               f"(near-linear), trained nets only (test accuracy >= {TRAINED_ACCURACY:g})")

# tanh and sigmoid: identifiability proven; relu (conjectural) is accepted too.
ACTIVATIONS = ("tanh", "sigmoid")


@dataclass(frozen=True)
class IdentifiabilitySettings:
    """What one identifiability sweep trains.

    Attributes:
        scales: input scales s (> 0): every net sees s x the images (and covering inputs drawn
            from the scaled images' bounding cube).
        weight_decays: AdamW weight decays (>= 0), crossed with the scales.
        lams: the penalty continuation (`train_sweep`); every net is read at its last, largest weight.
        seeds: fit seeds 0..seeds-1 (tables, figure); heldout_seeds from seed_offset on (the verdict).
        sizes, steps, lr, batch, covering: as in `ExactnessSettings`.
        bootstrap: resamples for the group intervals.
    """

    scales: tuple = (0.03, 0.1, 0.3, 1.0, 3.0, 10.0)
    weight_decays: tuple = (0.0, 0.5)
    lams: tuple = (1.0, 100.0)
    seeds: int = 3
    heldout_seeds: int = 3
    seed_offset: int = 3
    sizes: tuple = (64, 32)
    steps: int = 800
    lr: float = 3e-3
    batch: int = 128
    covering: str = "uniform"
    bootstrap: int = 1000

    def __post_init__(self):
        if not self.scales or any(not np.isfinite(v) or v <= 0 for v in self.scales):
            raise ValueError(f"scales must be finite and > 0, got {list(self.scales)}")
        if not self.weight_decays or any(not np.isfinite(v) or v < 0 for v in self.weight_decays):
            raise ValueError(f"weight decays must be finite and >= 0, got {list(self.weight_decays)}")
        self.exactness(self.weight_decays[0])  # the training settings' own checks

    def exactness(self, weight_decay: float) -> ExactnessSettings:
        """The `ExactnessSettings` one grid cell trains with."""
        shared = ("lams", "seeds", "heldout_seeds", "seed_offset", "sizes", "steps", "lr", "batch", "covering",
                  "bootstrap")  # the fields this class has in common with ExactnessSettings
        kw = {f: getattr(self, f) for f in shared}
        return ExactnessSettings(**{**kw, "lams": tuple(self.lams), "sizes": tuple(self.sizes)},
                                 weight_decay=float(weight_decay))


@dataclass
class IdentifiabilityResult:
    """What `identifiability_sweep` returns.

    Attributes:
        table: one row per trained net: activation, scale, weight_decay, lam, seed, split, then
            `measure(..., reduced=True)`'s columns.
        fits: per activation and split (fit / heldout), the two groups' sizes, mean ratios with 95 %
            intervals and the difference (`effect_test`).
        claims: `identifiability_claims` of the table (held-out seeds only).
        settings: the `IdentifiabilitySettings` used.
    """

    table: pd.DataFrame
    fits: pd.DataFrame
    claims: list
    settings: IdentifiabilitySettings


def scaled(data: ImageData, s: float) -> ImageData:
    """`data` with every image multiplied by s (> 0)."""
    if not (np.isfinite(s) and s > 0):
        raise ValueError(f"input scale must be finite and > 0, got {s}")
    return ImageData((data.x * np.float32(s)).astype(np.float32), data.y, data.shape, data.name)


def trained_cells(data: ImageData, activations, s: IdentifiabilitySettings, progress: Progress = False,
                  label: str = "identifiability"):
    """Train the regime grid: yield, per (activation, scale, weight decay) cell, (activation, scale,
    weight_decay, test, cover, split, nets).

    The split, the covering inputs (drawn from the scaled training images with the law generator) and the
    seeds are the study's protocol (`symfast.layerwise.protocol`), the training the exactness sweep's: each
    cell trains its fit and held-out seeds stacked along `s.lams` (`train_sweep`). test: the scaled held-out
    digits; cover: those and as many covering inputs (where the end-to-end error and the near-linear fraction
    are read); split: {seed: "fit" or "heldout"}; nets: {(lam, seed): MLP}. `label` starts each progress line.
    """
    if not activations:
        raise ValueError("no activation given")
    for a in activations:
        activation_entry(a)  # raises on an unknown name
    train0, test0 = train_test_split(data)
    perm = flip_permutation(data.shape)
    split = seed_roles(s.seeds, s.heldout_seeds, s.seed_offset)
    for act in activations:
        for sc in s.scales:
            train, test = scaled(train0, sc), scaled(test0, sc)
            cover = np.concatenate([test.x, covering_inputs(train.x, perm, s.covering)(
                len(test.x), law_generator()).numpy()])
            for wd in s.weight_decays:
                reporter(progress, "symfast.layerwise")(f"{label}: {act}, scale {sc:g}, weight decay {wd:g}, "
                                                        f"{len(split)} seeds")
                yield act, float(sc), float(wd), test, cover, split, train_sweep(train, act, s.lams, list(split),
                                                                                 s.exactness(wd))


def identifiability_sweep(data: ImageData, activations=ACTIVATIONS, settings: IdentifiabilitySettings | None = None,
                          progress: Progress = False) -> IdentifiabilityResult:
    """Train flip-invariant classifiers per activation over scales x weight decays and read each one.

    The grid is trained by `trained_cells`; every net is measured at the last penalty weight.
    """
    s = settings or IdentifiabilitySettings()
    top = max(s.lams)
    rows = []
    for act, sc, wd, test, cover, split, nets in trained_cells(data, activations, s, progress):
        for sd in split:
            rows.append({"activation": act, "scale": sc, "weight_decay": wd, "lam": top, "seed": sd,
                         "split": split[sd], **measure(nets[(top, sd)], test, cover, reduced=True)})
    table = pd.DataFrame(rows)
    fits = pd.DataFrame([{"activation": act, "split": part, **group_comparison(
        table[(table["activation"] == act) & (table["split"] == part)], s.bootstrap)}
        for act in activations for part in SPLITS])
    return IdentifiabilityResult(table, fits, identifiability_claims(table, s.bootstrap), s)


def effect_test(ratio_identifiable, ratio_linear, bootstrap: int = 1000, seed: int = 0) -> dict:
    """The two groups' mean ratios with 95 % bootstrap intervals and the difference linear - identifiable.

    Each group is resampled on its own (nets with replacement); the difference's interval comes from the
    paired resamples. Returns keys ident, ident_lo, ident_hi, linear, linear_lo, linear_hi, diff, diff_lo,
    diff_hi and the verdict ("held", "missed" or "interval too wide") by the module's rule.
    """
    a, b = np.asarray(ratio_identifiable, float), np.asarray(ratio_linear, float)
    if a.ndim != 1 or b.ndim != 1 or len(a) < 1 or len(b) < 1:
        raise ValueError(f"both groups need >= 1 ratio as [N] arrays, got shapes {a.shape}, {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("ratios must be finite")
    if int(bootstrap) < 1:
        raise ValueError(f"bootstrap must be >= 1, got {bootstrap}")
    rng = np.random.default_rng(seed)
    ba = a[rng.integers(0, len(a), (bootstrap, len(a)))].mean(1)
    bb = b[rng.integers(0, len(b), (bootstrap, len(b)))].mean(1)
    q = lambda v: (float(np.quantile(v, 0.025)), float(np.quantile(v, 0.975)))  # noqa: E731
    (alo, ahi), (blo, bhi), (dlo, dhi) = q(ba), q(bb), q(bb - ba)
    if dlo >= EFFECT_MARGIN and ahi < blo:
        verdict = "held"
    elif dhi < EFFECT_MARGIN:
        verdict = "missed"
    else:
        verdict = "interval too wide"
    return {"ident": float(a.mean()), "ident_lo": alo, "ident_hi": ahi, "linear": float(b.mean()), "linear_lo": blo,
            "linear_hi": bhi, "diff": float(b.mean() - a.mean()), "diff_lo": dlo, "diff_hi": dhi, "verdict": verdict}


def trained_groups(t: pd.DataFrame):
    """(trained nets, identifiable group, near-linear group) of one activation's rows: the nets that
    reached `TRAINED_ACCURACY`, and of those the ones with layer-1 near-linear fraction below
    `SATURATED_BELOW` and above `LINEAR_ABOVE`."""
    trained = t[t["accuracy"] >= TRAINED_ACCURACY]
    return (trained, trained[trained["layer1_near_linear"] < SATURATED_BELOW],
            trained[trained["layer1_near_linear"] > LINEAR_ABOVE])


def group_comparison(t: pd.DataFrame, bootstrap: int) -> dict:
    """The group sizes of one split's rows (nets, trained, n_identifiable, n_linear) and, when both groups
    have nets, their `effect_test`: a row of a sweep's fits table."""
    trained, ident, lin = trained_groups(t)
    row = {"nets": len(t), "trained": len(trained), "n_identifiable": len(ident), "n_linear": len(lin)}
    if len(ident) and len(lin):
        row.update(effect_test(ident[RATIO_COLUMN], lin[RATIO_COLUMN], bootstrap))
    return row


def group_claim(t: pd.DataFrame, claim: str, expected: str, note: str, bootstrap: int = 1000, check=None) -> Claim:
    """The verdict row of one activation's held-out rows `t` by the module's rule.

    Nets below `TRAINED_ACCURACY` enter no group. Held when the identifiable group's mean `RATIO_COLUMN`
    is lower than the near-linear group's by at least `EFFECT_MARGIN` (95 % interval of the difference
    above it) with non-overlapping group intervals; missed when the difference's interval lies below
    `EFFECT_MARGIN`; not comparable when no net trained, either group has fewer than
    `symfast.report.claim.MIN_SEEDS` trained nets, or the interval straddles the margin.

    check: optional f(identifiable rows, near-linear rows) -> (text, why), called once both groups are
    large enough: `text` is added to the measured column; a non-empty `why` makes the row not
    comparable with that reason (a further condition of the design, e.g. matched errors).
    """
    trained, ident, lin = trained_groups(t)
    counts = (f"{len(ident)} identifiable and {len(lin)} near-linear among the {len(trained)} trained of "
              f"{len(t)} held-out nets")
    if t.empty or trained.empty:
        why = ("no held-out nets" if t.empty
               else f"not trained: no held-out net reached test accuracy {TRAINED_ACCURACY:g}")
        return Claim(STUDY, claim, expected, counts, "not comparable", note, why)
    if len(ident) < MIN_SEEDS or len(lin) < MIN_SEEDS:
        return Claim(STUDY, claim, expected, counts, "not comparable", note,
                     f"too few seeds: a group has fewer than {MIN_SEEDS} trained held-out nets")
    text, why = check(ident, lin) if check else ("", "")
    e = effect_test(ident[RATIO_COLUMN], lin[RATIO_COLUMN], bootstrap)
    measured = (f"ratio {interval_text(e['ident'], e['ident_lo'], e['ident_hi'])} (identifiable) vs "
                f"{interval_text(e['linear'], e['linear_lo'], e['linear_hi'])} (near-linear); difference "
                f"{interval_text(e['diff'], e['diff_lo'], e['diff_hi'])}; {counts}; "
                + (f"{text}; " if text else "") + f"seeds {int(t['seed'].min())}..{int(t['seed'].max())}")
    if why:
        return Claim(STUDY, claim, expected, measured, "not comparable", note, why)
    if e["verdict"] == "held":
        return Claim(STUDY, claim, expected, measured, "held",
                     f"the difference's interval lies above {EFFECT_MARGIN:g} and the groups' intervals do not "
                     f"overlap; {note}")
    if e["verdict"] == "missed":
        return Claim(STUDY, claim, expected, measured, "missed",
                     f"the difference's interval lies below {EFFECT_MARGIN:g}; {note}")
    return Claim(STUDY, claim, expected, measured, "not comparable", note,
                 f"interval too wide: the difference's interval straddles {EFFECT_MARGIN:g} or the groups' "
                 "intervals overlap")


def identifiability_claims(table: pd.DataFrame, bootstrap: int = 1000) -> list:
    """One verdict row per activation ("identifiability effect"), read on the held-out seeds only, by
    `group_claim`'s rule.

    Returns:
        list of `Claim` (study "layerwise"), one per activation in the table.
    """
    check_columns(table, ("activation", "seed", "split", "accuracy", "layer1_near_linear", RATIO_COLUMN),
                  "the identifiability table")
    claims = []
    for act, t in heldout_rows(table):
        kind, note = theorem_note(act)
        claim = f"Identifiability effect: saturated units fit the recovered action better ({act}, identifiability {kind})"
        expected = (f"layer-1 error / random (identifiable sub-model) of nets with near-linear fraction < "
                    f"{SATURATED_BELOW:g} lower by >= {EFFECT_MARGIN:g} than of nets with > {LINEAR_ABOVE:g}, "
                    f"non-overlapping 95 % intervals (held-out seeds, trained nets)")
        claims.append(group_claim(t, claim, expected, note, bootstrap))
    return claims


SUMMARY_COLUMNS = ["layer1_near_linear", "layer2_near_linear", "dead_units", "duplicate_units", "end_to_end",
                   "accuracy", "layer1_error", "layer1_random", "layer1_ratio", "layer1_ratio_reduced",
                   "layer2_ratio", "layer2_ratio_reduced", "output_ratio"]


def regime_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Medians over the fit seeds per (activation, scale, weight_decay): the table the guide shows."""
    t = table[table["split"] == FIT]
    keys = ["activation", "scale", "weight_decay"]
    cols = [c for c in SUMMARY_COLUMNS if c in t.columns]
    return seed_medians(t, keys, cols)


def format_identifiability(res: IdentifiabilityResult) -> str:
    """Markdown: settings, medians per regime (fit seeds), group comparisons (both splits), verdict rows."""
    s = res.settings
    head = (f"Input scales {list(s.scales)} x AdamW weight decays {list(s.weight_decays)}; MLP {list(s.sizes)} "
            f"hidden; penalty continuation {list(s.lams)} ({s.steps} steps, then {stage_steps(s.steps, 1)} per further "
            f"weight), read at lam = {max(s.lams):g}; {seeds_text(s.seeds, s.heldout_seeds, s.seed_offset)}. "
            f"{GROUPS_TEXT}.")
    summ = regime_summary(res.table)
    eff = [{"activation": f["activation"], "seeds": f["split"], "trained / nets": f"{f['trained']} / {f['nets']}",
            **group_cells(f)} for _, f in res.fits.iterrows()]
    lines = [head, "", "### Medians over the fit seeds", "", markdown_table(summ, summary_formats(summ)), "",
             f"### Layer-1 error / random ({RATIO_COLUMN}) by group, 95 % bootstrap intervals over nets", "",
             markdown_table(pd.DataFrame(eff)), "",
             f"### Verdicts (held-out seeds; fixed before any run: margin {EFFECT_MARGIN:g}, groups < "
             f"{SATURATED_BELOW:g} and > {LINEAR_ABOVE:g})", "", claims_markdown(res.claims)]
    return "\n".join(lines)


def summary_formats(summ: pd.DataFrame) -> dict:
    """Cell formats of a medians table: end-to-end errors in scientific notation, the rest to 3 digits."""
    return {c: (lambda v: f"{v:.2e}") if c == "end_to_end" else (lambda v: f"{v:.3g}") for c in summ.columns}


def group_fit_done(f) -> bool:
    """Whether a group-comparison row (`group_claim`'s fit) has both groups, hence a difference."""
    return "diff" in f and pd.notna(f.get("diff"))


def group_interval(f, key: str) -> str:
    """'mean [lo, hi]' of column `key` of a group-comparison row, '-' when a group is empty."""
    return interval_text(f[key], f[key + "_lo"], f[key + "_hi"]) if group_fit_done(f) else "-"


def group_cells(f, e2e: bool = False) -> dict:
    """The cells of a group-comparison row `f` in a report's group table: per group (identifiable, then
    near-linear) its size, with `e2e` its geometric-mean end-to-end error, and its mean ratio; then
    the difference and the rule applied ("a group is empty" when one is)."""
    cells = {}
    # (label, column suffix of the size and end-to-end error, key of the ratio's interval)
    for label, col, key in (("identifiable", "identifiable", "ident"), ("near-linear", "linear", "linear")):
        cells[f"n {label}"] = f[f"n_{col}"]
        if e2e:
            cells[f"e2e {label}"] = f"{f[f'e2e_{col}']:.2e}"
        cells[f"ratio {label}"] = group_interval(f, key)
    cells["difference"] = group_interval(f, "diff")
    cells["rule"] = f["verdict"] if group_fit_done(f) else "a group is empty"
    return cells


def plot_identifiability(table: pd.DataFrame, path=None):
    """Layer-1 error / random (identifiable sub-model) against the layer-1 near-linear fraction, one panel
    per activation; colour: input scale, marker: weight decay; filled: fit seeds, open: held-out seeds;
    grey crosses: nets that did not train; shaded: the two groups the verdict compares.

    Returns:
        the figure (the matplotlib backend is left as it is).
    """
    plt = require("matplotlib.pyplot", "plotting")

    from symfast.plotting import FONT, SMALL, finish, legend_outside

    acts = list(dict.fromkeys(table["activation"]))
    if not acts:
        raise ValueError("the identifiability table is empty")
    scales = sorted(table["scale"].unique())
    wds = sorted(table["weight_decay"].unique())
    markers = dict(zip(wds, "osD^v"))
    fig, axes = plt.subplots(1, len(acts), figsize=(3.6 * len(acts), 3.4), layout="constrained", squeeze=False)
    for ax, act in zip(axes[0], acts):
        t = table[table["activation"] == act]
        ax.axvspan(0, SATURATED_BELOW, color="0.92", zorder=0)
        ax.axvspan(LINEAR_ABOVE, 1, color="0.92", zorder=0)
        ax.axhline(1.0, color="0.6", lw=0.8, ls=":")
        for k, sc in enumerate(scales):
            for wd in wds:
                for part in SPLITS:
                    p = t[(t["scale"] == sc) & (t["weight_decay"] == wd) & (t["split"] == part)
                          & (t["accuracy"] >= TRAINED_ACCURACY)]
                    ax.scatter(p["layer1_near_linear"], p[RATIO_COLUMN], s=18, marker=markers[wd],
                               c=f"C{k}" if part == FIT else "none", edgecolors=f"C{k}",
                               label=f"s = {sc:g}, wd = {wd:g}" if part == FIT and act == acts[-1] else None)
        if act == acts[-1]:
            ax.scatter([], [], s=18, c="0.3", label="filled: fit seeds")
            ax.scatter([], [], s=18, c="none", edgecolors="0.3", label="open: held-out seeds")
        bad = t[t["accuracy"] < TRAINED_ACCURACY]
        ax.scatter(bad["layer1_near_linear"], bad[RATIO_COLUMN], s=18, marker="x", c="0.5",
                   label="not trained" if act == acts[-1] and len(bad) else None)
        ax.set_xlim(-0.02, 1.02)
        ax.set_title(act, fontsize=FONT)
        ax.set_xlabel("layer-1 near-linear fraction", fontsize=SMALL)
        ax.tick_params(which="both", labelsize=SMALL)
    axes[0][0].set_ylabel("layer-1 error / random (reduced net)", fontsize=SMALL)
    legend_outside(axes[0][-1], where="right")
    return finish(fig, path)
