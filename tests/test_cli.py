import os
import subprocess
import sys

import pandas as pd
import pytest

from symfast.cli import main


def test_readout_cli_end_to_end(tmp_path, capsys):
    out = tmp_path / "ro"
    args = ["readout", "--shapes", "triangle,square", "--pe", "dyadic,rff", "--seeds", "3", "--steps", "5",
            "--points", "64", "--hidden", "16", "--sweep", "6", "--out", str(out), "--quiet"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "hierarchy" in printed and "wall time" in printed
    for f in ("readout.csv", "readout.parquet", "summary.csv", "sweep.csv", "heatmap.png", "sweep.png",
              "ensemble_dyadic.pt", "ensemble_rff.pt"):
        assert (out / f).exists(), f
    table = pd.read_csv(out / "readout.csv")
    assert set(table["shape"]) == {"triangle", "square"} and set(table["pe"]) == {"dyadic", "rff"}
    assert len(table) == 2 * 2 * 16
    # a rerun reuses the trained ensembles instead of training again (said as progress, so not --quiet)
    assert main([a for a in args if a != "--quiet"]) == 0
    assert "loaded trained ensemble" in capsys.readouterr().err


@pytest.mark.parametrize("bad,message", [
    (["--shapes", "blob"], "unknown shape"),
    (["--pe", "sinusoid"], "unknown encoding"),
    (["--seeds", "0"], "--seeds must be positive"),
    (["--hidden", "a,b"], "--hidden"),
    (["--out", "/proc/no/such/dir"], "cannot write"),
])
def test_readout_cli_bad_input(bad, message, capsys, tmp_path):
    args = ["readout", "--out", str(tmp_path / "x"), *bad]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_nan_ensemble_rejected(tmp_path, capsys):

    import symfast as sf

    out = tmp_path / "ro"
    os.makedirs(out)
    ens = sf.fit_sdf(["square"], sf.DyadicAxisPE(), seeds=2, hidden=(16,), steps=2, points=16, progress=False)
    ens.weights[0][0, 0, 0] = float("nan")
    ens.save(out / "ensemble_dyadic.pt")
    assert main(["readout", "--shapes", "square", "--pe", "dyadic", "--out", str(out)]) == 2
    assert "NaN" in capsys.readouterr().err


def test_console_script_help():
    r = subprocess.run([sys.executable, "-m", "symfast.cli", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "readout" in r.stdout


def test_reproduce_writes_report(tmp_path, capsys):
    out = tmp_path / "rep"
    assert main(["reproduce", "--quick", "--only", "layerwise", "--out", str(out)]) == 0
    report = (out / "report.md").read_text()
    assert "## Layerwise equivariance" in report and "ok" in report and "filters_equivariant.png" in report
    assert main(["reproduce", "--only", "nonsense", "--out", str(out)]) == 2
    assert "unknown study" in capsys.readouterr().err
