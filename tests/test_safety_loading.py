"""Damaged files end in one error naming the file: RNN checkpoints, fit_sdf checkpoints with
damaged Adam state, layerwise .npz data, tampered sweep results, tampered ensembles."""
from __future__ import annotations

import ast
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


# -- one loader: nothing in the package unpickles code -----------------------------------------
_PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "symfast")
_LOADER = os.path.join(_PACKAGE, "_io.py")  # symfast._io.safe_load: the one place torch.load is called
# calls that unpickle whatever a file holds (no weights_only, no restricted find_class)
_UNSAFE = {("pickle", "load"), ("pickle", "loads"), ("marshal", "load"), ("marshal", "loads"),
           ("dill", "load"), ("dill", "loads"), ("joblib", "load"), ("pandas", "read_pickle"),
           ("pd", "read_pickle"), ("cloudpickle", "load"), ("cloudpickle", "loads")}


def _dotted(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _unsafe_loads(path: str) -> list[str]:
    """Calls in `path` that could unpickle code: torch.load outside the one loader or without
    weights_only=True, weights_only=<anything but True>, np.load(allow_pickle=True), pickle.load & co."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    torch_names, load_names = {"torch"}, set()  # import torch as t; from torch import load [as l]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            torch_names |= {a.asname or a.name for a in node.names if a.name == "torch"}
        elif isinstance(node, ast.ImportFrom) and node.module in ("torch", "torch.serialization"):
            load_names |= {a.asname or a.name for a in node.names if a.name == "load"}
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(_dotted(b).endswith("Unpickler") for b in node.bases):
            if not any(isinstance(f, ast.FunctionDef) and f.name == "find_class" for f in node.body):
                bad.append(f"{os.path.relpath(path, _PACKAGE)}:{node.lineno}: unpickler {node.name} without find_class")
        if not isinstance(node, ast.Call):
            continue
        name, where = _dotted(node.func), f"{os.path.relpath(path, _PACKAGE)}:{node.lineno}"
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        only = kw.get("weights_only")
        if only is not None and not (isinstance(only, ast.Constant) and only.value is True):
            bad.append(f"{where}: weights_only={ast.unparse(only)}")
        head, _, tail = name.rpartition(".")
        is_torch_load = (tail == "load" and head.split(".")[0] in torch_names) or name in load_names
        if is_torch_load:
            if os.path.abspath(path) != _LOADER:
                bad.append(f"{where}: {name}() outside symfast._io.safe_load")
            elif only is None:
                bad.append(f"{where}: {name}() without weights_only=True")
        if (head.split(".")[-1] if head else "", tail) in _UNSAFE:
            bad.append(f"{where}: {name}()")
        allow = kw.get("allow_pickle")
        if tail == "load" and allow is not None and not (isinstance(allow, ast.Constant) and allow.value is False):
            bad.append(f"{where}: {name}(allow_pickle={ast.unparse(allow)})")
    return bad


def test_no_file_is_loaded_around_the_safe_loader():
    """Every .py file of the package: torch.load only in symfast._io.safe_load, with weights_only=True."""
    files = [os.path.join(d, f) for d, _, fs in os.walk(_PACKAGE) for f in fs if f.endswith(".py")]
    assert len(files) > 50 and _LOADER in files
    bad = [b for f in sorted(files) for b in _unsafe_loads(f)]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source,found", [
    ("import torch\ntorch.load(p, weights_only=False)", ["weights_only=False", "outside"]),
    ("import torch as T\nT.load(p)", ["outside"]),
    ("from torch import load\nload(p, weights_only=True)", ["outside"]),
    ("import pickle\npickle.loads(b)", ["pickle.loads"]),
    ("import numpy as np\nnp.load(p, allow_pickle=True)", ["allow_pickle=True"]),
    ("import torch\ntorch.serialization.load(p, weights_only=flag)", ["weights_only=flag", "outside"]),
    ("import pickle\nclass U(pickle.Unpickler):\n    pass", ["unpickler U without find_class"]),
])
def test_the_load_scan_finds_unsafe_calls(tmp_path, source, found):
    """The scan above is not vacuous: each way around the safe loader is reported."""
    path = tmp_path / "mod.py"
    path.write_text(source)
    bad = "\n".join(_unsafe_loads(str(path)))
    assert all(f in bad for f in found), bad


def _results_folder_with_a_payload_ensemble(root):
    """root/readout holding ensemble_dyadic.pt: a pickle payload that would run code if unpickled."""
    sub = root / "readout"
    sub.mkdir()
    buf = io.BytesIO()
    torch.save({"config": {"steps": 5}, "x": _Boom()}, buf)
    (sub / "ensemble_dyadic.pt").write_bytes(buf.getvalue())
    return sub


def test_reproduce_never_unpickles_a_results_folder(tmp_path, monkeypatch):
    """A pickle payload saved as a readout ensemble: reproduce's report reads it as data; nothing runs."""
    from symfast.commands import reproduce

    monkeypatch.chdir(tmp_path)
    sub = _results_folder_with_a_payload_ensemble(tmp_path)
    assert reproduce._trained_steps(str(sub)) is None
    assert not (tmp_path / "PWNED").exists()


def test_reproduce_names_a_damaged_ensemble_instead_of_losing_the_report(tmp_path, monkeypatch):
    """A results folder whose ensemble file is foreign: the readout section says the figures were not
    drawn and names the file; nothing runs and no traceback ends the report."""
    import pandas as pd

    from symfast.commands import reproduce

    monkeypatch.chdir(tmp_path)
    sub = _results_folder_with_a_payload_ensemble(tmp_path)
    summary = pd.DataFrame({"shape": ["square"], "pe": ["dyadic"], "observable": ["gram"]})
    why = reproduce._readout_figures(str(sub), summary)
    assert why.startswith(f"{sub / 'ensemble_dyadic.pt'} was refused (") and not (tmp_path / "PWNED").exists()
    assert not (sub / "fields.png").exists()
