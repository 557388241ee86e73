"""Command outputs: file names derived from table values never leave the output directory,
and `symfast readout --out` refuses to replace another run's ensemble unless told to."""
from __future__ import annotations

import os

import pandas as pd
import pytest

from symfast.cli import main
from symfast.commands.report import heatmap_name


def _crafted_sweep(root, hidden_values):
    rows, cells = [], []
    for i, hid in enumerate(hidden_values):
        cells.append(dict(cell_id=f"b:{i}", shape="square", encoding="dyadic", hidden=hid, activation="relu",
                          steps=10, lr=0.002, points=64, seed=0, final_loss=0.1, observable="gram", element="e",
                          liftable=True, score=0.01))
        for el in ("e", "r90"):
            rows.append(dict(shape="square", observable="gram", element=el, observed=True, liftable=True,
                             true_symmetry=True, approx_observed=True, score=0.01, p_adjusted=0.5,
                             p_adjusted_all=0.5, alpha=0.05, encoding="dyadic", hidden=hid, activation="relu",
                             steps=10))
    pd.DataFrame(cells).to_csv(root / "results.csv", index=False)
    pd.DataFrame(rows).to_csv(root / "observed.csv", index=False)


def test_report_heatmaps_stay_in_the_sweep_directory(tmp_path):
    root, outside = tmp_path / "sweep", tmp_path / "elsewhere"
    root.mkdir(), outside.mkdir()
    evil = ["../elsewhere/pwned", str(outside / "abs"), "16"]
    _crafted_sweep(root, evil)
    assert main(["report", str(root), "--quiet"]) == 0
    assert os.listdir(outside) == [] and not list(tmp_path.glob("*.png"))
    pngs = sorted(p.name for p in root.glob("*.png"))
    assert len(pngs) == 3 and "heatmap_16_relu_10.png" in pngs
    assert all("/" not in n and ".." not in n for n in pngs)


@pytest.mark.parametrize("hidden", ["../../x", "/etc/cron.d/y", "a\\b", "..", "", "64x64"])
def test_heatmap_name_is_a_plain_file_name(hidden):
    name = heatmap_name(hidden, "relu", 1500)
    assert os.path.basename(name) == name and name.startswith("heatmap_") and name.endswith(".png")
    assert ".." not in name and "/" not in name and "\\" not in name
    assert heatmap_name("../a", "relu", 1) != heatmap_name("/a", "relu", 1)


TINY = ["readout", "--shapes", "square", "--pe", "dyadic", "--seeds", "3", "--points", "16", "--hidden", "8",
        "--sweep", "0", "--quiet"]


def test_readout_refuses_to_replace_another_runs_ensemble(tmp_path, capsys):
    out = str(tmp_path / "out")
    assert main([*TINY, "--steps", "3", "--out", out]) == 0
    before = os.path.getmtime(os.path.join(out, "ensemble_dyadic.pt"))
    capsys.readouterr()
    assert main([*TINY, "--steps", "4", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "ensemble_dyadic.pt" in err and "--overwrite" in err and len(err.strip().splitlines()) == 1
    assert os.path.getmtime(os.path.join(out, "ensemble_dyadic.pt")) == before
    assert main([*TINY, "--steps", "4", "--out", out, "--overwrite"]) == 0
    from symfast.nn.fields import Ensemble

    assert Ensemble.load(os.path.join(out, "ensemble_dyadic.pt")).config["steps"] == 4
    assert sorted(n for n in os.listdir(out) if n.startswith(".")) == []  # no temporary files left
