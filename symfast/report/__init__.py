"""The report of `symfast reproduce`: verdict rows (`claim`, imported by the studies), the rendering
of tables, figures and run details as Markdown and HTML (`render`), and the studies' prose (`texts`).
"""
from symfast.report.claim import VERDICTS, Claim, read_claims, write_claims
from symfast.report.render import Section, render_html, render_markdown, run_details, write_report

__all__ = ["Claim", "Section", "VERDICTS", "run_details", "write_claims", "read_claims", "render_markdown",
           "render_html", "write_report"]
