"""The readout paper's claims, checked on a readout table.

The readout paper (Chiba, Sugiyama, Uranishi, arXiv 2607.03108)
states an observation-dependent hierarchy G_obs ⊆ G_lift ∩ G_true: weights can only
show a symmetry the encoding lifts exactly, and only a true one; and an encoding
*structurally* hides the true symmetries it cannot lift (a dyadic PE hides the
120-degree rotations of a triangle). `readout_claims` turns a `Readout.table` into
`symfast.report.Claim` rows: what the claim predicts for this run, what was measured,
and whether it held.
"""
from __future__ import annotations

import pandas as pd

from symfast.report import Claim

__all__ = ["readout_claims"]


def _names(t: pd.DataFrame) -> str:
    return " ".join(t["element"]) or "none"


def _elements(table: pd.DataFrame, shape: str, pe: str) -> pd.DataFrame:
    return table[(table["shape"] == shape) & (table["pe"] == pe)]


def readout_claims(table: pd.DataFrame) -> list:
    """Claims of the readout paper checked on `Readout.table` (one observable, one aggregate).

    Args:
        table: rows per (shape, pe, element) with columns element, liftable, true_symmetry
            (True / False / NaN when unknown) and observed.

    Returns:
        list of `Claim`, study "readout".
    """
    t = table.copy()
    true = t["true_symmetry"].fillna(False).astype(bool)
    target = t["liftable"].astype(bool) & true
    obs = t["observed"].astype(bool)
    claims = []

    viol = t[obs & ~target]
    claims.append(Claim(
        "readout", "Only liftable true symmetries are observed (G_obs ⊆ G_lift ∩ G_true)",
        "no violation", f"{len(viol)} violation(s)" + (f": {_names(viol.head(8))}" if len(viol) else ""),
        "held" if viol.empty else "missed",
        "G_obs ⊆ G_lift holds by construction (an element is scored only through an exact lift); "
        "the informative half is G_obs ⊆ G_true"))

    cases = list(t.groupby(["shape", "pe"], sort=False))
    matched, misses = 0, []
    for (shape, pe), c in cases:
        o, g = set(c.loc[obs[c.index], "element"]), set(c.loc[target[c.index], "element"])
        if o == g:
            matched += 1
        else:
            missing, extra = sorted(g - o), sorted(o - g)
            misses.append(f"{shape}/{pe}: " + (f"missed {' '.join(missing)}" if missing else "")
                          + (f" extra {' '.join(extra)}" if extra else ""))
    claims.append(Claim(
        "readout", "Every liftable true symmetry is observed (G_obs = G_lift ∩ G_true)",
        f"matched in {len(cases)} of {len(cases)} cases", f"matched in {matched} of {len(cases)} cases",
        "held" if matched == len(cases) else "missed",
        "; ".join(misses) if misses else "small ensembles and budgets lower the power of the test"))

    tri_dy = _elements(t, "triangle", "dyadic")
    if not tri_dy.empty:
        rot = tri_dy[tri_dy["element"].isin(["r120", "r240"])]
        hidden = rot[~rot["liftable"].astype(bool) & ~rot["observed"].astype(bool)]
        claims.append(Claim(
            "readout", "A dyadic PE hides the triangle's 120° rotations",
            "r120, r240 not liftable, not observed", f"{len(hidden)} of {len(rot)} hidden",
            "held" if len(rot) and len(hidden) == len(rot) else "missed",
            "structural: no exact lift exists, so the weights cannot show it"))

    tri_tri = _elements(t, "triangle", "triaxis")
    if not tri_tri.empty:
        d3 = tri_tri[tri_tri["true_symmetry"].fillna(False).astype(bool)]
        seen = d3[d3["observed"].astype(bool)]
        claims.append(Claim(
            "readout", "A three-axis PE reveals the triangle's full D3", "6 of 6 D3 elements observed",
            f"{len(seen)} of {len(d3)} observed", "held" if len(d3) and len(seen) == len(d3) else "missed",
            "" if len(seen) == len(d3) else f"not observed: {_names(d3[~d3['observed'].astype(bool)])}"))

    rff = t[t["pe"] == "rff"]
    if not rff.empty:
        seen = rff[rff["observed"].astype(bool)]
        extra = seen[~seen["element"].isin(["r0", "r180"])]
        claims.append(Claim(
            "readout", "Random Fourier features observe at most {r0, r180}", "G_obs ⊆ {r0, r180} for every shape",
            f"observed: {' '.join(sorted(set(seen['element'])))}", "held" if extra.empty else "missed",
            "only the identity and the point reflection permute generic frequencies up to sign"))

    false_lift = t[t["liftable"].astype(bool) & ~true & t["true_symmetry"].notna()]
    if not false_lift.empty:
        fp = false_lift[false_lift["observed"].astype(bool)]
        claims.append(Claim(
            "readout", "Liftable non-symmetries are rejected", "none observed",
            f"{len(fp)} of {len(false_lift)} observed" + (f": {_names(fp.head(8))}" if len(fp) else ""),
            "held" if fp.empty else "missed", "false positives of the decision rule"))
    return claims
