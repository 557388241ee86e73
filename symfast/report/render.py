"""Reports a reader can use without the code: run details, a verdict table, then per study
an explanation, tables with a column glossary and figures, and a closing glossary of every
abbreviation; written as Markdown and as one HTML page (Markdown rendered by markdown-it-py, tables as
HTML tables, each distinct figure embedded once and compressed, see `symfast.report.figures`).

Each study writes its claims (`Claim` rows: what the paper says, what was expected, what
was measured, and a verdict class of `symfast.report.claim.VERDICTS`) to `claims.csv` in its
output folder; `symfast reproduce` gathers them into the verdict tables at the top of the report.
The report's first line counts the rows per study and per class; every row is shown (lists longer
than `FOLD_ROWS` are collapsible), and only held / missed rows count as tested.
"""
from __future__ import annotations

import datetime as _dt
import html
import os
import platform
import subprocess
from dataclasses import dataclass, field
from urllib.parse import quote

import pandas as pd

from symfast._optional import require
from symfast.report.claim import TESTED, VERDICTS, verdict_counts
from symfast.report.figures import FigureStore

__all__ = ["Section", "run_details", "counts_line", "render_markdown", "render_html", "write_report", "FOLD_ROWS"]

FOLD_ROWS = 12  # a study's verdict list longer than this is collapsible (<details>), never folded into one row


@dataclass
class Section:
    """One study's part of the report.

    Args:
        title: heading.
        text: paragraphs (Markdown) explaining what was run and how to read it.
        tables: (caption, DataFrame, glossary {column: meaning}) triples.
        figures: (path, caption) pairs; paths absolute or relative to the current working directory
            (as the run wrote them); the report links each relative to its own folder.
        command: the command line that produced it; seconds: its wall time; ok: whether it succeeded.
        status: shown instead of ok / FAILED when set (e.g. "interrupted").
        markdown: blocks of Markdown a study wrote itself (e.g. the layerwise suite's tables), rendered
            as Markdown (tables become HTML tables).
        notes: one-line remarks shown after the figures (e.g. a figure left out because an extra is missing).
        preformatted: plain-text output shown verbatim, collapsed in the HTML page.
    """

    title: str
    text: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    figures: list = field(default_factory=list)
    command: str = ""
    seconds: float | None = None
    ok: bool = True
    status: str = ""
    markdown: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    preformatted: str = ""

    @property
    def state(self) -> str:
        return self.status or ("ok" if self.ok else "FAILED")


def _isa() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
    except OSError:
        return platform.machine()
    for isa in ("avx512f", "avx2"):
        if f" {isa}" in flags:
            return isa.upper().replace("F", "")
    return platform.machine()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=5)
        return out.stdout.strip() or "not a git checkout"
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"


def run_details(seconds: float | None = None) -> dict:
    """Version, commit, date, machine and threads of this run (the report's first table)."""
    import torch

    from symfast._ext import cpp_available
    from symfast._version import __version__

    d = {
        "symfast": __version__,
        "commit": _commit(),
        "date (UTC)": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "machine": f"{_cpu_model()}, {os.cpu_count()} cores, {_isa()}",
        "torch threads": str(torch.get_num_threads()),
        "python / torch": f"{platform.python_version()} / {torch.__version__}",
        "C++ kernels": "built" if cpp_available() else "not built (PyTorch references)",
    }
    if seconds is not None:
        d["wall time"] = f"{seconds / 60:.1f} min"
    return d


def _md_table(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    def cell(v):
        if isinstance(v, float):
            return "–" if pd.isna(v) else format(v, floatfmt)
        return str(v).replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    rows = ["| " + " | ".join(cell(v) for v in r) + " |" for r in df.itertuples(index=False)]
    return "\n".join([head, rule] + rows)


def _glossary_md(glossary: dict) -> str:
    return "\n".join(f"- `{k}`: {v}" for k, v in glossary.items())


def counts_line(claims: list) -> str:
    """The report's first line: rows per study and per verdict class, e.g. "Verdicts — readout: 2
    held, 1 missed, 3 by construction; schur: ... (tested: held + missed)"."""
    if not claims:
        return "Verdicts: no claims were checked in this run."
    t = verdict_counts(claims)
    parts = []
    for study, row in t.iterrows():
        if study == "all":
            continue
        cells = ", ".join(f"{int(row[v])} {v}" for v in VERDICTS if row[v])
        parts.append(f"{study}: {cells}")
    tested = int(t.loc["all", list(TESTED)].sum())
    return (f"Verdicts — {'; '.join(parts)}. Tested: {tested} of {len(claims)} rows "
            f"({int(t.loc['all', 'held'])} held, {int(t.loc['all', 'missed'])} missed); the other rows are not "
            "evidence for or against the papers.")


def _by_study(claims: list) -> list:
    studies = list(dict.fromkeys(c.study for c in claims))
    return [(s, [c for c in claims if c.study == s]) for s in studies]


_CLASSES = ("Classes: **held** / **missed** — tested, the measurement could have come out either way (a paper "
            "number is held only when our 95% interval lies inside its tolerance band; a missed row says why in its "
            "note); **not comparable** — not tested in this run, with the reason; **by construction** — cannot "
            "fail, shown with its reason and never counted as held; **order-dependent** — depends on a choice the "
            "paper does not fix.")


def _why(c) -> str:
    """The note of a verdict row; a missed row always says why (the expected value it fell outside)."""
    if c.verdict == "missed" and not c.note.strip():
        return f"measured {c.measured}, outside the expected {c.expected}"
    return c.note


def _rows_md(rows: list) -> str:
    return _md_table(pd.DataFrame([{"study": c.study, "claim": c.claim, "expected": c.expected, "measured": c.measured,
                                    "verdict": c.label, "note": _why(c)} for c in rows],
                                  columns=["study", "claim", "expected", "measured", "verdict", "note"]))


def _figures(sections: list, base: str) -> tuple:
    """(per section its figures as (path, caption, anchor, first), the FigureStore): byte-identical
    files share one anchor, only the first is shown."""
    store = FigureStore(base)
    return [[(p, c, *reversed(store.first(p))) for p, c in s.figures] for s in sections], store


def render_markdown(title: str, details: dict, claims: list, sections: list, base: str = ".",
                    preamble=(), glossary: dict | None = None) -> str:
    """The report as Markdown; figure paths (absolute or relative to the working directory) are written
    relative to `base`, the report's folder.

    Args:
        preamble: paragraphs shown above the verdict tables (e.g. what a --quick run can test).
        glossary: {term: meaning} of the abbreviations used anywhere in the report (a closing section).
    """
    out = [f"# {title}", "", counts_line(claims), "",
           _md_table(pd.DataFrame(list(details.items()), columns=["run", ""])), ""]
    if claims:
        out += ["## Verdicts", ""] + [x for p in preamble for x in (p, "")] + [_CLASSES, ""]
        for study, rows in _by_study(claims):
            table = _rows_md(rows)
            head = f"{study}: {len(rows)} rows"
            if len(rows) > FOLD_ROWS:
                out += [f"<details><summary>{html.escape(head)}</summary>", "", table, "", "</details>", ""]
            else:
                out += [f"**{head}**", "", table, ""]
    figures, store = _figures(sections, base)
    for s, figs in zip(sections, figures):
        out += [f"## {s.title}", ""]
        if s.command:
            secs = f", {s.seconds:.0f} s" if s.seconds is not None else ""
            out += [f"`{s.command}` ({s.state}{secs})", ""]
        for p in s.text:
            out += [p, ""]
        for block in s.markdown:
            out += [block.strip(), ""]
        for caption, df, gloss in s.tables:
            out += [f"**{caption}**", "", _md_table(df), ""]
            if gloss:
                out += [_glossary_md(gloss), ""]
        for path, caption, anchor, first in figs:
            rel = store.relative(path)
            out += ([f"![{caption}]({quote(rel)})", "", f"*{caption}*", ""] if first
                    else [f"*{caption}*: the same image as {anchor.replace('fig-', 'figure ')} above (`{rel}`).", ""])
        for note in s.notes:
            out += [f"- {note}"]
        if s.notes:
            out.append("")
        if s.preformatted:
            out += ["```", s.preformatted.strip(), "```", ""]
    if glossary:
        out += ["## Glossary", "", _glossary_md(glossary), ""]
    return "\n".join(out).rstrip() + "\n"


def _markdown():
    """A CommonMark renderer with tables; raw HTML passes (the report's own <details> blocks)."""
    markdown_it = require("markdown_it", "report.html")
    return markdown_it.MarkdownIt("commonmark", {"html": True}).enable("table")


_CSS = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.2em .5em;"
        "font-size:90%;vertical-align:top}th{background:#eee}.held{background:#dfd}.missed{background:#fdd}"
        ".notcomparable{background:#eee}.byconstruction{background:#eef}.orderdependent{background:#ffe}"
        "summary{font-weight:bold;cursor:pointer}code{background:#f4f4f4}figcaption{font-size:90%;color:#333}"
        "figure{margin:1em 0}")


def _df_html(df: pd.DataFrame) -> str:
    return df.to_html(index=False, border=0, na_rep="–", float_format=lambda v: f"{v:.3g}")


def render_html(title: str, details: dict, claims: list, sections: list, base: str = ".", preamble=(),
                glossary: dict | None = None) -> str:
    """The same report as one HTML page: Markdown rendered by markdown-it-py, tables as HTML tables,
    each distinct figure (by content) embedded once, compressed, within `figures.EMBED_BUDGET`
    (later ones linked); `preamble` and `glossary` as in `render_markdown`."""
    e, md = html.escape, _markdown()
    inline = md.renderInline
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>{_CSS}</style>"
           f"</head><body><h1>{e(title)}</h1><p>{e(counts_line(claims))}</p>",
           _df_html(pd.DataFrame(list(details.items()), columns=["run", ""]))]
    if claims:
        out += ["<h2>Verdicts</h2>"] + [md.render(p) for p in preamble] + [md.render(_CLASSES)]
        for study, rows in _by_study(claims):
            body = "".join(
                f"<tr class='{c.verdict.replace(' ', '').replace('-', '')}'><td>{inline(c.claim)}</td>"
                f"<td>{inline(c.expected)}</td><td>{inline(c.measured)}</td><td><b>{e(c.label)}</b></td>"
                f"<td>{inline(_why(c))}</td></tr>" for c in rows)
            table = ("<table><tr><th>claim</th><th>expected</th><th>measured</th><th>verdict</th><th>note</th></tr>"
                     f"{body}</table>")
            head = f"{study}: {len(rows)} rows"
            out.append(f"<details><summary>{e(head)}</summary>{table}</details>" if len(rows) > FOLD_ROWS
                       else f"<h3>{e(head)}</h3>{table}")
    figures, store = _figures(sections, base)
    for s, figs in zip(sections, figures):
        out.append(f"<h2>{e(s.title)}</h2>")
        if s.command:
            secs = f", {s.seconds:.0f} s" if s.seconds is not None else ""
            out.append(f"<p><code>{e(s.command)}</code> ({e(s.state)}{secs})</p>")
        out += [md.render(p) for p in s.text]
        out += [md.render(block) for block in s.markdown]
        for caption, df, gloss in s.tables:
            out.append(f"<p><b>{inline(caption)}</b></p>" + _df_html(df))
            if gloss:
                out.append(md.render(_glossary_md(gloss)))
        for path, caption, anchor, first in figs:
            if first:
                out.append(f"<figure id='{anchor}'>{store.img(path)}<figcaption>{inline(caption)}</figcaption>"
                           "</figure>")
            else:
                out.append(f"<p><i>{inline(caption)}</i>: the same image as <a href='#{anchor}'>"
                           f"{anchor.replace('fig-', 'figure ')}</a> above.</p>")
        if s.notes:
            out.append(md.render("\n".join(f"- {n}" for n in s.notes)))
        if s.preformatted:
            out.append(f"<details><summary>printed output</summary><pre>{e(s.preformatted.strip())}</pre></details>")
    if glossary:
        out += ["<h2>Glossary</h2>", md.render(_glossary_md(glossary))]
    out.append("</body></html>")
    return "\n".join(out)


def write_report(folder: str, title: str, details: dict, claims: list, sections: list,
                 preamble=(), glossary: dict | None = None) -> tuple[str, str]:
    """Write `report.md` and `report.html` into `folder`; returns their paths. `preamble`: paragraphs
    above the verdict tables; `glossary`: {term: meaning}, a closing section."""
    md, page = os.path.join(folder, "report.md"), os.path.join(folder, "report.html")
    with open(md, "w") as f:
        f.write(render_markdown(title, details, claims, sections, base=folder, preamble=preamble, glossary=glossary))
    with open(page, "w") as f:
        f.write(render_html(title, details, claims, sections, base=folder, preamble=preamble, glossary=glossary))
    return md, page
