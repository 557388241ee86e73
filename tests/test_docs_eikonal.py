"""The eikonal results page is generated: it equals the rendering of its committed data, and the
verdict rule it applies is the one stated on it."""
import importlib.util
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _module():
    spec = importlib.util.spec_from_file_location("eikonal_results", ROOT / "docs" / "results" / "eikonal.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_page_is_the_rendering_of_its_data():
    mod = _module()
    page = (ROOT / "docs" / "results" / "eikonal" / "comparison.md").read_text()
    assert page == mod.render(str(ROOT / "docs" / "results" / "eikonal" / "data"))


def test_cell_verdict_rule():
    mod = _module()
    ok = mod.TRAINED_MSE / 10
    assert mod.cell_verdict("r0 m0", "m0 r0", ok, ok) == "held: same G_obs"
    assert mod.cell_verdict("r0 m0", "r0", ok, ok) == "missed: G_obs differs"
    assert mod.cell_verdict("r0", "r0", ok, mod.TRAINED_MSE * 2).startswith("no verdict")
    assert mod.cell_verdict("r0", "r0", math.nan, ok).startswith("no verdict")
