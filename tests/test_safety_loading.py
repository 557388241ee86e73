"""Damaged files end in one error naming the file: RNN checkpoints, fit_sdf checkpoints with
damaged Adam state, layerwise .npz data, tampered sweep results, tampered ensembles."""
from __future__ import annotations

import io
import os
import pickle
import zipfile

import numpy as np
import pytest
import torch

from symfast._io import atomic_save
from symfast.schur.rnn import TanhRNN, TrainConfig, make_task, save_checkpoint
from symfast.schur.rnn.checkpoint import load_checkpoint, read_checkpoint


class _Boom:
    def __reduce__(self):
        return (os.system, ("touch PWNED",))


@pytest.fixture
def rnn_ckpt(tmp_path):
    task = make_task("flipflop")
    model = TanhRNN(task.n_in, 8, task.n_out, "cayley", generator=torch.Generator().manual_seed(0))
    path = str(tmp_path / "flipflop_cayley_H8_s0.pt")
    save_checkpoint(path, model, task, TrainConfig(epochs=1), 1, losses=[0.5, 0.25])
    return path, model


def _rewrite(path, edit):
    ck = torch.load(path, weights_only=True)
    edit(ck)
    atomic_save(ck, path)


def test_good_rnn_checkpoint_round_trips(rnn_ckpt):
    path, model = rnn_ckpt
    m, task, info = load_checkpoint(path)
    assert torch.equal(m.W, model.W) and task.name == "flipflop" and info["losses"] == [0.5, 0.25]


@pytest.mark.parametrize("damage", ["truncated", "payload", "nan", "shape", "huge", "missing"])
def test_damaged_rnn_checkpoint_is_one_error_naming_the_file(rnn_ckpt, tmp_path, monkeypatch, damage):
    path, _ = rnn_ckpt
    monkeypatch.chdir(tmp_path)
    if damage == "truncated":
        data = open(path, "rb").read()
        open(path, "wb").write(data[: len(data) // 2])
    elif damage == "payload":
        buf = io.BytesIO()
        torch.save({"model": _Boom()}, buf, pickle_protocol=2)
        open(path, "wb").write(buf.getvalue())
    elif damage == "nan":
        _rewrite(path, lambda ck: ck["state"]["readout"].fill_(float("nan")))
    elif damage == "shape":
        _rewrite(path, lambda ck: ck["state"].__setitem__("readout", torch.zeros(3, 5)))
    elif damage == "huge":
        _rewrite(path, lambda ck: ck["model"].__setitem__("n_hidden", 10**9))
    else:
        _rewrite(path, lambda ck: ck.pop("state"))
    with pytest.raises(ValueError, match=os.path.basename(path)):
        read_checkpoint(path)
    assert not (tmp_path / "PWNED").exists()


def test_schur_command_names_a_damaged_checkpoint(tmp_path, capsys):
    from symfast.cli import main

    out = tmp_path / "out"
    (out / "ckpt").mkdir(parents=True)
    bad = out / "ckpt" / "flipflop_cayley_H8_s0.pt"
    bad.write_bytes(b"PK\x03\x04 not a zip")
    rc = main(["schur", "--task", "flipflop", "--construction", "cayley", "--hidden", "8", "--seeds", "1",
               "--epochs", "1", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and str(bad) in err, err


def test_tampered_sweep_results_are_one_error_naming_the_file(tmp_path):
    import pandas as pd

    from symfast.readout.sweeps import load_results

    good = pd.DataFrame(dict(cell_id=["b:0"], shape=["square"], encoding=["dyadic"], hidden=["16"],
                             activation=["relu"], steps=[10], lr=[0.002], points=[64], seed=[0], final_loss=[0.1],
                             observable=["gram"], element=["e"], liftable=[True], score=[0.5]))
    good.to_csv(tmp_path / "results.csv", index=False)
    assert len(load_results(str(tmp_path))) == 1
    for tampered in (good.drop(columns="score"), good.assign(score=["high"]), good.assign(steps=["ten"])):
        tampered.to_csv(tmp_path / "results.csv", index=False)
        with pytest.raises(ValueError, match="results.csv"):
            load_results(str(tmp_path))
    (tmp_path / "results.parquet").write_bytes(b"PAR1 garbage")
    with pytest.raises(ValueError, match="results.parquet"):
        load_results(str(tmp_path))


@pytest.fixture(scope="module")
def tiny_ensemble():
    import symfast as sf

    return sf.fit_sdf(["square", "triangle"], sf.DyadicAxisPE(K=2), seeds=2, steps=2, points=8, hidden=(4,),
                      progress=False)


@pytest.mark.parametrize("tamper", ["relabel", "encoding", "weights", "config"])
def test_tampered_ensemble_is_refused(tmp_path, tiny_ensemble, tamper):
    from symfast.nn.fields import Ensemble

    path = tmp_path / "ensemble_dyadic.pt"
    tiny_ensemble.save(path)
    assert Ensemble.load(path).shapes == tiny_ensemble.shapes
    d = torch.load(path, weights_only=True)
    if tamper == "relabel":
        d["shapes"][0], d["shapes"][-1] = d["shapes"][-1], d["shapes"][0]
    elif tamper == "encoding":
        d["pe"]["frequencies"][0][0] *= 2
    elif tamper == "weights":
        d["weights"][0][0, 0, 0] += 1
    else:
        d["config"]["pe"] = "rff"
    atomic_save(d, path)
    with pytest.raises(ValueError, match="ensemble_dyadic.pt"):
        Ensemble.load(path)
    d.pop("fingerprint")  # a file written before fingerprints: the config is still checked against the members
    atomic_save(d, path)
    if tamper in ("relabel", "config"):
        with pytest.raises(ValueError, match="config|shapes"):
            Ensemble.load(path)
