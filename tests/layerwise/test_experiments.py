"""Layerwise experiments on digits: equivariance-loss training vs control, the CLI and its figure."""
import json
import os

import numpy as np
import pytest

from symfast.cli import main
from symfast.layerwise.data import load_digits
from symfast.layerwise.experiments import analyse, train_equivariant


def _small():
    d = load_digits()
    idx = np.random.default_rng(0).permutation(len(d.x))[:500]
    from symfast.layerwise.data import ImageData

    return ImageData(d.x[idx], d.y[idx], d.shape, d.name).split(0.3, seed=0)


def test_invariance_loss_gives_a_recoverable_action():
    train, test = _small()
    eq = analyse(train_equivariant("classifier", train, "tanh", 1.0, steps=200, seed=0), "classifier", test)
    ctrl = analyse(train_equivariant("classifier", train, "tanh", 0.0, steps=200, seed=0), "classifier", test)
    assert eq.equivariance < 0.3 * ctrl.equivariance
    # layer-1 weight error: below the control and below the random-permutation baseline
    assert eq.actions.errors[0] < ctrl.actions.errors[0] and eq.actions.errors[0] < eq.actions.baseline[0]
    assert eq.data_errors[-1] < ctrl.data_errors[-1]
    p = eq.projection
    assert p["equivariance_after"] < 1e-10  # projected network is exactly invariant
    assert p["loss_after"] > p["loss_random"]  # recovered actions keep accuracy better than random ones
    assert eq.reduction["function_error"] < 1e-10
    assert eq.near_linear.shape == (2,)


def test_autoencoder_equivariance_loss_runs():
    train, test = _small()
    r = analyse(train_equivariant("autoencoder", train, "relu", 1.0, steps=60, seed=0), "autoencoder", test,
                project=False)
    assert r.metric_name == "mse" and np.isfinite(r.metric)
    assert r.actions.errors.shape == (4,) and r.actions.baseline.shape == (4,)


def test_cli_layerwise_writes_table_figure_json(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["layerwise", "--limit", "300", "--steps", "40", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "equivariant:" in text and "control:" in text and "random" in text
    for name in ("filters_equivariant.png", "filters_control.png", "results.json"):
        assert (out / name).stat().st_size > 0
    res = json.loads((out / "results.json").read_text())
    assert len(res["results"]["equivariant"][0]["errors"]) == 3
    with open(out / "filters_equivariant.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_layerwise_bad_input(tmp_path, capsys):
    assert main(["layerwise", "--steps", "0", "--out", str(tmp_path)]) == 2
    assert "--steps must be in 1..1000000, got 0" in capsys.readouterr().err
    assert main(["layerwise", "--data", "cifar10", "--out", str(tmp_path)]) == 2
    assert "needs --root" in capsys.readouterr().err
    assert main(["layerwise", "--data", "cifar10", "--root", os.path.join(str(tmp_path), "nope"),
                 "--out", str(tmp_path)]) == 2
    assert "never downloads" in capsys.readouterr().err


def test_cli_layerwise_cnn_attention_and_suite(tmp_path, capsys):
    assert main(["layerwise", "--model", "cnn", "--activation", "sigmoid", "--limit", "200", "--steps", "10",
                 "--out", str(tmp_path / "cnn")]) == 0
    text = capsys.readouterr().out
    assert "equivariant (" in text and "control (" in text and "random pairings" in text
    assert (tmp_path / "cnn" / "filters_control.png").stat().st_size > 0
    assert main(["layerwise", "--model", "attention", "--steps", "10", "--out", str(tmp_path / "att")]) == 0
    assert "| equivariant |" in capsys.readouterr().out
    assert main(["layerwise", "--suite", "--limit", "200", "--steps", "5", "--seed-offset", "1000", "--out",
                 str(tmp_path / "suite")]) == 0
    text = capsys.readouterr().out
    for needle in ("| mlp | sigmoid | equivariant |", "| cnn | relu | control |", "near-linear", "| control |",
                   "sigmoid | sign | signed permutations with affine compensation"):
        assert needle in text, needle
    res = json.loads((tmp_path / "suite" / "results.json").read_text())
    assert len(res["suite"]) == 12 and len(res["autoencoder_regimes"]) == 4 and len(res["attention"]) == 2
    assert res["settings"] == {"quick": False, "steps": 5, "seed_offset": 1000, "data": "digits"}  # a fresh seed
    assert (tmp_path / "suite" / "regimes.png").stat().st_size > 0
    with pytest.raises(SystemExit) as e:  # argparse rejects an activation outside the table
        main(["layerwise", "--activation", "gelu9", "--out", str(tmp_path)])
    assert e.value.code == 2
