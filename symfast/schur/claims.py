"""The Schur study's verdict rows: its comparison with the paper ("Task-Restricted Symmetries in
Recurrent Weight Space", arXiv 2606.18457; `symfast.schur.paper`) as `Claim` rows."""
from __future__ import annotations

import math

import pandas as pd

from symfast.report.claim import Claim

__all__ = ["schur_claims"]

# schur_paper_comparison.csv's verdicts -> the report's (`symfast.report.claim.VERDICTS`): a number
# the paper's definition does not fix (order-dependent) or that holds for every W of its kind (by
# construction) is never counted as held
_VERDICT = {"held": "held", "differs": "missed", "order-dependent": "order-dependent",
            "by construction": "by construction"}


def schur_claims(path: str) -> list:
    """The comparison with the paper written by `symfast schur` (`schur_paper_comparison.csv` at
    `path`) as verdict rows; the settings this run did not cover are counted in one row instead of
    listed."""
    cmp = pd.read_csv(path)
    out, skipped = [], cmp[cmp["verdict"] == "not comparable"]
    for r in cmp[cmp["verdict"] != "not comparable"].itertuples(index=False):
        paper = "" if math.isnan(r.paper) else f"paper {r.paper:.3g}"
        ours = f"{r.ours:.3g}" + (f" [{r.lo:.3g}, {r.hi:.3g}]" if math.isfinite(r.lo) and math.isfinite(r.hi) else "")
        out.append(Claim("schur", f"{r.table}: {r.setting}, {r.subset}, {r.metric}", paper or f"{r.subset} first",
                         f"{ours}, n = {r.n}", _VERDICT.get(r.verdict, "missed"), str(r.reason)))
    if len(skipped):
        untrained = skipped["reason"].astype(str).str.startswith("no converged model")
        parts = [f"{int(untrained.sum())} without a converged model at their settings"] if untrained.any() else []
        if (~untrained).any():
            parts.append(f"{int((~untrained).sum())} whose intervals are too wide or rankings unresolved")
        out.append(Claim("schur", f"{len(skipped)} further numbers and claims of the paper", "paper values",
                         "; ".join(parts), "not comparable",
                         "see schur_paper_comparison.csv; the full run trains the paper's settings and seeds"))
    return out
