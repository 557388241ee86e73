"""The README's install table lists exactly what pyproject.toml installs: the core dependencies and
every extra, package by package (a reader choosing extras must not miss one)."""
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _name(requirement: str) -> str:
    """'triton>=3.0; sys_platform ...' -> 'triton'; 'mkdocstrings[python]>=0.26' -> 'mkdocstrings'."""
    return re.split(r"[\s<>=!~;\[]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _readme_table() -> dict:
    """{extra ('' for the core row): set of package names} from README.md's extras table."""
    if not (ROOT / "README.md").exists() or not (ROOT / "pyproject.toml").exists():
        pytest.skip("needs the source tree (README.md, pyproject.toml)")
    rows = {}
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.match(r"\|\s*(\(none\)|`([a-z0-9-]+)`)\s*\|([^|]+)\|", line)
        if m:
            names = re.sub(r"\([^)]*\)", "", m.group(3))  # "(~1 GB, ...)" remarks are not packages
            rows[m.group(2) or ""] = {n.strip().lower() for n in names.split(",") if n.strip()}
    return rows


def test_readme_extras_table_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    want = {"": {_name(r) for r in project["dependencies"]}}
    want.update({k: {_name(r) for r in v} for k, v in project["optional-dependencies"].items()})
    assert _readme_table() == want
