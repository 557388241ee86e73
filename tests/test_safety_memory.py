"""Sizes against memory: sizes each within their bound whose product exceeds the machine's memory end in
one line and exit 2 before anything is allocated; ordinary runs are not refused."""
from __future__ import annotations

import os
import sys

import pytest

from symfast.cli import build_parser, main
from symfast.commands import memory
from symfast.commands.schur import prepare_run
from symfast.commands.schur_flags import parse_settings

ABSURD_SCHUR = [
    ["--task", "copy", "--batch", "65536", "--hidden", "4096", "--copy-length", "4096"],
    ["--task", "copy", "--copy-length", "4096", "--copy-delay", "65536", "--n-eval", "65536"],
    ["--family", "gru", "--task", "flipflop", "--batch", "65536", "--hidden", "4096"],
    ["--family", "lstm", "--task", "flipflop", "--batch", "65536", "--hidden", "4096", "--engine", "torch"],
]


@pytest.mark.parametrize("argv", ABSURD_SCHUR, ids=lambda a: " ".join(a[:4]))
def test_absurd_schur_sizes_are_refused_before_allocating(tmp_path, capsys, argv):
    assert main(["schur", *argv, "--out", str(tmp_path), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "needs at least" in err and "of memory" in err and ("psutil" in err or "/proc/meminfo" in err), err
    assert not any(f.endswith(".pt") for _, _, fs in os.walk(tmp_path) for f in fs)  # nothing trained


def _schur_estimate(tmp_path, argv):
    args = build_parser().parse_args(["schur", *argv, "--out", str(tmp_path)])
    settings = parse_settings(args)
    return memory.schur_bytes(settings, prepare_run(settings, str(tmp_path)))


def test_the_papers_runs_are_estimated_far_below_a_laptops_memory(tmp_path):
    for argv in (["--task", "all", "--recipe", "paper"], ["--task", "copy", "--seeds", "14"],
                 ["--family", "gru", "--task", "flipflop"], ["--family", "ssm", "--task", "copy"]):
        assert 0 < _schur_estimate(tmp_path, argv) < 2 ** 30, argv
    # the estimate grows with each size it counts
    base = _schur_estimate(tmp_path, ["--task", "copy", "--hidden", "64"])
    for more in (["--batch", "128"], ["--hidden", "128"], ["--copy-length", "64"], ["--n-eval", "100000"],
                 ["--seeds", "6"]):
        assert _schur_estimate(tmp_path, ["--task", "copy", "--hidden", "64", *more]) > base, more


def test_readout_sizes_beyond_available_memory_are_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(memory, "available", lambda: (1 << 20, "test"))
    argv = ["readout", "--shapes", "square,triangle", "--pe", "dyadic", "--seeds", "4", "--steps", "5",
            "--points", "64", "--hidden", "16", "--sweep", "36000", "--out", str(tmp_path / "r"), "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "symfast readout with these sizes needs at least" in err, err
    assert "more than the 1 MiB available (test)" in err and "--sweep" in err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())
    assert memory.readout_bytes(8, 1024, [64, 64], 64, 360) < 2 ** 28  # the default readout: far below


def test_available_memory_falls_back_to_proc_meminfo(monkeypatch):
    monkeypatch.setitem(sys.modules, "psutil", None)  # `import psutil` raises ImportError
    got = memory.available()
    if not os.path.exists("/proc/meminfo"):
        assert got is None
    else:
        assert got is not None and got[1] == "/proc/meminfo MemAvailable" and got[0] > 0
    monkeypatch.setattr(memory, "available", lambda: None)
    memory.refuse_above(1e30, "anything", "")  # memory unknown: nothing is refused
