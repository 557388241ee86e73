"""The protocol every layerwise sweep follows: which data and seeds a number comes from, how a verdict is read.

The sweeps of the study (`symfast.layerwise.exactness`, `symfast.layerwise.attention_exactness`,
`symfast.layerwise.identifiability`, `symfast.layerwise.matched`) share one protocol, kept here so
that it is written once:

- data: every net trains on the same shuffled 75 % of the data and is read on the other 25 %
  (`train_test_split`); held-out covering inputs are drawn from one fixed generator (`law_generator`);
- seeds: fit seeds 0..seeds-1 give the tables, figures and reported slopes; held-out seeds from
  `seed_offset` on, never overlapping them, give the verdicts (`seed_roles`, `check_seed_offset`,
  checked with the other settings every sweep shares by `check_sweep_settings`); training: Adam steps
  per weight of the penalty continuation (`stage_steps`);
- statistics: log-log slopes and means with 95 % bootstrap intervals over seeds (`fit_slope`,
  `mean_interval`);
- verdicts: intervals against bars fixed before the first sweep ran (`SLOPE_BAR`, `EXACT_RATIO_BAR`,
  `MIN_DECADES`, `TRAINED_ACCURACY`), combined into one `Claim` row per question (`slope_and_ratio`,
  `combine_verdicts`, `verdict_claim`), each read on one activation's or task's held-out rows
  (`check_columns`, `heldout_rows`);
- reports: markdown tables (`rows_markdown`, also the layerwise experiments' own), of per-point
  medians and of the verdict rows (`seed_medians`, `markdown_table`, `claims_markdown`).
"""
from __future__ import annotations

import numpy as np
import torch

from symfast._optional import require
from symfast.layerwise.claims import PROVEN
from symfast.layerwise.data import ImageData
from symfast.report.claim import Claim, Verdict, ranking_verdict

pd = require("pandas", "the layerwise sweeps (their tables)")

__all__ = ["TEST_FRACTION", "SPLIT_SEED", "LAW_SEED", "FIT", "HELDOUT", "SPLITS", "SLOPE_BAR", "EXACT_RATIO_BAR",
           "MIN_DECADES", "TRAINED_ACCURACY", "STUDY", "train_test_split", "law_generator", "seed_roles",
           "check_seed_offset", "check_sweep_settings", "stage_steps", "seeds_text", "fit_slope", "mean_interval",
           "slope_fits", "slope_cells", "interval_text", "check_columns", "heldout_rows", "slope_and_ratio",
           "combine_verdicts", "theorem_note", "verdict_claim", "no_heldout_claim", "seed_medians", "rows_markdown",
           "markdown_table", "claims_markdown"]

# ---- data and seeds -------------------------------------------------------------------------------

TEST_FRACTION = 0.25  # the held-out share of the data every net is read on
SPLIT_SEED = 0  # the shuffle of that split: the same for every sweep, so their test digits agree
# The generator of the held-out covering inputs: far from every training seed (0.., 1000..), so no
# net ever trained on the samples it is read on.
LAW_SEED = 2 ** 31 - 1
FIT, HELDOUT = "fit", "heldout"  # the values of a sweep table's split column
SPLITS = (FIT, HELDOUT)


def train_test_split(data: ImageData) -> tuple:
    """(train, test): the shuffled split of `data` every layerwise experiment trains and reads on."""
    return data.split(TEST_FRACTION, seed=SPLIT_SEED)


def law_generator() -> torch.Generator:
    """A fresh generator seeded with `LAW_SEED`: the one the held-out covering inputs are drawn from."""
    return torch.Generator().manual_seed(LAW_SEED)


def seed_roles(seeds: int, heldout_seeds: int, seed_offset: int) -> dict:
    """{seed: `FIT` or `HELDOUT`}: fit seeds 0..seeds-1, then held-out seeds seed_offset.. (in that order)."""
    return {**{sd: FIT for sd in range(seeds)},
            **{sd: HELDOUT for sd in range(seed_offset, seed_offset + heldout_seeds)}}


def check_seed_offset(seeds: int, seed_offset: int) -> None:
    """ValueError when the held-out seeds (from seed_offset on) would overlap the fit seeds 0..seeds-1."""
    if seed_offset < seeds:
        raise ValueError(f"held-out seeds start at seed_offset={seed_offset}, inside the fit seeds "
                         f"0..{seeds - 1}: pick seed_offset >= {seeds}")


def check_sweep_settings(s, *counts: str) -> None:
    """ValueError unless the settings `s` of a sweep pass the checks every sweep shares: penalty weights
    `s.lams` finite and > 0; seeds, heldout_seeds, steps, batch, bootstrap and the attributes named in
    `counts` >= 1; held-out seeds clear of the fit seeds (`check_seed_offset`)."""
    if not s.lams or any(not np.isfinite(w) or w <= 0 for w in s.lams):
        raise ValueError(f"penalty weights must be finite and > 0, got {list(s.lams)}")
    for name in ("seeds", "heldout_seeds", "steps", "batch", "bootstrap", *counts):
        if int(getattr(s, name)) < 1:
            raise ValueError(f"{name} must be >= 1, got {getattr(s, name)}")
    check_seed_offset(s.seeds, s.seed_offset)


def stage_steps(steps: int, stage: int) -> int:
    """Adam steps of stage `stage` (0, 1, ...) of a penalty continuation: `steps` for the first weight,
    half as many (at least 1) for each further one, which starts from the previous weight's net."""
    return steps if stage == 0 else max(1, steps // 2)


def seeds_text(seeds: int, heldout_seeds: int, seed_offset: int) -> str:
    """The seeds of a sweep in words, as its report heads name them."""
    return f"fit seeds 0..{seeds - 1}, held-out seeds {seed_offset}..{seed_offset + heldout_seeds - 1}"


# ---- bootstrap statistics -------------------------------------------------------------------------

def fit_slope(e2e, layer, seeds, bootstrap: int = 1000, seed: int = 0):
    """Least-squares slope of log(layer) against log(e2e), with a 95 % bootstrap interval over seeds.

    Args:
        e2e, layer: [N] positive errors, one per trained net; seeds: [N] the seed of each net (a
            bootstrap resample draws whole seeds, i.e. whole sweeps, with replacement).

    Returns:
        (slope, lo, hi); lo = hi = nan when fewer than 2 distinct seeds or e2e values.
    """
    e2e, layer, seeds = np.asarray(e2e, float), np.asarray(layer, float), np.asarray(seeds)
    if not (e2e.shape == layer.shape == seeds.shape) or e2e.ndim != 1:
        raise ValueError(f"e2e, layer and seeds must be [N] each, got {e2e.shape}, {layer.shape}, {seeds.shape}")
    if len(e2e) < 2 or (e2e <= 0).any() or (layer <= 0).any() or not np.isfinite(e2e).all() \
            or not np.isfinite(layer).all():
        raise ValueError("fit_slope needs >= 2 finite, positive errors (a log-log fit)")
    lx, ly = np.log(e2e), np.log(layer)

    def slope(mask_idx):
        x, y = lx[mask_idx], ly[mask_idx]
        vx = ((x - x.mean()) ** 2).sum()
        return float(((x - x.mean()) * (y - y.mean())).sum() / vx) if vx > 0 else np.nan

    s = slope(np.arange(len(lx)))
    uniq = np.unique(seeds)
    if len(uniq) < 2:
        return s, np.nan, np.nan
    rows = [np.flatnonzero(seeds == u) for u in uniq]
    rng = np.random.default_rng(seed)
    boots = [slope(np.concatenate([rows[i] for i in rng.integers(0, len(uniq), len(uniq))])) for _ in range(bootstrap)]
    boots = np.asarray(boots)
    boots = boots[np.isfinite(boots)]
    if len(boots) == 0:
        return s, np.nan, np.nan
    return s, float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def mean_interval(v, bootstrap: int, seed: int = 0):
    """Mean of v and a 95 % bootstrap interval of it: (mean, lo, hi)."""
    v = np.asarray(v, float)
    rng = np.random.default_rng(seed)
    boots = v[rng.integers(0, len(v), (bootstrap, len(v)))].mean(1)
    return float(v.mean()), float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975))


def slope_fits(table: pd.DataFrame, e2e_col: str, error_col: str, bootstrap: int) -> dict:
    """`fit_slope` of error_col against e2e_col on the fit and on the held-out rows of one sweep's `table`.

    Returns:
        {slope_fit, slope_fit_lo, slope_fit_hi, slope_heldout, slope_heldout_lo, slope_heldout_hi}.
    """
    row = {}
    for part in SPLITS:
        t = table[table["split"] == part]
        row[f"slope_{part}"], row[f"slope_{part}_lo"], row[f"slope_{part}_hi"] = fit_slope(
            t[e2e_col], t[error_col], t["seed"], bootstrap)
    return row


def interval_text(mean: float, lo: float, hi: float) -> str:
    """'mean [lo, hi]' to two decimals."""
    return f"{mean:.2f} [{lo:.2f}, {hi:.2f}]"


def slope_cells(fit) -> dict:
    """The "fit seeds" and "held-out seeds" cells of a report's slope table, from a `slope_fits` row."""
    return {"fit seeds": interval_text(fit["slope_fit"], fit["slope_fit_lo"], fit["slope_fit_hi"]),
            "held-out seeds": interval_text(fit["slope_heldout"], fit["slope_heldout_lo"], fit["slope_heldout_hi"])}


# ---- verdicts -------------------------------------------------------------------------------------

# Fixed before the first sweep was run, not after: the relation "layer error -> 0 as end-to-end error
# -> 0" holds when the fitted log-log slope lies above SLOPE_BAR (the layer error falls at least as
# the square root of the end-to-end error) and, at the most exact point of the sweep (largest penalty
# weight), the layer-1 error is below EXACT_RATIO_BAR x the random-permutation error.
SLOPE_BAR = 0.5
EXACT_RATIO_BAR = 0.1
MIN_DECADES = 1.0  # the held-out end-to-end errors must span at least this many decades for a slope to be read
# A net that lost its task gives no verdict: the held-out nets' median test accuracy at the largest
# penalty weight must reach this (chance is 0.1 on the 10 digit classes).
TRAINED_ACCURACY = 0.5
STUDY = "layerwise"  # the study every verdict row of these sweeps belongs to


def check_columns(table: pd.DataFrame, need, what: str) -> None:
    """ValueError when `table` lacks any of the columns `need`; `what` names the table ("the exactness table")."""
    missing = [c for c in need if c not in table.columns]
    if missing:
        raise ValueError(f"{what} lacks columns {missing}")


def heldout_rows(table: pd.DataFrame, key: str = "activation") -> list:
    """[(value, rows)] per value of column `key` (in order of appearance in the whole table): the
    held-out rows of that value, all that its verdict row reads (empty when it has only fit rows)."""
    return [(v, table[(table[key] == v) & (table["split"] == HELDOUT)]) for v in dict.fromkeys(table[key])]


def slope_and_ratio(t: pd.DataFrame, error_col: str, ratio_col: str, bootstrap: int,
                    e2e_col: str = "end_to_end") -> dict:
    """The two tests of one sweep's held-out rows `t` (columns lam, seed, e2e_col, error_col, ratio_col).

    Returns:
        slope, lo, hi (log-log slope of error_col against e2e_col, interval over seeds); ratio,
        ratio_lo, ratio_hi (mean of ratio_col at the largest lam and its interval); decades spanned by
        the end-to-end errors; seeds, n; top (the rows at the largest lam); v_slope, v_ratio (the
        `ranking_verdict`s against `SLOPE_BAR` and `EXACT_RATIO_BAR`, the bar a point interval).
    """
    seeds = sorted(t["seed"].unique())
    n = len(seeds)
    s, lo, hi = fit_slope(t[e2e_col], t[error_col], t["seed"], bootstrap)
    top = t[t["lam"] == t["lam"].max()]
    r, rlo, rhi = mean_interval(top[ratio_col], bootstrap)
    return {"slope": s, "lo": lo, "hi": hi, "ratio": r, "ratio_lo": rlo, "ratio_hi": rhi,
            "decades": float(np.log10(t[e2e_col].max() / t[e2e_col].min())), "seeds": seeds, "n": n,
            "top": top, "v_slope": ranking_verdict({"slope": (lo, hi), "bar": (SLOPE_BAR, SLOPE_BAR)}, "slope", n),
            "v_ratio": ranking_verdict({"bar": (EXACT_RATIO_BAR, EXACT_RATIO_BAR), "ratio": (rlo, rhi)}, "bar", n)}


def combine_verdicts(parts: list, decades: float) -> Verdict:
    """One verdict from several tests: not comparable when the end-to-end errors span fewer than
    `MIN_DECADES` decades; missed when any test missed; held when all held; else not comparable."""
    if decades < MIN_DECADES:
        return Verdict("not comparable", f"interval too wide: end-to-end errors span {decades:.2f} decades "
                                         f"(< {MIN_DECADES:g}), no slope to read")
    if any(x.verdict == "missed" for x in parts):
        return Verdict("missed", "; ".join(x.reason for x in parts if x.verdict == "missed"))
    if all(x.verdict == "held" for x in parts):
        return Verdict("held", "; ".join(x.reason for x in parts))
    return Verdict("not comparable", "; ".join(x.reason for x in parts if x.verdict != "held"))


def theorem_note(act: str) -> tuple:
    """(kind, note) for an activation: whether its identifiability is proven, and what a miss means."""
    kind = "proven" if act in PROVEN else "conjectural"
    return kind, ("identifiability is conjectured, not proven, for this activation: a miss does not contradict the "
                  "theorem" if kind == "conjectural" else "the theorem's hypothesis holds for this activation")


def verdict_claim(claim: str, expected: str, measured: str, v: Verdict, note: str) -> Claim:
    """The verdict row of one question: a tested verdict (held, missed) puts the rule applied into the
    note, any other verdict keeps the note as it is and gives its reason."""
    tested = v.verdict in ("held", "missed")
    return Claim(STUDY, claim, expected, measured, v.verdict, f"{v.reason}; {note}" if tested else note,
                 "" if tested else v.reason)


def no_heldout_claim(claim: str, expected: str) -> Claim:
    """The verdict row of a question whose table has no held-out seeds: not comparable."""
    return Claim(STUDY, claim, expected, "no held-out seeds", "not comparable", reason="too few seeds (n = 0)")


# ---- reports --------------------------------------------------------------------------------------

def seed_medians(t: pd.DataFrame, keys: list, cols: list) -> pd.DataFrame:
    """Medians of `cols` per `keys` group (in order of appearance), with each group's row count as a
    "seeds" column right after the keys: the summary tables of the sweeps."""
    out = t.groupby(keys, sort=False)[cols].median().reset_index()
    out.insert(len(keys), "seeds", t.groupby(keys, sort=False).size().values)
    return out


def rows_markdown(header, rows) -> str:
    """A markdown table: the `header` cells, the separator line, then one line per row of `rows` (each a
    sequence of cell strings, as many as the header's)."""
    header, rows = list(header), [list(r) for r in rows]
    if any(len(r) != len(header) for r in rows):
        raise ValueError(f"every row needs {len(header)} cells (one per header cell), got "
                         f"{sorted({len(r) for r in rows})}")
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def markdown_table(df: pd.DataFrame, fmt: dict | None = None) -> str:
    """`df` as a markdown table; float cells by `fmt[column]` (a function of the value) where given, else str."""
    fmt = fmt or {}
    return rows_markdown(df.columns, ([fmt.get(c, str)(v) if isinstance(v, float) else str(v) for c, v in r.items()]
                                      for _, r in df.iterrows()))


def claims_markdown(claims) -> str:
    """The verdict rows as a markdown table (claim, measured, verdict)."""
    return markdown_table(pd.DataFrame([{"claim": c.claim, "measured": c.measured, "verdict": c.label}
                                        for c in claims]))
