"""Error rates of the readout's decision on a population with known groups, with 95% intervals.

From a population sweep's results (one row per member x encoding x exactly liftable candidate):

- **FNR**: true symmetries (the identity left out: it is observed by construction) not observed;
- **FPR**: elements that are neither symmetries nor near-symmetries, observed;
- **near_FPR**: near-symmetries (elements of a near-symmetric member's base group that its
  perturbation breaks) observed: how small a perturbation the readout still calls a symmetry.

Each rate is given overall, per shape family (dihedral, cyclic, near, asymmetric: how the member was
drawn), per element kind (rotation, mirror; in 3D also inversion and rotoreflection), per order n of the member (its base order for
near-symmetric members) and, for near_FPR, per perturbation size epsilon; per encoding and pooled over
encodings ("all"). Where the results record the budget each member was read at (seeds_used,
steps_used; the adaptive rule picks it per member), each row gives its trials' mean seeds and steps.
Where they record whether each observed element was resolved to a tolerance (`resolved`), an
unresolved element is not a decision: it is no false positive, and each row counts them
(`unresolved`). Intervals are Wilson score intervals at 95% (`ci_low`, `ci_high`). Elements of one
shape are decided together (they share its seed ensemble, and a shape's symmetries make some of its
elements equivalent), so those intervals, which treat elements as independent trials, are narrower than
the truth. Where the results name each element's shape (`shape`), each row also gives the interval
counting shapes as the independent units (`shapes`, `ci_low_shapes`, `ci_high_shapes`; see
`clustered_wilson`), and the held-out comparison (`compare`: a population of another seed) uses it.

The overall near_FPR pools near-symmetries of every size, and the rate is a step in epsilon, so its
interval mostly counts which sizes a sample happened to draw. The population's design fixes that mix
(each near-symmetric member draws epsilon uniformly from `EPSILONS`): `near_by_design` weights each
size's rate by its design share (post-stratification) and combines the sizes' intervals (`mover`).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from symfast.shapes.population import EPSILONS, KINDS

__all__ = ["wilson", "clustered_wilson", "mover", "calibration", "near_by_design", "compare", "markdown", "from_readout", "plot_near", "with_keys", "KEYS", "FAMILIES", "Z95"]

CONFIDENCE = 0.95
Z95 = 1.959963984540054  # the normal quantile at 0.5 + CONFIDENCE / 2
KEYS = ["encoding", "metric", "family", "element_kind", "n", "epsilon"]
FAMILIES = KINDS  # how a population member was drawn
_ALL = "all"
IDENTITIES = ("r0", "e")  # the identity's name in O(2) and in O(3)
ELEMENT_KINDS = ("rotation", "reflection", "inversion", "rotoreflection")  # the last two occur in 3D only


def wilson(errors: float, trials: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval for a binomial proportion errors / trials (trials >= 1; `clustered_wilson`
    passes an effective, fractional number of trials)."""
    if trials < 1 or not 0 <= errors <= trials:
        raise ValueError(f"need 0 <= errors <= trials and trials >= 1, got {errors} / {trials}")
    p = errors / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    lo = 0.0 if errors == 0 else max(0.0, centre - half)  # exact ends where rounding would leave 1e-17
    hi = 1.0 if errors == trials else min(1.0, centre + half)
    return lo, hi


def clustered_wilson(errors, trials) -> tuple[float, float, float]:
    """The Wilson interval of sum(errors) / sum(trials) counting clusters (shapes), not trials, as independent.

    `errors[i]` and `trials[i]` are cluster i's counts. The design effect d is the cluster-robust variance
    of the ratio, m / (m - 1) * sum((errors_i - p trials_i)^2) / T^2 over m clusters and T trials, divided
    by the binomial variance p (1 - p) / T, and at least 1; the interval is Wilson's at the rate p and
    n_eff = T / d trials, with Student's t quantile on m - 1 degrees of freedom in place of the normal one
    (the variance is estimated from m clusters). Clusters whose trials are all decided alike give n_eff =
    m - 1; independent single trials give m - 1 too. Where the variance cannot be estimated (p is 0 or 1,
    or one cluster), n_eff is m: every cluster's trials taken as one decision. Returns (lo, hi, n_eff)."""
    from scipy.stats import t as student

    e, t = np.asarray(errors, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    if (e.shape != t.shape or e.ndim != 1 or len(t) == 0 or not (np.isfinite(e).all() and np.isfinite(t).all())
            or (t < 1).any() or (e < 0).any() or (e > t).any()):
        raise ValueError("need one (errors, trials) pair per cluster with 0 <= errors <= trials and trials >= 1")
    m, total = len(t), float(t.sum())
    p = float(e.sum()) / total
    if m == 1 or p in (0.0, 1.0):
        n_eff = float(m)
    else:
        robust = m / (m - 1) * float(np.square(e - p * t).sum()) / total ** 2
        n_eff = min(total, max(1.0, total / max(1.0, robust / (p * (1 - p) / total))))
    lo, hi = wilson(p * n_eff, n_eff, float(student.ppf(0.5 + CONFIDENCE / 2, max(m - 1, 1))))
    return lo, hi, n_eff


def mover(rates, lows, highs, weights) -> tuple[float, float, float]:
    """The weighted sum sum(w_i p_i) of independent proportions, with the 95% interval combined from each
    one's (MOVER, "method of variance estimates recovery": Zou and Donner, Statistics in Medicine 27, 2008):
    the estimate minus sqrt(sum((w_i (p_i - lo_i))^2)), plus sqrt(sum((w_i (hi_i - p_i))^2)), clipped to
    [0, 1]. Each (lo_i, hi_i) must be a valid interval of p_i (e.g. Wilson's, which stays honest at 0 and 1,
    where a plain variance would be 0); the weights are fixed (not estimated), >= 0 and sum to 1.
    Returns (estimate, lo, hi)."""
    r, lo, hi, w = (np.asarray(x, dtype=np.float64) for x in (rates, lows, highs, weights))
    if (r.ndim != 1 or len(r) == 0 or not (r.shape == lo.shape == hi.shape == w.shape)
            or not all(np.isfinite(x).all() for x in (r, lo, hi, w))):
        raise ValueError("mover: need one finite (rate, low, high, weight) per proportion")
    if (w < 0).any() or not math.isclose(float(w.sum()), 1.0, abs_tol=1e-9):
        raise ValueError(f"mover: the weights must be >= 0 and sum to 1, got {w.tolist()}")
    if (lo < 0).any() or (hi > 1).any() or (lo > r).any() or (r > hi).any():
        raise ValueError("mover: need 0 <= low <= rate <= high <= 1 for every proportion")
    est = float((w * r).sum())
    return (est, max(0.0, est - math.sqrt(float(np.square(w * (r - lo)).sum()))),
            min(1.0, est + math.sqrt(float(np.square(w * (hi - r)).sum()))))


def _metric_rows(t: pd.DataFrame):
    """(metric, rows the metric counts, whether an observed row is an error)."""
    identity = t["element"].isin(IDENTITIES)
    return [("FNR", t[t["true_symmetry"] & ~identity], False),
            ("FPR", t[~t["true_symmetry"] & ~t["near"]], True),
            ("near_FPR", t[t["near"]], True)]


def calibration(results: pd.DataFrame) -> pd.DataFrame:
    """Rates with Wilson 95% intervals: columns KEYS + errors, trials, rate, ci_low, ci_high (+ shapes,
    ci_low_shapes, ci_high_shapes when the results have `shape`; + mean_seeds, mean_steps when the results have seeds_used and steps_used; + unresolved when they have resolved)."""
    t = results.copy()
    for col in ("true_symmetry", "near", "observed"):
        t[col] = t[col].astype(bool)
    budget = {"seeds_used", "steps_used"} <= set(t.columns)
    tolerance = "resolved" in t.columns
    shapes = "shape" in t.columns
    if tolerance:  # batches written before the column: every decision counts as resolved
        t["resolved"] = t["resolved"].fillna(True).astype(bool)
    pooled = t.assign(encoding=_ALL)
    out = []
    for enc_table in ([pooled] + [g for _, g in t.groupby("encoding", sort=True)]):
        for metric, rows, error_if_observed in _metric_rows(enc_table):
            err = rows["observed"] if error_if_observed else ~rows["observed"]
            unresolved = (rows["observed"] & ~rows["resolved"]).to_numpy() if tolerance else None
            if tolerance and error_if_observed:
                err = err & rows["resolved"]  # an unresolved element is no claim of a symmetry
            every = np.ones(len(rows), bool)
            shape_codes = pd.factorize(rows["shape"])[0] if shapes else None
            splits = [(_ALL, _ALL, _ALL, _ALL, every)]
            if "kind" in rows.columns:  # population rows: the member's family
                splits += [(f, _ALL, _ALL, _ALL, (rows["kind"] == f).to_numpy()) for f in FAMILIES]
            splits += [(_ALL, k, _ALL, _ALL, (rows["element_kind"] == k).to_numpy()) for k in ELEMENT_KINDS]
            splits += [(_ALL, _ALL, str(n), _ALL, (rows["n"] == n).to_numpy()) for n in sorted(rows["n"].unique())]
            if metric == "near_FPR":
                splits += [(_ALL, _ALL, _ALL, f"{e:g}", (rows["epsilon"] == e).to_numpy())
                           for e in sorted(rows["epsilon"].unique())]
            for family, kind, n, eps, mask in splits:
                trials, errors = int(mask.sum()), int(err.to_numpy()[mask].sum())
                if trials == 0:
                    continue
                lo, hi = wilson(errors, trials)
                row = dict(encoding=enc_table["encoding"].iloc[0], metric=metric, family=family,
                           element_kind="mirror" if kind == "reflection" else kind, n=n, epsilon=eps,
                           errors=errors, trials=trials, rate=errors / trials, ci_low=lo, ci_high=hi)
                if shapes:
                    errs, codes = err.to_numpy()[mask].astype(np.float64), shape_codes[mask]
                    per_shape = np.bincount(codes, minlength=codes.max() + 1)
                    seen = per_shape > 0
                    slo, shi, _ = clustered_wilson(np.bincount(codes, weights=errs, minlength=len(per_shape))[seen],
                                                   per_shape[seen])
                    row.update(shapes=int(seen.sum()), ci_low_shapes=slo, ci_high_shapes=shi)
                if budget:
                    row.update(mean_seeds=float(rows["seeds_used"].to_numpy()[mask].mean()),
                               mean_steps=float(rows["steps_used"].to_numpy()[mask].mean()))
                if tolerance:
                    row.update(unresolved=int(unresolved[mask].sum()))
                out.append(row)
    columns = (KEYS + ["errors", "trials", "rate", "ci_low", "ci_high"]
               + (["shapes", "ci_low_shapes", "ci_high_shapes"] if shapes else [])
               + (["mean_seeds", "mean_steps"] if budget else []) + (["unresolved"] if tolerance else []))
    return pd.DataFrame(out, columns=columns)


def with_keys(calib: pd.DataFrame) -> pd.DataFrame:
    """`calib` with every key as text (a table written before the family split gets family "all")."""
    c = calib if "family" in calib.columns else calib.assign(family=_ALL)
    return c.astype({k: str for k in KEYS})


def near_by_design(calib: pd.DataFrame) -> pd.DataFrame:
    """near_FPR per encoding with each perturbation size's rate weighted by its design share (1 / len(EPSILONS):
    `symfast.shapes.population.draw` picks each size with equal probability), its 95% interval by `mover`
    from the per-size intervals (those counting shapes where the table has them: each shape has one size, so
    the sizes are independent). Columns: encoding, trials, rate, ci_low, ci_high, and, for a table
    from `compare`, the held-out population's (`heldout_` prefix) and `agree` (the two intervals overlap).
    Only encodings whose table has every size, in each population it holds, get a row (a mix with a size
    missing is not the design's)."""
    c = with_keys(calib)
    sizes = {f"{e:g}" for e in EPSILONS}
    near = c[(c.metric == "near_FPR") & c.epsilon.isin(sizes) & (c.family == _ALL) & (c.element_kind == _ALL)
             & (c.n == _ALL)]
    held = "heldout_rate" in c.columns
    by = "_shapes" if "ci_low_shapes" in c.columns else ""
    out = []
    for enc, part in near.groupby("encoding", sort=True):
        if len(part) != len(sizes) or (held and part["heldout_trials"].isna().any()):
            continue
        row = dict(encoding=enc, trials=int(part["trials"].sum()))
        w = np.full(len(part), 1 / len(sizes))
        for prefix in ("", "heldout_") if held else ("",):
            row[f"{prefix}rate"], row[f"{prefix}ci_low"], row[f"{prefix}ci_high"] = mover(
                part[f"{prefix}rate"], part[f"{prefix}ci_low{by}"], part[f"{prefix}ci_high{by}"], w)
        if held:
            row["heldout_trials"] = int(part["heldout_trials"].sum())
            row["agree"] = "yes" if _overlap(row["ci_low"], row["ci_high"], row["heldout_ci_low"],
                                             row["heldout_ci_high"]) else "no"
        out.append(row)
    columns = ["encoding", "trials", "rate", "ci_low", "ci_high"] + (
        ["heldout_trials", "heldout_rate", "heldout_ci_low", "heldout_ci_high", "agree"] if held else [])
    return pd.DataFrame(out, columns=columns)


def from_readout(table: pd.DataFrame, shapes) -> pd.DataFrame:
    """The rows `calibration` reads, from a `symfast.readout` table of your own shapes with declared groups:
    its exactly liftable rows, `n` the number of rotations in the shape's group, no near-symmetries."""
    order = {s.name: sum(g.kind == "rotation" for g in s.group) for s in shapes}
    t = table[table["liftable"].astype(bool)]
    return pd.DataFrame({"encoding": t["pe"], "shape": t["shape"], "element": t["element"], "element_kind": t["kind"],
                         "n": t["shape"].map(order), "epsilon": 0.0,
                         "true_symmetry": t["true_symmetry"].astype(bool), "near": False,
                         "observed": t["observed"].astype(bool)})


def _overlap(lo, hi, other_lo, other_hi):
    """Whether two intervals overlap: the held-out agreement rule (scalars or columns)."""
    return (lo <= other_hi) & (other_lo <= hi)


def compare(main: pd.DataFrame, heldout: pd.DataFrame) -> pd.DataFrame:
    """`calibration` of a population beside that of a held-out one (another seed): the held-out
    columns get the prefix `heldout_`, and `agree` says whether the two 95% intervals overlap: those
    counting shapes where both tables have them, else the Wilson ones (rows present in one population only
    have no verdict)."""
    h = with_keys(heldout).rename(columns={c: f"heldout_{c}" for c in heldout.columns if c not in KEYS})
    both = with_keys(main).merge(h, on=KEYS, how="left")
    by = "_shapes" if {"ci_low_shapes", "heldout_ci_low_shapes"} <= set(both.columns) else ""
    overlap = _overlap(both[f"ci_low{by}"], both[f"ci_high{by}"], both[f"heldout_ci_low{by}"],
                       both[f"heldout_ci_high{by}"])
    both["agree"] = np.where(both["heldout_trials"].isna(), "", np.where(overlap, "yes", "no"))
    return both


def _interval(rate, lo, hi) -> str:
    return f"{rate:.3f} [{lo:.3f}, {hi:.3f}]"


def _fmt(rate, lo, hi, errors, trials) -> str:
    if pd.isna(rate):
        return ""
    return f"{_interval(rate, lo, hi)} ({int(errors)}/{int(trials)})"


def _shape_interval(lo, hi, shapes) -> str:
    return "" if pd.isna(shapes) else f"[{lo:.3f}, {hi:.3f}] ({int(shapes)})"


def _count(x) -> str:
    return "" if pd.isna(x) else str(int(x))


def markdown(calib: pd.DataFrame, title: str, intro: str) -> str:
    """A Markdown page of a calibration table (with held-out columns if `compare` made it, and the intervals
    counting shapes where the table has them)."""
    held = "heldout_rate" in calib.columns
    by_shape = "ci_low_shapes" in calib.columns
    budget = "mean_seeds" in calib.columns
    tolerance = "unresolved" in calib.columns
    lines = [f"# {title}", "", intro, ""]
    overall = lambda c: (c.family == _ALL) & (c.element_kind == _ALL) & (c.n == _ALL) & (c.epsilon == _ALL)  # noqa: E731
    sections = [("Overall, per encoding", overall),
                ("Per shape family", lambda c: (c.family != _ALL)),
                ("Per element kind", lambda c: (c.element_kind != _ALL)),
                ("Per order n", lambda c: (c.n != _ALL)),
                ("Near-symmetries per perturbation size epsilon", lambda c: (c.epsilon != _ALL))]
    c = with_keys(calib)
    for caption, pick in sections:
        part = c[pick(c)]
        if part.empty:
            continue
        head = ["encoding", "metric", "family", "element kind", "n", "epsilon", "rate [95% CI] (errors/trials)"]
        if by_shape:
            head += ["95% CI counting shapes (shapes)"]
        if budget:
            head += ["mean seeds x steps"]
        if tolerance:
            head += ["unresolved"] + (["held-out unresolved"] if held else [])
        if held:
            head += ["held-out rate [95% CI]"] + (["held-out 95% CI counting shapes"] if by_shape else []) + [
                "intervals overlap" + (" (counting shapes)" if by_shape else "")]
        lines += [f"## {caption}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for r in part.itertuples(index=False):
            cells = [r.encoding, r.metric, r.family, r.element_kind, r.n, r.epsilon,
                     _fmt(r.rate, r.ci_low, r.ci_high, r.errors, r.trials)]
            if by_shape:
                cells += [_shape_interval(r.ci_low_shapes, r.ci_high_shapes, r.shapes)]
            if budget:
                cells += [f"{r.mean_seeds:.1f} x {r.mean_steps:.0f}"]
            if tolerance:
                cells += [int(r.unresolved)] + ([_count(r.heldout_unresolved)] if held else [])
            if held:
                cells += [_fmt(r.heldout_rate, r.heldout_ci_low, r.heldout_ci_high, r.heldout_errors,
                               r.heldout_trials)]
                if by_shape:
                    cells += [_shape_interval(r.heldout_ci_low_shapes, r.heldout_ci_high_shapes, r.heldout_shapes)]
                cells += [r.agree]
            lines.append("| " + " | ".join(str(x) for x in cells) + " |")
        lines.append("")
    return "\n".join(lines + _by_design_section(calib, by_shape)).rstrip() + "\n"


def _by_design_section(calib: pd.DataFrame, by_shape: bool) -> list[str]:
    """The near_FPR of `near_by_design`, where the table has every perturbation size."""
    d = near_by_design(calib)
    if d.empty:
        return []
    held = "heldout_rate" in d.columns
    head = ["encoding", "near_FPR [95% CI]", "trials"] + (["held-out near_FPR [95% CI]", "held-out trials",
                                                           "intervals overlap"] if held else [])
    lines = ["## Near-symmetries weighted by the design's mix of sizes", "",
             f"near_FPR with each size epsilon's rate weighted by its share in the population's design (1/{len(EPSILONS)}: "
             "each near-symmetric member draws its size uniformly), so the interval no longer counts which sizes the "
             "sample happened to draw; it combines the per-size intervals"
             + (" counting shapes" if by_shape else "") + " by the MOVER rule.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in d.itertuples(index=False):
        cells = [r.encoding, _interval(r.rate, r.ci_low, r.ci_high), r.trials] + (
            [_interval(r.heldout_rate, r.heldout_ci_low, r.heldout_ci_high), r.heldout_trials, r.agree] if held else [])
        lines.append("| " + " | ".join(str(x) for x in cells) + " |")
    return lines + [""]


def plot_near(calib: pd.DataFrame, path=None, ax=None):
    """The near-symmetry curve: near_FPR (near-symmetries reported observed) against epsilon, one line
    per encoding with its 95% intervals (those counting shapes where the table has them) and the held-out
    population's, dashed, when present."""
    from symfast.plotting import FONT, SMALL, axes_or_new, finish, legend_outside

    fig, ax, created = axes_or_new(ax)
    c = with_keys(calib)
    near = c[(c.metric == "near_FPR") & (c.epsilon != _ALL) & (c.family == _ALL) & (c.element_kind == _ALL)
             & (c.n == _ALL)]
    for k, (enc, part) in enumerate(near.groupby("encoding", sort=True)):
        eps = part["epsilon"].astype(float).to_numpy()
        order = np.argsort(eps)
        cols = [("", "-", enc)] + ([("heldout_", "--", f"{enc} (held out)")] if "heldout_rate" in part else [])
        for prefix, style, label in cols:
            r = part[f"{prefix}rate"].to_numpy(dtype=float)[order]
            by = "_shapes" if f"{prefix}ci_low_shapes" in part else ""  # the intervals counting shapes, if any
            lo, hi = (part[f"{prefix}ci_low{by}"].to_numpy(dtype=float)[order],
                      part[f"{prefix}ci_high{by}"].to_numpy(dtype=float)[order])
            ok = ~np.isnan(r)  # a size the held-out population did not draw
            ax.errorbar(eps[order][ok], r[ok], yerr=[(r - lo)[ok], (hi - r)[ok]], fmt="o" + style, capsize=3,
                        color=f"C{k}", alpha=1.0 if not prefix else 0.6, label=label)
    ticks = sorted(near["epsilon"].astype(float).unique())
    ax.set_xscale("log")
    ax.set_xticks(ticks, [f"{e:g}" for e in ticks])
    ax.minorticks_off()
    ax.set_ylim(-0.02, 1.02)
    ax.set_xlabel("near-symmetry size epsilon (largest radial displacement)", fontsize=FONT)
    ax.set_ylabel("near-symmetries reported observed", fontsize=FONT)
    ax.tick_params(labelsize=SMALL)
    legend_outside(ax)
    return finish(fig, path, created)
