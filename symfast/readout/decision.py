"""The readout's decision rule: a test of "g is a symmetry" with a stated error rate.

Per (shape, encoding, observable) and candidate element g, the null hypothesis is
H0(g): g leaves the expected (infinite-seed) observable invariant. Under H0 the
score of the seed-mean observable is pure seed noise, whose distribution the
split-half null draws sample (`symfast.readout.observables.split_half_null`).

p-value: the squared score of a Gaussian asymmetric part is a weighted sum of
chi-squares, and its cube root, score^(2/3), is close to normal (Wilson-Hilferty).
The p-value is the upper tail of the Student-t predictive distribution of one more
draw given the N null draws on that scale: p = T_{N-1}.sf((y - mean) / (sd sqrt(1 + 1/N))).
The t (not a normal or a plug-in gamma fit) accounts for estimating the null's spread
from N draws, which a corrected level over many candidates reaches into: plug-in fits
gave family-wise rates of 6-7% at a nominal 5% in the synthetic tests. A parametric
tail is needed at all because a permutation p-value of N draws cannot go below
1 / (N + 1), too coarse for a corrected level over 16 candidates.

Multiple comparisons: Holm's step-down over the candidate family. It bounds the
family-wise error rate, P(any true symmetry of the family is called broken) <= alpha,
under any dependence between the tests (all elements share the same null draws
and the same seed-mean, so they are dependent; Benjamini-Hochberg's false discovery
rate needs positive dependence and bounds only the expected fraction of wrong
rejections, while the readout reports a *set*, G_obs, that should be complete).

An element is observed when H0 is *not* rejected. alpha therefore bounds the rate of
missing true symmetries (readout false negatives, per family); the rate of false
elements that are not rejected (readout false positives) is the test's power
failure: it falls with the budget and is measured, not chosen (see
`symfast.readout.calibration`).

Resolution: "not rejected" says only that no asymmetry was detected, and a near-symmetry
(a small perturbation of a true one) leaves an asymmetry a > 0 of the expected observable
that a small budget cannot see. Each decided element therefore carries the budget's
resolution r: the asymmetry the test rejects with probability at least 1 - alpha. The score
of the seed mean is ||A + n|| with ||A|| = a and seed noise n, so score^2 = a^2 + 2 a n_A + ||n||^2,
n_A the noise along A. The test rejects when score > threshold; with ||n||^2 at or above its
lower alpha/2-quantile q (the null's Student-t fit, as for the p-values) and n_A >= -z sigma_A
(z the normal alpha/2 point; sigma_A^2 = E||n||^2 / D, D = 2 E[||n||^2]^2 / Var ||n||^2 the noise's
effective dimension, both from the null draws), each with probability 1 - alpha/2, it rejects
whenever a^2 - 2 a z sigma_A + q > threshold^2, that is for
a >= r = z sigma_A + sqrt(z^2 sigma_A^2 + threshold^2 - q). r falls as 1 / sqrt(seeds). An observed
element reads "no asymmetry of r or more", and `symfast.readout.budget` can train until r is
below a stated tolerance.
"""
from __future__ import annotations

import math

import numpy as np

__all__ = ["Decision", "decide", "null_pvalues", "holm", "split_halves", "pairings", "CALIBRATED_SEEDS", "CALIBRATED_STEPS",
           "budget_shortfall", "resolution"]

# Rounding slack for exactly symmetric weights, whose score and null are both ~1e-16.
ATOL = 1e-9

# The smallest budget at which the decision rule's error rates were measured and met alpha (the
# calibration grids of the readout-decisions guide: 8 seeds x 300 steps is the smallest cell whose
# family-wise rate of missed true symmetries stayed at or below alpha; 4 seeds had almost no power,
# 100 steps left the expected Gram not invariant enough; the default budget is 32 x 1500, the
# adaptive one starts at 8 x 500). Below it, the rule's stated error rates do not apply.
CALIBRATED_SEEDS = 8
CALIBRATED_STEPS = 300


def budget_shortfall(seeds: int | None, steps: int | None) -> tuple[str, str] | None:
    """Why a budget is below the calibrated range, or None when it is inside it.

    Args:
        seeds: models per shape (None: unknown, not checked).
        steps: training steps per model (None: unknown, not checked).

    Returns:
        (reason class, sentence): "too few seeds" when seeds < CALIBRATED_SEEDS, else "not
        converged" when steps < CALIBRATED_STEPS; None when neither.
    """
    where = (f"the decision rule's error rates were measured from {CALIBRATED_SEEDS} seeds x {CALIBRATED_STEPS} "
             f"steps up (default 32 x 1500)")
    few = seeds is not None and seeds < CALIBRATED_SEEDS
    short = steps is not None and steps < CALIBRATED_STEPS
    what = " and ".join(([f"{seeds} seeds per shape"] if few else []) + ([f"{steps} training steps"] if short else []))
    if few:
        return "too few seeds", f"{what}; {where}"
    if short:
        return "not converged", f"{what}; {where}"
    return None


class Decision(dict):
    """Per-element arrays [E]: p_value, p_adjusted, z, threshold, margin, observed."""

    __getattr__ = dict.__getitem__


def null_pvalues(score: np.ndarray, null: np.ndarray, n_eff: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Upper-tail p-values of `score` [E] given null draws [N, E] of the same scores.

    `n_eff` (default N) is the number of distinct draws behind the null: split halves of S
    models have only C(S, S/2) / 2 distinct splits (3 for S = 4), so the spread is estimated
    from at most that many values, and the t predictive uses n_eff - 1 degrees of freedom.

    Returns:
        (p [E], z [E] = (score - null mean) / null sd, on the score scale). Degenerate nulls
        (zero spread, e.g. exactly symmetric weights) give p = 1 when the score is within
        ATOL of the null's rms, else 0.
    """
    score, null = _check(score, null)
    n = _n_eff(null, n_eff)
    loc, spread, degenerate = _fit(null, n)
    t = (score ** (2 / 3) - loc) / spread
    p = np.where(degenerate, (score <= _degenerate_threshold(null)).astype(np.float64), _student_t().sf(t, n - 1))
    sd = null.std(0, ddof=1)
    z = np.where(sd > 0, (score - null.mean(0)) / np.where(sd > 0, sd, 1.0), 0.0)
    return p, z


def _check(score, null) -> tuple[np.ndarray, np.ndarray]:
    score = np.asarray(score, dtype=np.float64)
    null = np.asarray(null, dtype=np.float64)
    if score.ndim != 1 or null.ndim != 2 or score.shape != null.shape[1:]:
        raise ValueError(f"need score [E] and null [N, E], got {list(score.shape)} and {list(null.shape)}")
    if null.shape[0] < 2:
        raise ValueError(f"need at least 2 null draws per element, got {null.shape[0]}")
    if not (np.isfinite(score).all() and np.isfinite(null).all()):
        raise ValueError("score and null must be finite (no NaN/Inf)")
    return score, null


def _n_eff(null: np.ndarray, n_eff) -> int:
    n = null.shape[0] if n_eff is None else min(int(n_eff), null.shape[0])
    if n < 2:
        raise ValueError(f"need at least 2 distinct null draws, got n_eff = {n}")
    return n


def _student_t():
    """scipy.stats.t, imported on first use: scipy.stats costs ~0.6 s, which `import symfast` need not pay."""
    from scipy.stats import t

    return t


def _critical_score(null: np.ndarray, level: np.ndarray, n: int) -> np.ndarray:
    """The score whose p-value under `null_pvalues` (with n_eff = n) equals `level` [E]."""
    loc, spread, degenerate = _fit(null, n)
    y = loc + spread * _student_t().isf(level, n - 1)
    return np.where(degenerate, _degenerate_threshold(null), np.clip(y, 0, None) ** 1.5)


def resolution(null, threshold, alpha: float, n_eff: int | None = None) -> np.ndarray:
    """The asymmetry [E] that a test with critical scores `threshold` [E] rejects with probability
    >= 1 - alpha, given null draws [N, E] of the noise's score (see the module docstring).

    Zero-spread nulls (exactly symmetric weights) give the threshold itself."""
    null = np.asarray(null, dtype=np.float64)
    thr = np.asarray(threshold, dtype=np.float64)
    if null.ndim != 2 or thr.shape != null.shape[1:]:
        raise ValueError(f"need null [N, E] and threshold [E], got {list(null.shape)} and {list(thr.shape)}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    from scipy.stats import norm

    n = _n_eff(null, n_eff)
    loc, spread, degenerate = _fit(null, n)
    low = np.clip(loc + spread * _student_t().ppf(alpha / 2, n - 1), 0, None) ** 1.5  # ||n||'s lower quantile
    sq = null ** 2
    mean, var = sq.mean(0), sq.var(0, ddof=1)
    dim = np.where(var > 0, 2 * mean ** 2 / np.where(var > 0, var, 1.0), 1.0)  # chi-square: Var = 2 mean^2 / D
    z_sigma = norm.isf(alpha / 2) * np.sqrt(mean / np.maximum(dim, 1.0))
    r = z_sigma + np.sqrt(z_sigma ** 2 + np.clip(thr ** 2 - low ** 2, 0, None))
    return np.where(degenerate, thr, r)


def _fit(null: np.ndarray, n: int):
    """Per element: (mean, predictive scale sd * sqrt(1 + 1/n), degenerate) of null^(2/3)."""
    y = null ** (2 / 3)
    sd = y.std(0, ddof=1)
    degenerate = (np.sqrt((null ** 2).mean(0)) <= ATOL) | (sd <= 0)
    return y.mean(0), np.where(degenerate, 1.0, sd) * np.sqrt(1 + 1 / n), degenerate


def _degenerate_threshold(null: np.ndarray) -> np.ndarray:
    """Score bound for a zero-spread null: its rms plus rounding slack."""
    return np.sqrt((null ** 2).mean(0)) + ATOL


def split_halves(S: int) -> int:
    """Distinct unordered splits of S models into two halves of S // 2 (one left out when S is odd)."""
    h = S // 2
    return math.comb(S, h) * math.comb(S - h, h) // 2


def pairings(S: int) -> int:
    """Distinct sets of S // 2 disjoint unordered pairs of S models (the pair null's distinct draws:
    a pair's sign and the pairs' order do not change its score); 3 for S = 4, 105 for S = 8."""
    h = S // 2
    return math.factorial(S) // (2 ** h * math.factorial(h) * math.factorial(S - 2 * h))


def holm(p: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Holm's step-down over one family.

    Args:
        p: raw p-values [E].
        alpha: family-wise error rate.

    Returns:
        (rejected [E] bool, adjusted p [E], level [E]: alpha / (E - rank) each element is compared with).
    """
    p = np.asarray(p, dtype=np.float64)
    E = p.size
    order = np.argsort(p, kind="stable")
    ranks = np.empty(E, dtype=np.int64)
    ranks[order] = np.arange(E)
    level = alpha / (E - ranks)
    adj_sorted = np.minimum(1.0, np.maximum.accumulate((E - np.arange(E)) * p[order]))
    adjusted = np.empty(E)
    adjusted[order] = adj_sorted
    return adjusted <= alpha, adjusted, level


def decide(score, null, alpha: float = 0.05, family=None, n_eff: int | None = None) -> Decision:
    """Decide which elements are observed (H0 "symmetric" not rejected), with Holm control.

    Args:
        score: [E] scores of the seed-mean observable.
        null: [N, E] split-half (or pair) null draws of the same scores.
        alpha: family-wise rate of calling a true symmetry broken, in (0, 1).
        family: optional [E] bool mask of the elements tested together (e.g. the exactly liftable
            ones); the others get NaN statistics and observed = False.
        n_eff: distinct null draws (see `null_pvalues`; `split_halves` counts them for S models).

    Returns:
        A `Decision` of [E] arrays: p_value (raw), p_adjusted (Holm), z (null-sd units above the
        null mean), threshold (the score whose p-value equals the Holm level the element faces),
        margin (threshold - score; > 0 means room to spare; it agrees with `observed` except
        where Holm's step-down stopped before this element), resolution (the asymmetry this
        budget rejects with probability >= 1 - alpha; see the module docstring), observed.
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    score, null = _check(score, null)
    fam = np.ones(score.shape, dtype=bool) if family is None else np.asarray(family, dtype=bool)
    if fam.shape != score.shape:
        raise ValueError(f"family mask must be [E] = {list(score.shape)}, got {list(fam.shape)}")
    out = Decision({k: np.full(score.shape, np.nan) for k in ("p_value", "p_adjusted", "z", "threshold",
                                                                 "margin", "resolution")})
    out["observed"] = np.zeros(score.shape, dtype=bool)
    if not fam.any():
        return out
    n = _n_eff(null, n_eff)
    p, z = null_pvalues(score[fam], null[:, fam], n)
    rejected, adjusted, level = holm(p, alpha)
    thr = _critical_score(null[:, fam], level, n)
    for key, val in (("p_value", p), ("p_adjusted", adjusted), ("z", z), ("threshold", thr),
                     ("margin", thr - score[fam]), ("resolution", resolution(null[:, fam], thr, alpha, n))):
        out[key][fam] = val
    out["observed"][fam] = ~rejected
    return out
