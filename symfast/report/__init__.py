"""The report of `symfast reproduce`: verdict rows and the rules that give them (`claim`, imported by
the studies), the rendering of tables, figures and run details as Markdown and HTML (`render`), and
the studies' prose (`texts`).
"""
from symfast._optional import require as _require

_require("pandas", "the report (its tables)")  # one line naming the extra, before its modules import it
from symfast.report.claim import (MIN_SEEDS, TOLERANCE, VERDICTS, Claim, equivalence_verdict, not_comparable,
                                  ranking_verdict, read_claims, verdict_counts, write_claims)
from symfast.report.render import Section, counts_line, render_html, render_markdown, run_details, write_report

__all__ = ["Claim", "Section", "VERDICTS", "MIN_SEEDS", "TOLERANCE", "equivalence_verdict", "ranking_verdict",
           "not_comparable", "verdict_counts", "counts_line", "run_details", "write_claims", "read_claims",
           "render_markdown", "render_html", "write_report"]
