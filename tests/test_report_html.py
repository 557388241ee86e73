"""report.html is rendered, not dumped: Markdown through markdown-it-py (code spans, lists, tables),
study tables as HTML tables, each distinct figure embedded once (by content), compressed, and linked
once the page's image budget is spent."""
import os
import re
import shutil

import pytest

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from symfast.report import Claim, Section, write_report  # noqa: E402
from symfast.report.figures import FigureStore  # noqa: E402

SUITE_MD = """| model | activation | sym/anti/paired |
|---|---|---|
| mlp | tanh | 7/0/0 |
| cnn | tanh | 3/1/2 |"""


def _figure(path, seed=0, size=(6, 4)):
    rng = np.random.default_rng(seed)
    fig, ax = plt.subplots(figsize=size)
    ax.plot(rng.normal(size=50).cumsum())
    fig.savefig(path, dpi=120)
    plt.close(fig)


def test_markdown_tables_and_a_duplicated_figure_render_once(tmp_path):
    _figure(tmp_path / "sdf_slices.png")
    shutil.copy(tmp_path / "sdf_slices.png", tmp_path / "level_sets.png")  # byte-identical under another name
    _figure(tmp_path / "other.png", seed=1)
    sec = Section("Layerwise", ["Read `results.json` for the numbers; the **suite** trains two models."],
                  [("Scores", pd.DataFrame({"element": ["r0"], "score": [0.5]}), {"score": "relative `Gram` change"})],
                  [(str(tmp_path / "sdf_slices.png"), "slices"), (str(tmp_path / "level_sets.png"), "level sets"),
                   (str(tmp_path / "other.png"), "other")],
                  command="symfast layerwise --suite", markdown=[SUITE_MD], notes=["`level_sets.png` not drawn"])
    claims = [Claim("layerwise", "the `flip` action fits", "< 0.5", "0.7", "missed")]
    md_path, html_path = write_report(str(tmp_path), "t", {}, claims, [sec], glossary={"dfvu": "ΔFVU"})
    page = open(html_path).read()
    body = re.sub(r"<code>.*?</code>", "", page, flags=re.S)
    assert "`" not in body  # every code span rendered
    assert "<pre>" not in page  # the study's markdown is rendered, not preformatted
    assert page.count("<table") >= 4  # run details, verdicts, the scores table, the suite's markdown table
    assert "<td>7/0/0</td>" in page and "<strong>suite</strong>" in page and "<code>results.json</code>" in page
    assert page.count("<img") == 2  # three figures, two distinct
    assert "the same image as <a href='#fig-1'>figure 1</a>" in page
    assert "measured 0.7, outside the expected &lt; 0.5" in page  # a miss says why even without a note
    assert "<h2>Glossary</h2>" in page and "<code>dfvu</code>" in page
    md = open(md_path).read()
    assert md.count("![") == 2 and "the same image as figure 1 above (`level_sets.png`)" in md
    assert "| mlp | tanh | 7/0/0 |" in md and "- `level_sets.png` not drawn" in md


def test_figures_are_compressed_and_linked_beyond_the_budget(tmp_path):
    paths = []
    for k in range(3):
        p = tmp_path / f"f{k}.png"
        _figure(p, seed=k, size=(20, 8))  # 2400 px wide
        paths.append(str(p))
    store = FigureStore(str(tmp_path))
    first = store.img(paths[0])
    assert first.startswith('<img src="data:image/png;base64,')
    assert store.used * 3 / 4 < (tmp_path / "f0.png").stat().st_size  # re-encoded smaller
    small = FigureStore(str(tmp_path), budget=store.used + 10)
    assert "base64" in small.img(paths[0]) and "base64" not in small.img(paths[1])
    assert '<a href="f2.png">' in small.img(paths[2])


def _links(md_path, html_path):
    """Every image target of report.md (Markdown images) and of report.html (non-embedded <img>
    sources and figure links), as written."""
    from urllib.parse import unquote

    md = open(md_path).read()
    page = open(html_path).read()
    md_links = [unquote(m) for m in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)]
    html_links = [unquote(m) for m in re.findall(r'(?:src|href)="([^"]+)"', page) if not m.startswith("data:")]
    return md_links, html_links


@pytest.mark.parametrize("out_kind", ["relative", "absolute"])
@pytest.mark.parametrize("budget", [10**9, 0], ids=["embedded", "linked"])
def test_figure_links_resolve_from_the_report_folder_wherever_the_run_started(tmp_path, monkeypatch, out_kind,
                                                                             budget):
    """A run started in one folder writes figures under a relative or absolute --out; the report's
    links must resolve from the report's own folder (where a browser opens it), not from the shell's."""
    import symfast.report.figures as figures

    start = tmp_path / "where the run started"
    (start / "results" / "reproduce" / "readout").mkdir(parents=True)
    monkeypatch.chdir(start)
    out = os.path.join("results", "reproduce")
    if out_kind == "absolute":
        out = str(start / out)
    sub = os.path.join(out, "readout")
    _figure(os.path.join(sub, "summary grid.png"))
    _figure(os.path.join(sub, "heatmap.png"), seed=1)
    monkeypatch.setattr(figures, "EMBED_BUDGET", budget)
    sec = Section("Readout", ["text"], figures=[(os.path.join(sub, "summary grid.png"), "grid"),
                                                (os.path.join(sub, "heatmap.png"), "heatmap")])
    md_path, html_path = write_report(out, "t", {}, [], [sec])
    monkeypatch.chdir(tmp_path)  # opened from elsewhere: only the report's folder matters
    report_dir = os.path.dirname(os.path.abspath(os.path.join(start, md_path)))
    md_links, html_links = _links(os.path.join(start, md_path), os.path.join(start, html_path))
    assert len(md_links) == 2 and all(not os.path.isabs(p) for p in md_links)
    for link in md_links + html_links:
        assert os.path.isfile(os.path.join(report_dir, link)), link
    page = open(os.path.join(start, html_path)).read()
    assert "missing" not in page
    assert page.count("<img") == 2
    if budget == 0:
        assert len(html_links) == 4  # two <a href> and two <img src>, all relative to the report
