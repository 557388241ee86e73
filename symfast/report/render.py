"""Reports a reader can use without the code: run details, a verdict table, then per study
an explanation, tables with a column glossary and figures; written as Markdown and as one
self-contained HTML file (figures inline).

Each study writes its claims (`Claim` rows: what the paper says, what was expected, what
was measured, held / missed / not comparable) to `claims.csv` in its output folder;
`symfast reproduce` gathers them into the verdict table at the top of the report.
"""
from __future__ import annotations

import base64
import datetime as _dt
import html
import os
import platform
import subprocess
from dataclasses import asdict, dataclass, field

import pandas as pd

__all__ = ["Section", "run_details", "render_markdown", "render_html", "write_report"]


@dataclass
class Section:
    """One study's part of the report.

    Args:
        title: heading.
        text: paragraphs (Markdown) explaining what was run and how to read it.
        tables: (caption, DataFrame, glossary {column: meaning}) triples.
        figures: (path, caption) pairs; paths absolute or relative to the report.
        command: the command line that produced it; seconds: its wall time; ok: whether it succeeded.
        preformatted: plain-text output shown verbatim (e.g. a study's printed tables).
    """

    title: str
    text: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    figures: list = field(default_factory=list)
    command: str = ""
    seconds: float | None = None
    ok: bool = True
    preformatted: str = ""


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


def render_markdown(title: str, details: dict, claims: list, sections: list, base: str = ".") -> str:
    """The report as Markdown; figure paths are written relative to `base` (the report's folder)."""
    out = [f"# {title}", "", _md_table(pd.DataFrame(list(details.items()), columns=["run", ""])), ""]
    if claims:
        n_held = sum(c.verdict == "held" for c in claims)
        n_cmp = sum(c.verdict != "not comparable" for c in claims)
        out += ["## Verdicts", "", f"{n_held} of {n_cmp} comparable claims held "
                f"({len(claims) - n_cmp} not comparable). Each row: the paper's claim, what it predicts for "
                "this run, what was measured, and whether it held.", "",
                _md_table(pd.DataFrame([asdict(c) for c in claims])), ""]
    for s in sections:
        status = "ok" if s.ok else "FAILED"
        out += [f"## {s.title}", ""]
        if s.command:
            secs = f", {s.seconds:.0f} s" if s.seconds is not None else ""
            out += [f"`{s.command}` ({status}{secs})", ""]
        for p in s.text:
            out += [p, ""]
        for caption, df, glossary in s.tables:
            out += [f"**{caption}**", "", _md_table(df), ""]
            if glossary:
                out += [_glossary_md(glossary), ""]
        for path, caption in s.figures:
            rel = os.path.relpath(path, base) if os.path.isabs(path) else path
            out += [f"![{caption}]({rel})", "", f"*{caption}*", ""]
        if s.preformatted:
            out += ["```", s.preformatted.strip(), "```", ""]
    return "\n".join(out).rstrip() + "\n"


def _img(path: str, base: str) -> str:
    full = path if os.path.isabs(path) else os.path.join(base, path)
    try:
        with open(full, "rb") as f:
            data = base64.b64encode(f.read()).decode()
    except OSError:
        return f"<p>(figure {html.escape(path)} missing)</p>"
    return f'<img src="data:image/png;base64,{data}" style="max-width:100%">'


def render_html(title: str, details: dict, claims: list, sections: list, base: str = ".") -> str:
    """The same report as one self-contained HTML page (figures embedded)."""
    e = html.escape
    css = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto;line-height:1.45}"
           "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.2em .5em;"
           "font-size:90%}th{background:#eee}.held{background:#dfd}.missed{background:#fdd}"
           ".notcomparable{background:#eee}code{background:#f4f4f4}")
    out = [f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)}</title><style>{css}</style>"
           f"</head><body><h1>{e(title)}</h1>",
           pd.DataFrame(list(details.items()), columns=["run", ""]).to_html(index=False, border=0)]
    if claims:
        rows = "".join(
            f"<tr class='{c.verdict.replace(' ', '')}'><td>{e(c.study)}</td><td>{e(c.claim)}</td>"
            f"<td>{e(c.expected)}</td><td>{e(c.measured)}</td><td><b>{e(c.verdict)}</b></td><td>{e(c.note)}</td></tr>"
            for c in claims)
        out += ["<h2>Verdicts</h2><table><tr><th>study</th><th>claim</th><th>expected</th><th>measured</th>"
                f"<th>verdict</th><th>note</th></tr>{rows}</table>"]
    for s in sections:
        out.append(f"<h2>{e(s.title)}</h2>")
        if s.command:
            secs = f", {s.seconds:.0f} s" if s.seconds is not None else ""
            out.append(f"<p><code>{e(s.command)}</code> ({'ok' if s.ok else 'FAILED'}{secs})</p>")
        out += [f"<p>{e(p)}</p>" for p in s.text]
        for caption, df, glossary in s.tables:
            out.append(f"<p><b>{e(caption)}</b></p>" + df.to_html(index=False, border=0, na_rep="–",
                                                                    float_format=lambda v: f"{v:.3g}"))
            if glossary:
                out.append("<ul>" + "".join(f"<li><code>{e(k)}</code>: {e(v)}</li>" for k, v in glossary.items())
                           + "</ul>")
        for path, caption in s.figures:
            out.append(f"<figure>{_img(path, base)}<figcaption>{e(caption)}</figcaption></figure>")
        if s.preformatted:
            out.append(f"<pre>{e(s.preformatted.strip())}</pre>")
    out.append("</body></html>")
    return "\n".join(out)


def write_report(folder: str, title: str, details: dict, claims: list, sections: list) -> tuple[str, str]:
    """Write `report.md` and `report.html` into `folder`; returns their paths."""
    md, page = os.path.join(folder, "report.md"), os.path.join(folder, "report.html")
    with open(md, "w") as f:
        f.write(render_markdown(title, details, claims, sections, base=folder))
    with open(page, "w") as f:
        f.write(render_html(title, details, claims, sections, base=folder))
    return md, page
