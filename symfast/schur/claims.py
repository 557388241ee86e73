"""The Schur study's verdict rows: its comparison with the paper ("Task-Restricted Symmetries in
Recurrent Weight Space", arXiv 2606.18457; `symfast.schur.paper`) as `Claim` rows."""
from __future__ import annotations

import math

import pandas as pd

from symfast.report.claim import Claim
from symfast.schur.paper import CONVERGENCE, PAPER_TARGETS

__all__ = ["schur_claims", "target_note"]


def target_note(task: str) -> str:
    """Our convergence target beside the paper's full model, for a row on `task` ("" for an unknown task)."""
    if task not in CONVERGENCE:
        return ""
    metric, ours = CONVERGENCE[task]
    op = "<=" if metric == "fvu" else ">="
    return f"models enter at {metric} {op} {ours:g} (the paper's full model: {PAPER_TARGETS[task][1]:g})"


def schur_claims(path: str) -> list:
    """The comparison with the paper written by `symfast schur` (`schur_paper_comparison.csv` at
    `path`) as verdict rows, one per published number or claim (the settings this run did not cover
    included, as "not comparable" with their reason)."""
    cmp = pd.read_csv(path, keep_default_na=False, na_values=[""])
    out = []
    for r in cmp.itertuples(index=False):
        paper = "" if not math.isfinite(r.paper) else f"paper {r.paper:.3g}"
        if r.n and math.isfinite(r.ours):
            ours = f"{r.ours:.3g}" + (f" [{r.lo:.3g}, {r.hi:.3g}]" if math.isfinite(r.lo) and math.isfinite(r.hi)
                                      else "") + f", n = {int(r.n)}"
        else:
            ours = "no converged model"
        verdict = "missed" if r.verdict == "differs" else r.verdict  # files written before the shared vocabulary
        tested = verdict in ("held", "missed")
        note = "; ".join(p for p in (str(r.reason) if tested else "", target_note(str(r.setting).split()[0])) if p)
        out.append(Claim("schur", f"{r.table}: {r.setting}, {r.subset}, {r.metric}", paper or f"{r.subset} first",
                         ours, verdict, note, "" if tested else str(r.reason)))
    return out
