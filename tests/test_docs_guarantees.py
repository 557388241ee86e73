"""docs/guarantees.md: every promise names its test, and every test it names exists.

A citation is a bracket of backticked references, `tests/<file>.py::<test>` followed by bare test names
of the same file. Each bold-headed paragraph of "What is validated" and each bullet of "What resumes
exactly" that promises something cites at least one test."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "docs" / "guarantees.md").read_text()


def _cited() -> list[tuple[str, str]]:
    out = []
    for block in re.findall(r"\[(`tests/.*?)\]", TEXT, flags=re.S):
        current = None
        for tok in (re.sub(r"\s+", "", t) for t in re.findall(r"`([^`]+)`", block)):
            if tok.startswith("tests/"):
                current, _, name = tok.partition("::")
            else:
                name = tok
            if current and name.startswith("test_"):
                out.append((current, name.split("[")[0]))
    return out


def test_every_cited_test_exists():
    cited = _cited()
    assert len(cited) > 40, len(cited)  # the parser found the citations
    missing = [f"{f}::{n}" for f, n in cited
               if not (ROOT / f).exists() or not re.search(rf"^def {re.escape(n)}\(", (ROOT / f).read_text(), re.M)]
    assert not missing, missing


def _section(title: str) -> str:
    return TEXT.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_every_promise_names_a_test():
    paragraphs = [p for p in re.split(r"\n(?=\*\*)", _section("What is validated")) if p.startswith("**")]
    bullets = [b for b in re.split(r"\n(?=- )", _section("What resumes exactly")) if b.startswith("- ")]
    bare = [p.splitlines()[0] for p in paragraphs + bullets
            if "[`tests/" not in p and "does not resume" not in p]
    assert len(paragraphs) >= 8 and len(bullets) >= 5
    assert not bare, bare
    assert "[`tests/" in _section("Atomic writes")
