"""The copy task as a family of definitions, and which of them show the pattern of the paper's copy
table ("Task-Restricted Symmetries in Recurrent Weight Space", arXiv 2606.18457).

The paper names its copy task without defining it. `FAMILY` spans the readings this package
offers (`symfast.schur.rnn.tasks.Copy`): sequence length L in {8, 16, 32}, alphabet K in {4, 8},
and a cyclic replay or one replay after a delay of `ONCE_DELAY` steps. The paper's copy table
shows one pattern: removing T_CC leaves the replay intact (1.00) while removing T_C->R brings it
down to 0.639. `pattern_verdict` tests that pattern in one setting, with thresholds fixed before
the runs that are read with them:

* (a) -T_CC is harmless: the 95% t-interval of the lowest replay accuracy over the within-sector
  orderings (`symfast.schur.orderings`; column replay_order_min) lies at or above `HARMLESS`, the
  report's accuracy band (0.05) below the paper's 1.00; missed when it lies wholly below. The
  lowest over orderings makes (a) a statement the paper's order choice cannot change.
* (b) -T_C->R is far below the full model: the interval of its replay accuracy (order-invariant)
  lies wholly below `FAR_BELOW`, twice that band under the 0.99 convergence target; missed when it
  lies wholly above.

The pattern holds when (a) and (b) hold, is missed when either is missed, and is not comparable
otherwise or with fewer than `MIN_CONVERGED` converged models. `pattern_table` reads it per
setting on the paper's seeds, on the held-out seeds and on all of them; where the two seed sets
disagree (one held, one missed) the all-seeds row is "not comparable: replicates disagree"
(`symfast.report.claim.replicate_verdict`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from symfast.report.claim import TOLERANCE, Verdict, replicate_verdict
from symfast.schur.ablation import summarize
from symfast.schur.paper import CONVERGENCE, PAPER_COPY, PAPER_SEEDS

__all__ = ["CopySetting", "FAMILY", "ONCE_DELAY", "HARMLESS", "FAR_BELOW", "MIN_CONVERGED", "setting",
           "pattern_verdict", "pattern_table", "ablation_table"]

ONCE_DELAY = 10  # blank steps before a single replay: the network must hold the sequence through them
_BAND = TOLERANCE["accuracy"].absolute  # the report's accuracy band, 0.05
HARMLESS = PAPER_COPY["-T_CC"] - _BAND  # (a): 0.95, the paper's -T_CC replay accuracy minus the band
FAR_BELOW = CONVERGENCE["copy"][1] - 2 * _BAND  # (b): 0.89, twice the band under the convergence target
MIN_CONVERGED = 3  # the paper's seed count: fewer converged models give no verdict


@dataclass(frozen=True)
class CopySetting:
    """One copy definition: sequence length, alphabet size, cyclic replay or one replay after a delay.
    `long_budget`: trained under the `converge` recipe of dense-init copy (twice the paper's epochs, a
    cosine schedule, clipping, a curriculum), because the paper's budget left every model of it
    below the target (measured on seeds 0-2; docs/results-log.md)."""

    length: int
    n_symbols: int
    cyclic: bool
    long_budget: bool = False

    @property
    def name(self) -> str:
        return f"{'cyclic' if self.cyclic else 'once'}_L{self.length}_K{self.n_symbols}"

    @property
    def delay(self) -> int:
        return 0 if self.cyclic else ONCE_DELAY

    @property
    def bits(self) -> float:
        """Information in one sequence: L log2 K."""
        return self.length * math.log2(self.n_symbols)

    def task_kwargs(self) -> dict:
        """Keyword arguments of `make_task("copy", ...)`."""
        return {"length": self.length, "n_symbols": self.n_symbols, "delay": self.delay, "cyclic": self.cyclic}


# 48 bits or more did not converge at the paper's budget (L 16 K 8, L 32 K 4: 0 of 3 each, both
# replays); L 32 K 8 (96 bits) was not tried at it and shares their longer budget.
FAMILY = tuple(CopySetting(L, K, cyclic, long_budget=L * math.log2(K) >= 48)
               for cyclic in (True, False) for L in (8, 16, 32) for K in (4, 8))


def setting(name: str) -> CopySetting:
    """The member of `FAMILY` called `name` (e.g. "cyclic_L8_K4", the paper's inferred task)."""
    for s in FAMILY:
        if s.name == name:
            return s
    raise ValueError(f"unknown copy setting {name!r}; expected one of {[s.name for s in FAMILY]}")


def pattern_verdict(cc_lowest, cr) -> tuple[str, str]:
    """(held | missed | not comparable, reason) for the paper's copy pattern in one setting.

    Args:
        cc_lowest: per converged model, the lowest replay accuracy after -T_CC over the orderings.
        cr: per converged model, the replay accuracy after -T_C->R.
    """
    cc, cr = (np.asarray(x, dtype=float) for x in (cc_lowest, cr))
    if len(cc) != len(cr):
        raise ValueError(f"one value per converged model in each argument, got {len(cc)} and {len(cr)}")
    if not (np.isfinite(cc).all() and np.isfinite(cr).all()):
        raise ValueError("replay accuracies must be finite")
    if len(cc) < MIN_CONVERGED:
        return "not comparable", f"{len(cc)} converged models, fewer than {MIN_CONVERGED}"
    (cc_lo, cc_hi), (cr_lo, cr_hi) = _interval(cc), _interval(cr)
    a = "held" if cc_lo >= HARMLESS else "missed" if cc_hi < HARMLESS else "not comparable"
    b = "held" if cr_hi < FAR_BELOW else "missed" if cr_lo > FAR_BELOW else "not comparable"
    why = (f"(a) -T_CC lowest over orders [{cc_lo:.3f}, {cc_hi:.3f}] vs >= {HARMLESS:.2f}: {a}; "
           f"(b) -T_C->R [{cr_lo:.3f}, {cr_hi:.3f}] vs < {FAR_BELOW:.2f}: {b}")
    verdict = "missed" if "missed" in (a, b) else "held" if a == b == "held" else "not comparable"
    return verdict, why


def _interval(x: np.ndarray) -> tuple[float, float]:
    s = summarize(pd.DataFrame({"k": 0, "x": x}), by=("k",), values=("x",)).iloc[0]
    return float(s.x_lo), float(s.x_hi)


def _seed_sets(seeds, split: int) -> list[tuple[str, set]]:
    seeds = sorted(set(seeds))
    sets = [(f"0-{split - 1}", {s for s in seeds if s < split}), (f"{split}-{seeds[-1]}", {s for s in seeds if s >= split}),
            ("all", set(seeds))]
    return [(label, chosen) for label, chosen in sets if chosen] if seeds[-1] >= split else [("all", set(seeds))]


def _check(runs) -> None:
    if not runs:
        raise ValueError("no copy settings given")
    for name, (models, raw) in runs.items():
        setting(name)
        for frame, cols in ((models, ("seed", "hidden", "n_R", "converged")),
                            (raw, ("seed", "alpha", "subset", "converged", "replay_acc", "replay_order_min",
                                   "removed_rel_T"))):
            missing = [c for c in cols if c not in frame.columns]
            if missing:
                raise ValueError(f"copy setting {name}: columns {missing} missing (a `symfast schur` copy run's "
                                 "schur_models.csv and schur_ablation_raw.csv)")


def pattern_table(runs, alpha: float = 0.9, split: int = PAPER_SEEDS) -> pd.DataFrame:
    """Per setting and seed set (the paper's seeds 0..split-1, the held-out rest, all): models and
    converged models, eigenvalues in C at `alpha` (mean over converged models), T_CC's Schur mass,
    the two quantities of `pattern_verdict` with their intervals, and the verdict.

    Args:
        runs: {setting name: (schur_models.csv frame, schur_ablation_raw.csv frame)} of `symfast schur`
            copy runs, one per member of `FAMILY`.
    """
    _check(runs)
    rows = []
    for name, (models, raw) in runs.items():
        s = setting(name)
        at = raw[np.isclose(raw.alpha, alpha)]
        if at.empty:
            raise ValueError(f"copy setting {name}: no ablations at alpha = {alpha}")
        for label, chosen in _seed_sets(models.seed, split):
            m = models[models.seed.isin(chosen)]
            ok = m[m.converged.astype(bool)]
            a = at[at.seed.isin(set(ok.seed))]
            cc = a[a.subset == "-T_CC"].sort_values("seed")
            cr = a[a.subset == "-T_C->R"].sort_values("seed")
            verdict, why = pattern_verdict(cc.replay_order_min, cr.replay_acc)
            row = {"setting": name, "length": s.length, "n_symbols": s.n_symbols, "replay": "cyclic" if s.cyclic
                   else f"once, delay {s.delay}", "bits": s.bits, "long_budget": s.long_budget, "seeds": label,
                   "models": len(m), "converged": len(ok),
                   "in_C_mean": float((ok.hidden - ok.n_R).mean()) if len(ok) else math.nan,
                   "T_CC_mass_mean": float(cc.removed_rel_T.mean()) if len(cc) else math.nan}
            for key, x in (("cc_lowest", cc.replay_order_min), ("cr", cr.replay_acc)):
                row[f"{key}_mean"] = float(x.mean()) if len(x) else math.nan
                row[f"{key}_lo"], row[f"{key}_hi"] = _interval(x.to_numpy()) if len(x) > 1 else (math.nan, math.nan)
            rows.append({**row, "verdict": verdict, "reason": why})
        parts = [r for r in rows if r["setting"] == name]
        if len(parts) == 3:  # paper's seeds, held-out seeds, all: the two replicates may contradict each other
            pooled = Verdict(parts[2]["verdict"], parts[2]["reason"])
            v = replicate_verdict([p["verdict"] for p in parts[:2]], pooled=pooled,
                                  names=[f"seeds {p['seeds']}" for p in parts[:2]])
            if v != pooled:
                parts[2].update(verdict=v.verdict, reason=f"{v.reason}; all seeds pooled: {parts[2]['verdict']}, "
                                                          f"{parts[2]['reason']}")
    return pd.DataFrame(rows)


def ablation_table(runs, alpha: float = 0.9, split: int = PAPER_SEEDS) -> pd.DataFrame:
    """The 8 rows of the paper's copy table per setting and seed set: replay accuracy after each
    ablation, mean and 95% t-interval over converged models (n), beside the paper's number."""
    _check(runs)
    frames = []
    for name, (models, raw) in runs.items():
        at = raw[np.isclose(raw.alpha, alpha) & raw.converged.astype(bool) & raw.subset.isin(list(PAPER_COPY))]
        for label, chosen in _seed_sets(models.seed, split):
            part = at[at.seed.isin(chosen)].assign(setting=name, seeds=label)
            if not part.empty:
                frames.append(summarize(part, by=("setting", "seeds", "subset"),
                                        values=("replay_acc", "replay_order_min", "removed_rel_T")))
    if not frames:
        return pd.DataFrame(columns=["setting", "seeds", "subset", "n", "paper"])
    out = pd.concat(frames, ignore_index=True)
    out["paper"] = out.subset.map(PAPER_COPY)
    return out
