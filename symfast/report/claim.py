"""`Claim`: one checked statement of a paper (expected, measured, verdict), and its CSV form.

The studies build their verdict rows from this module, which imports nothing of symfast, so that
any layer may use it; the report renders them (`symfast.report.render`).
"""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, fields

import pandas as pd

__all__ = ["Claim", "VERDICTS", "write_claims", "read_claims"]

VERDICTS = ("held", "missed", "not comparable", "order-dependent", "by construction")


@dataclass
class Claim:
    """One checked claim.

    Args:
        study: "readout", "schur" or "layerwise".
        claim: the paper's statement, in a few words.
        expected: what the claim predicts for this run.
        measured: what this run measured.
        verdict: one of `VERDICTS`.
        note: why, in words (thin margins, unconverged models, a different setting).
    """

    study: str
    claim: str
    expected: str
    measured: str
    verdict: str
    note: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


def write_claims(path: str, claims: list) -> None:
    """Write `Claim` rows to a CSV file (the study's `claims.csv`)."""
    pd.DataFrame([asdict(c) for c in claims], columns=[f.name for f in fields(Claim)]).to_csv(path, index=False)


def read_claims(path: str) -> list:
    """Read `claims.csv`; a missing file gives no claims."""
    if not os.path.exists(path):
        return []
    t = pd.read_csv(path, dtype=str, keep_default_na=False)
    return [Claim(**row) for row in t.to_dict("records")]
