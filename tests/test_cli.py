import argparse
import os
import shutil
import subprocess
import sys
import time

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


def test_readout_cli_eikonal_training_is_its_own_run(tmp_path, capsys):
    out = tmp_path / "ro"
    args = ["readout", "--shapes", "square", "--pe", "dyadic", "--seeds", "3", "--steps", "5", "--points", "64",
            "--hidden", "16", "--sweep", "0", "--out", str(out), "--quiet"]
    assert main([*args, "--eikonal", "0.1", "--normals", "0.2"]) == 0
    assert torch.load(out / "ensemble_dyadic.pt", weights_only=True)["config"]["eikonal"] == 0.1
    capsys.readouterr()
    assert main(args) == 2  # the plain fit does not reuse the eikonal-trained ensemble
    assert "eikonal" in capsys.readouterr().err


def test_readout_cli_prefix_grams_side_by_side(tmp_path, capsys):
    out = tmp_path / "ro"
    args = ["readout", "--shapes", "square", "--pe", "dyadic", "--seeds", "4", "--steps", "5", "--points", "64",
            "--hidden", "16,16", "--sweep", "0", "--observable", "prefixes", "--out", str(out), "--quiet"]
    assert main(args) == 0
    table = pd.read_csv(out / "readout.csv")
    assert set(table["observable"]) == {"prefix1", "prefix2", "prefix3"}
    assert "separation" in capsys.readouterr().out


@pytest.mark.parametrize("bad,message", [
    (["--shapes", "blob"], "unknown shape"),
    (["--pe", "sinusoid"], "unknown encoding"),
    (["--seeds", "0"], "--seeds must be positive"),
    (["--seeds", "2"], "--seeds must be at least 3"),
    (["--hidden", "a,b"], "--hidden"),
    (["--out", "/proc/no/such/dir"], "cannot write"),
    (["--eikonal", "-1"], "--eikonal must be a finite weight >= 0"),
    (["--normals", "nan"], "--normals must be a finite weight >= 0"),
    (["--eikonal", "0.1", "--budget", "auto"], "drop --budget auto"),
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
    assert "| layerwise | Flip-invariant networks are layerwise equivariant" in report  # verdict rows
    assert main(["reproduce", "--only", "nonsense", "--out", str(out)]) == 2
    assert "unknown study" in capsys.readouterr().err


# -- "exit 2, one line, never a traceback" for input errors; tracebacks for bugs ----------------------------
import errno  # noqa: E402

import torch  # noqa: E402

import symfast  # noqa: E402
from symfast.cli import build_parser  # noqa: E402

TINY = ["--shapes", "square", "--pe", "dyadic", "--seeds", "3", "--steps", "2", "--points", "16", "--hidden", "8",
        "--sweep", "0", "--quiet"]
TINY_SPEC = 'shapes = ["circle"]\nencodings = ["dyadic"]\nhidden = [[8]]\nsteps = 2\npoints = 16\nseeds = 2\n'


def run_cli(args, capsys):
    """(exit status, stderr) of `symfast ARGS`, whether the command returns or argparse exits."""
    try:
        rc = main(args)
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().err


def assert_usage_error(args, capsys, *words):
    rc, err = run_cli(args, capsys)
    assert rc == 2, err
    assert "Traceback" not in err and err.strip().count("\n") == 0, err
    for w in words:
        assert w in err, (w, err)
    return err


class _Payload:
    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """An output directory with a good ensemble_dyadic.pt from the TINY settings."""
    out = tmp_path_factory.mktemp("trained")
    assert main(["readout", *TINY, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("damage", ["truncate", "garbage", "empty", "payload", "wrong_type"])
def test_corrupt_ensemble_file_is_one_line(tmp_path, trained, capsys, damage):
    out = tmp_path / "o"
    shutil.copytree(trained, out)
    f = out / "ensemble_dyadic.pt"
    data = f.read_bytes()
    if damage == "truncate":
        f.write_bytes(data[: len(data) // 2])
    elif damage == "garbage":
        f.write_bytes(os.urandom(4096))
    elif damage == "empty":
        f.write_bytes(b"")
    elif damage == "payload":
        torch.save({"format": _Payload(tmp_path / "pwned")}, f)
    else:
        torch.save({"format": "symfast.Ensemble/1", "weights": 3}, f)
    assert_usage_error(["readout", *TINY, "--out", str(out)], capsys, str(f))
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("damage", ["truncate", "garbage", "payload"])
def test_corrupt_checkpoint_is_one_line(tmp_path, trained, capsys, damage):
    ck = tmp_path / "checkpoint_dyadic.pt"
    if damage == "payload":
        torch.save({"step": _Payload(tmp_path / "pwned")}, ck)
    else:
        torch.save({"step": 1, "params": [torch.zeros(100)]}, ck)
        ck.write_bytes(ck.read_bytes()[:50] if damage == "truncate" else os.urandom(200))
    assert_usage_error(["readout", *TINY, "--out", str(tmp_path)], capsys, str(ck), "delete it")
    assert not (tmp_path / "pwned").exists()


def test_full_and_read_only_disks_are_one_line(tmp_path, capsys, monkeypatch):
    from symfast.nn.fields import Ensemble

    def full(self, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(Ensemble, "save", full)
    assert_usage_error(["readout", *TINY, "--out", str(tmp_path / "a")], capsys, "No space left",
                       "ensemble_dyadic.pt")
    monkeypatch.undo()
    real_makedirs = os.makedirs

    def read_only(path, *a, **kw):
        if str(tmp_path) in str(path):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_makedirs(path, *a, **kw)

    monkeypatch.setattr(os, "makedirs", read_only)
    assert_usage_error(["readout", *TINY, "--out", str(tmp_path / "b")], capsys, "Read-only")
    spec = tmp_path / "s.toml"
    spec.write_text(TINY_SPEC)
    assert_usage_error(["sweep", str(spec), "--out", str(tmp_path / "c")], capsys, "Read-only", "sweep directory")


def test_full_disk_during_a_sweep_is_one_line_and_resumable(tmp_path, capsys, monkeypatch):
    spec = tmp_path / "s.toml"
    spec.write_text(TINY_SPEC)
    from symfast.readout.sweeps import store as store_mod

    def full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", path)

    with monkeypatch.context() as m:
        m.setattr(store_mod, "atomic_write_bytes", full)
        assert_usage_error(["sweep", str(spec), "--out", str(tmp_path / "o")], capsys, "No space left")
    assert main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--quiet"]) == 0


@pytest.mark.parametrize("args,words", [
    (["readout", "--device", "bogus"], ["--device", "bogus"]),
    (["readout", "--lr", "1e30"], ["--lr", "learning rate"]),
    (["readout", "--lr", "nan"], ["--lr"]),
    (["readout", "--observable", "prefix9"], ["prefix9"]),
    (["readout", "--activation", "swish"], ["--activation"]),
    (["readout", "--hidden", "8,100000000"], ["--hidden"]),
    (["readout", "--seeds", "100000000"], ["--seeds"]),
    (["readout", "--steps", "2.7"], ["--steps", "2.7"]),
    (["readout", "--backend", "triton"], ["--backend", "triton"]),
    (["schur", "--threads", "-3"], ["--threads", "-3"]),
    (["schur", "--lr", "inf"], ["--lr"]),
    (["layerwise", "--threshold", "nan"], ["--threshold", "nan"]),
    (["sweep", "missing.toml", "--out", "o"], ["missing.toml"]),
    (["sweep", "SPEC", "--out", "o", "--shard", "3/2"], ["--shard"]),
    (["sweep", "SPEC", "--out", "o", "--device", "cuda:7"], ["--device"]),
    (["sweep", "SPEC", "--out", "o", "--executor", "ray", "--address", "127.0.0.1:1"], ["cannot reach", "Ray"]),
    (["sweep", "SPEC", "--out", "o", "--executor", "ray", "--address", "nohost"], ["--address"]),
    (["merge", "nowhere", "--out", "o"], ["nowhere"]),
    (["report", "nowhere"], ["nowhere"]),
    (["nonsense"], ["invalid choice"]),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, monkeypatch, args, words):
    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("a CUDA machine")
    if args[:2] == ["readout", "--backend"] and os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("triton runs interpreted here")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "SPEC").write_text(TINY_SPEC)
    if args[0] in ("readout", "schur", "layerwise"):
        args = [*args, "--out", str(tmp_path / "o")]
    t = time.perf_counter()
    assert_usage_error(args, capsys, *words)
    assert time.perf_counter() - t < 30  # nothing trained, no connect hang


def test_cuda_on_a_cpu_build_is_one_line(capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA machine")
    assert_usage_error(["readout", "--device", "cuda"], capsys, "no CUDA device")


def test_malformed_observed_csv_is_one_line(tmp_path, capsys):
    (tmp_path / "results.csv").write_text(  # a well-formed results table: only observed.csv is broken
        "cell_id,shape,encoding,hidden,activation,steps,lr,points,seed,final_loss,observable,element,liftable,score\n"
        "c0,circle,dyadic,8,relu,2,0.002,16,0,1.0,gram,r0,True,0.1\n")
    (tmp_path / "observed.csv").write_text("a,b\n1,2\n")
    assert_usage_error(["report", str(tmp_path)], capsys, "observed.csv", "missing columns")
    (tmp_path / "observed.csv").write_bytes(b"\xff\xfe\x00garbage\x00\x01")
    assert_usage_error(["report", str(tmp_path)], capsys, "observed.csv")
    cols = "encoding,hidden,activation,steps,shape,observable,element,observed,liftable,true_symmetry,score"
    (tmp_path / "observed.csv").write_text(cols + "\ndyadic,8,relu,2,circle,gram,e,maybe,True,True,0.1\n")
    assert_usage_error(["report", str(tmp_path)], capsys, "'observed'", "True/False")


def test_internal_errors_keep_their_traceback(tmp_path, monkeypatch):
    """Only input errors become exit 2: a ValueError from inside training is a bug and propagates."""
    from symfast.readout.sweeps import run as run_mod

    def broken(*a, **kw):
        raise ValueError("an internal bug")

    monkeypatch.setattr(run_mod, "train_batch", broken)
    spec = tmp_path / "s.toml"
    spec.write_text(TINY_SPEC)
    with pytest.raises(ValueError, match="an internal bug"):
        main(["sweep", str(spec), "--out", str(tmp_path / "o"), "--quiet"])


@pytest.mark.parametrize("command, patch", [
    (["schur", "--task", "flipflop", "--seeds", "1", "--epochs", "0", "--n-eval", "4", "--n-random", "0",
      "--alphas", "", "--quiet"], ("symfast.schur.ablation", "schur_ablation")),
    (["layerwise", "--steps", "1", "--limit", "40", "--no-control", "--quiet"],
     ("symfast.layerwise.experiments", "run_experiment")),
])
def test_every_command_keeps_internal_tracebacks(command, patch, tmp_path, monkeypatch):
    """One rule for every command: a ValueError raised inside the computation is a bug, not exit 2."""
    import importlib

    def broken(*a, **kw):
        raise ValueError("an internal bug")

    monkeypatch.setattr(importlib.import_module(patch[0]), patch[1], broken)
    with pytest.raises(ValueError, match="an internal bug"):
        main([*command, "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("args, words", [
    (["schur", "--task", "bogus"], ("unknown task 'bogus'",)),
    (["schur", "--construction", ","], ("no construction given",)),
    (["reproduce", "--only", "readout,nope"], ("unknown study 'nope'",)),
    (["layerwise", "--data", "cifar10", "--root", "/nonexistent/dir"], ("--data cifar10",)),
])
def test_schur_layerwise_reproduce_input_errors(args, words, tmp_path, capsys):
    assert_usage_error([*args, "--out", str(tmp_path / "o")], capsys, *words)


def test_version_help_defaults_and_quiet(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"symfast {symfast.__version__}"
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, p in sub.choices.items():
        opts = p._option_string_actions
        assert "--quiet" in opts, name
        assert "(default: False)" not in p.format_help(), name  # switches show no default (test_cli_help)
        if name in ("sweep", "merge", "report", "readout"):
            for a in p._actions:
                assert a.help and a.help.strip(), (name, a.dest)
    # the older spelling still works where a command had it
    args = parser.parse_args(["schur", "--no-progress"])
    assert args.no_progress and parser.parse_args(["schur", "--quiet"]).no_progress
