"""`Claim`: one checked statement of a paper (expected, measured, verdict), its CSV form, and the
rules that turn a measurement into a verdict.

The studies build their verdict rows from this module, which imports nothing of symfast, so that
any layer may use it; the report renders them (`symfast.report.render`).

Verdict classes (`VERDICTS`):

- **held** / **missed**: the row was *tested* — the measurement could have come out either way,
  and it is counted as evidence for or against the paper.
- **not comparable**: the row could not be tested in this run; `reason` says why, one of
  `NOT_COMPARABLE_REASONS` (not converged, too few seeds, task definition differs, interval too
  wide, replicates disagree) or a short sentence.
- **by construction**: the row cannot fail (e.g. G_obs ⊆ G_lift when only exactly liftable elements
  are scored); shown with its reason, never counted as held.
- **order-dependent**: the quantity depends on an arbitrary choice the paper does not fix (e.g. the
  order of the blocks inside a Schur sector), so no single value can be compared.

A paper's *number* is held only by equivalence (`equivalence_verdict`): our 95% interval must lie
inside a tolerance band around the paper's value, with the band fixed per kind of quantity
(`TOLERANCE`) before any run; a *ranking* (`ranking_verdict`) needs intervals that do not overlap.
Both need at least `MIN_SEEDS` converged seeds by default (`min_seeds`: a study may ask for more).
A claim read on more than one replicate (disjoint seed sets at the same budget) is held or missed
only where no replicate contradicts another (`replicate_verdict`): one held and one missed is "not
comparable: replicates disagree", whatever the pooled reading says.

Shared presentation rules, so every study and mode reads alike:

- a row measured on models that did not converge is "not comparable: not converged", whatever it
  would say otherwise (`not_comparable` with reason `NOT_CONVERGED`);
- an interval of a bounded quantity (an accuracy, a fraction) is clipped to its range and marked,
  and every interval is shown with the n behind it (`format_interval`, `BOUNDS`);
- a test decision whose adjusted p-value lies within `MARGINAL_REL` of its alpha is marginal
  (`is_marginal`): flagged beside the decision, never silently held or rejected.
"""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, fields, replace
from typing import NamedTuple

import pandas as pd

__all__ = ["Claim", "VERDICTS", "TESTED", "NOT_COMPARABLE_REASONS", "NOT_CONVERGED", "MIN_SEEDS", "TOLERANCE", "Band",
           "Verdict", "BOUNDS", "MARGINAL_REL", "equivalence_verdict", "ranking_verdict", "not_comparable",
           "clip_interval", "format_interval", "is_marginal", "verdict_counts", "write_claims", "read_claims",
           "REPLICATES_DISAGREE", "replicates_disagree", "replicate_verdict"]

VERDICTS = ("held", "missed", "not comparable", "by construction", "order-dependent")
TESTED = ("held", "missed")  # the verdicts that count as evidence
NOT_COMPARABLE_REASONS = ("not converged", "too few seeds", "task definition differs", "interval too wide",
                          "replicates disagree")
NOT_CONVERGED = NOT_COMPARABLE_REASONS[0]
REPLICATES_DISAGREE = NOT_COMPARABLE_REASONS[4]

MIN_SEEDS = 3  # converged seeds needed by default for any held / missed on a number or a ranking


class Band(NamedTuple):
    """Tolerance band around a paper's value: half-width max(relative * |paper|, absolute)."""

    relative: float
    absolute: float


# Fixed per kind of quantity, before any run; `kind` of `equivalence_verdict`.
TOLERANCE = {
    # ΔFVU: relative (effects span 0.05-2 across tasks); the absolute floor makes a paper value of ~0 testable.
    "dfvu": Band(relative=0.25, absolute=0.01),
    # normalised sensitivity (ΔFVU per unit of removed Schur mass): relative, like ΔFVU.
    "sensitivity": Band(relative=0.25, absolute=0.0),
    # accuracies (replay accuracy, test accuracy) in [0, 1]: absolute, 5 points.
    "accuracy": Band(relative=0.0, absolute=0.05),
}


# The range of each bounded kind of quantity: intervals are clipped to it (`clip_interval`). Keys are
# the metric names the studies use; a quantity not listed here is unbounded.
BOUNDS = {
    "accuracy": (0.0, 1.0), "replay_acc": (0.0, 1.0), "acc": (0.0, 1.0),
    "fraction": (0.0, 1.0), "rate": (0.0, 1.0),
    "fvu": (0.0, math.inf), "mass": (0.0, math.inf),
}

# A decision is marginal when its (adjusted) p-value lies within this fraction of alpha on either side
# (alpha 0.05: p in [0.04, 0.06]): such a decision could flip with a few more seeds, so it is flagged.
MARGINAL_REL = 0.2


class Verdict(NamedTuple):
    """A verdict and why (the rule applied, or the reason it could not be tested)."""

    verdict: str
    reason: str


@dataclass
class Claim:
    """One checked claim.

    Args:
        study: "readout", "schur" or "layerwise".
        claim: the paper's statement, in a few words.
        expected: what the claim predicts for this run.
        measured: what this run measured.
        verdict: one of `VERDICTS`.
        note: why, in words (thin margins, the mechanism behind a miss, a different setting).
        reason: for "not comparable", "by construction" and "order-dependent": why the row is not a
            test (for "not comparable" preferably one of `NOT_COMPARABLE_REASONS`).
    """

    study: str
    claim: str
    expected: str
    measured: str
    verdict: str
    note: str = ""
    reason: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")

    @property
    def tested(self) -> bool:
        """Whether the row is evidence (held or missed)."""
        return self.verdict in TESTED

    @property
    def label(self) -> str:
        """The verdict with its reason, e.g. "not comparable: not converged"."""
        return f"{self.verdict}: {self.reason}" if self.reason and not self.tested else self.verdict


def not_comparable(claims: list, reason: str, note: str = "") -> list:
    """`claims` with their rows turned into "not comparable" with `reason`; the measurement stays,
    `note` is prepended to the row's.

    Which rows: held, missed and order-dependent ones (an order-dependence is a reading of the data
    too); for `NOT_CONVERGED` every row, by-construction ones included, since models that did not
    train give no verdict of any kind. Rows that are already "not comparable" keep their reason."""
    turn = ("held", "missed", "order-dependent") + (("by construction",) if reason == NOT_CONVERGED else ())
    return [replace(c, verdict="not comparable", reason=reason,
                    note="; ".join(p for p in (note, c.note) if p)) if c.verdict in turn else c for c in claims]


def clip_interval(lo: float, hi: float, kind: str | None) -> tuple[float, float, bool]:
    """(lo, hi, clipped): the interval cut to the range of `kind` (`BOUNDS`; None or an unlisted kind:
    unbounded), and whether it was cut."""
    low, high = BOUNDS.get(kind, (-math.inf, math.inf)) if kind else (-math.inf, math.inf)
    c_lo, c_hi = (max(lo, low), min(hi, high)) if _finite(lo, hi) else (lo, hi)
    return c_lo, c_hi, (c_lo, c_hi) != (lo, hi)


def format_interval(mean: float, lo: float, hi: float, n: int | None = None, kind: str | None = None) -> str:
    """'0.804 [0.277, 1 clipped] (n = 2)': the mean, its interval clipped to the range of `kind` and
    marked when cut, and the n behind it; the mean alone when there is no interval, "–" without a mean.
    An interval of no width (one seed, or seeds that agree) is shown as the mean, its n and "no spread"."""
    if mean is None or not math.isfinite(mean):
        return "–"
    count = f"n = {int(n)}" if n is not None else ""
    tail = f" ({count})" if count else ""
    if not _finite(lo, hi):
        return f"{mean:.3g}{tail}"
    c_lo, c_hi, clipped = clip_interval(lo, hi, kind)
    if c_lo == c_hi:
        return f"{mean:.3g} ({', '.join(p for p in (count, 'no spread') if p)})"
    low = f"{c_lo:.3g}" + (" clipped" if clipped and c_lo != lo else "")
    high = f"{c_hi:.3g}" + (" clipped" if clipped and c_hi != hi else "")
    return f"{mean:.3g} [{low}, {high}]{tail}"


def is_marginal(p: float, alpha: float) -> bool:
    """Whether a decision at (adjusted) p-value `p` against `alpha` is marginal: |p - alpha| <=
    MARGINAL_REL * alpha (a few more seeds could flip it)."""
    return _finite(p, alpha) and abs(p - alpha) <= MARGINAL_REL * alpha


def _finite(*xs) -> bool:
    return all(x is not None and math.isfinite(x) for x in xs)


def _too_few_seeds(n: int, min_seeds: int) -> str:
    return f"too few seeds (n = {n} < {min_seeds} converged)"


def equivalence_verdict(paper: float, lo: float, hi: float, n: int, kind: str, converged: bool = True,
                        min_seeds: int = MIN_SEEDS) -> Verdict:
    """Whether our 95% interval [lo, hi] over `n` converged seeds reproduces the paper's value.

    Rule (equivalence, not inclusion): with band B = [paper - w, paper + w], w =
    max(TOLERANCE[kind].relative * |paper|, TOLERANCE[kind].absolute),

    - held: [lo, hi] ⊆ B (our value is within the tolerance, and we know it);
    - missed: [lo, hi] ∩ B = ∅ (our value differs by more than the tolerance, and we know it);
    - not comparable otherwise: "not converged" (converged False), "too few seeds" (n < min_seeds),
      "interval too wide" (no finite interval, or one that straddles an edge of the band).

    A paper value inside a wide interval is *not* held: a noisy run would otherwise reward itself.

    Args:
        paper: the paper's value.
        lo, hi: our 95% interval.
        n: number of converged seeds behind it.
        kind: a key of `TOLERANCE` ("dfvu", "sensitivity", "accuracy").
        converged: whether the models behind the interval reached their convergence target.
        min_seeds: converged seeds needed for held or missed (`MIN_SEEDS` by default; a study may
            ask for more).

    Returns:
        `Verdict` (verdict, reason): the reason names the rule applied or why nothing was tested.
    """
    if kind not in TOLERANCE:
        raise ValueError(f"kind must be one of {sorted(TOLERANCE)}, got {kind!r}")
    if not _finite(paper):
        raise ValueError(f"paper value must be finite, got {paper}")
    if not converged:
        return Verdict("not comparable", "not converged")
    if n < min_seeds:
        return Verdict("not comparable", _too_few_seeds(n, min_seeds))
    if not _finite(lo, hi) or lo > hi:
        return Verdict("not comparable", "interval too wide (no finite interval)")
    band = TOLERANCE[kind]
    w = max(band.relative * abs(paper), band.absolute)
    b_lo, b_hi = paper - w, paper + w
    rule = f"band [{b_lo:.3g}, {b_hi:.3g}] ({kind}: ±{_band_text(band)})"
    if b_lo <= lo and hi <= b_hi:
        return Verdict("held", f"our interval lies inside the {rule}")
    if hi < b_lo or lo > b_hi:
        return Verdict("missed", f"our interval lies outside the {rule}")
    return Verdict("not comparable", f"interval too wide: [{lo:.3g}, {hi:.3g}] straddles an edge of the {rule}")


def _band_text(band: Band) -> str:
    parts = ([f"{band.relative:.0%} of the paper's value"] if band.relative else []) + \
            ([f"{band.absolute:g}"] if band.absolute else [])
    return " or ".join(parts) + (", whichever is larger" if len(parts) > 1 else "")


def ranking_verdict(intervals: dict, claimed, n: int, converged: bool = True, min_seeds: int = MIN_SEEDS) -> Verdict:
    """Whether `claimed` is the largest of several quantities, from their 95% intervals.

    - held: n >= min_seeds and the claimed interval lies above every other (lo > their hi);
    - missed: n >= min_seeds and some other interval lies above the claimed one;
    - not comparable otherwise ("not converged", "too few seeds", "interval too wide" when the
      intervals overlap so the ranking is not resolved).

    Args:
        intervals: {name: (lo, hi)}.
        claimed: the name the paper ranks first.
        n: converged seeds behind the intervals (the smallest n among them).
        converged: whether those models converged.
        min_seeds: converged seeds needed for held or missed (`MIN_SEEDS` by default).
    """
    if claimed not in intervals:
        raise ValueError(f"claimed {claimed!r} is not among {sorted(intervals)}")
    if not converged:
        return Verdict("not comparable", "not converged")
    if n < min_seeds:
        return Verdict("not comparable", _too_few_seeds(n, min_seeds))
    if not all(_finite(lo, hi) for lo, hi in intervals.values()):
        return Verdict("not comparable", "interval too wide (no finite interval)")
    lo_c, hi_c = intervals[claimed]
    others = {k: v for k, v in intervals.items() if k != claimed}
    above = [k for k, (lo, _) in others.items() if lo > hi_c]
    if above:
        return Verdict("missed", f"{', '.join(above)} lies above {claimed} (non-overlapping intervals)")
    if all(lo_c > hi for _, hi in others.values()):
        return Verdict("held", f"{claimed} lies above every other (non-overlapping intervals)")
    overlap = [k for k, (_, hi) in others.items() if hi >= lo_c]
    return Verdict("not comparable", f"interval too wide: {claimed} overlaps {', '.join(overlap)}")


def replicates_disagree(verdicts) -> bool:
    """Whether a claim's readings on independent replicates contradict each other: at least one
    replicate held it and at least one missed it (untested replicates contradict nothing)."""
    got = {getattr(v, "verdict", v) for v in verdicts}
    return "held" in got and "missed" in got


def replicate_verdict(verdicts, pooled: Verdict | None = None, names=None) -> Verdict:
    """One verdict for a claim read on several replicates (disjoint seed sets, same budget).

    - "not comparable: replicates disagree" when one replicate held it and another missed it
      (`replicates_disagree`), whatever `pooled` says: the claim flips with the seeds drawn;
    - otherwise `pooled` when given (e.g. the reading on all seeds together);
    - otherwise the common verdict when every replicate gives the same one, else the first
      replicate's that is not held or missed (a verdict needs every replicate tested).

    Args:
        verdicts: per replicate, a `Verdict` or a verdict string.
        pooled: the verdict read on all replicates pooled, if there is one.
        names: per replicate, a name for the reason (default "replicate 1", "replicate 2", ...).
    """
    verdicts = [v if isinstance(v, Verdict) else Verdict(str(v), "") for v in verdicts]
    if not verdicts:
        raise ValueError("replicate_verdict needs at least one replicate")
    names = list(names) if names is not None else [f"replicate {i + 1}" for i in range(len(verdicts))]
    if len(names) != len(verdicts):
        raise ValueError(f"replicate_verdict: {len(names)} names for {len(verdicts)} replicates")
    if replicates_disagree(verdicts):
        return Verdict("not comparable", f"{REPLICATES_DISAGREE}: " + ", ".join(
            f"{n} {v.verdict}" for n, v in zip(names, verdicts)))
    if pooled is not None:
        return pooled
    if len({v.verdict for v in verdicts}) == 1:
        return verdicts[0]
    k = next(i for i, v in enumerate(verdicts) if v.verdict not in TESTED)
    v = verdicts[k]
    return Verdict(v.verdict, f"{names[k]}: {v.reason}" if v.reason else names[k])


def verdict_counts(claims: list) -> pd.DataFrame:
    """Rows per study (in order of appearance, then "all"), columns per verdict class: counts."""
    studies = list(dict.fromkeys(c.study for c in claims))
    rows = [[sum(c.study == s and c.verdict == v for c in claims) for v in VERDICTS] for s in studies]
    rows.append([sum(c.verdict == v for c in claims) for v in VERDICTS])
    return pd.DataFrame(rows, index=studies + ["all"], columns=list(VERDICTS))


def write_claims(path: str, claims: list) -> None:
    """Write `Claim` rows to a CSV file (the study's `claims.csv`)."""
    pd.DataFrame([asdict(c) for c in claims], columns=[f.name for f in fields(Claim)]).to_csv(path, index=False)


def read_claims(path: str) -> list:
    """Read `claims.csv` (files written before `reason` existed read with an empty reason); a missing
    file gives no claims."""
    if not os.path.exists(path):
        return []
    t = pd.read_csv(path, dtype=str, keep_default_na=False)
    return [Claim(**row) for row in t.to_dict("records")]
