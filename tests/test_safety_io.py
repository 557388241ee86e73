"""Crash-safe writes: a Ctrl-C or a full disk inside torch.save ends as the interrupt or a one-line
disk error naming the file, and the previous file stays intact."""
from __future__ import annotations

import errno
import io
import os
import signal

import pandas as pd
import pytest
import torch

import symfast._io as sio
from symfast._io import atomic_path, atomic_save


class _FailingFile(io.FileIO):
    """A real file whose write fails (or sends Ctrl-C to this process) after `limit` bytes."""

    def __init__(self, name, mode, action, limit=600):
        super().__init__(name, mode.replace("b", ""))
        self.action, self.limit, self.n = action, limit, 0

    def write(self, b):
        self.n += len(b)
        if self.n > self.limit:
            if self.action == "sigint":
                os.kill(os.getpid(), signal.SIGINT)
                self.action = "done"
            elif self.action == "enospc":
                raise OSError(errno.ENOSPC, "No space left on device")
            elif self.action == "interrupt":
                raise KeyboardInterrupt
        return super().write(b)


def _patch_open(monkeypatch, action):
    real = open

    def fake(name, mode="r", *a, **kw):
        if "w" in mode and ".tmp-" in os.fspath(name):
            return _FailingFile(name, mode, action)
        return real(name, mode, *a, **kw)

    monkeypatch.setattr(sio, "open", fake, raising=False)


BIG = {"w": torch.arange(50_000, dtype=torch.float32)}


@pytest.mark.parametrize("action", ["enospc", "interrupt"])
def test_failed_torch_save_is_an_os_error_or_the_interrupt_and_keeps_the_old_file(tmp_path, monkeypatch, action):
    path = tmp_path / "checkpoint.pt"
    atomic_save({"old": torch.ones(3)}, path)
    _patch_open(monkeypatch, action)
    expected = OSError if action == "enospc" else KeyboardInterrupt
    with pytest.raises(expected) as info:
        atomic_save(BIG, path)
    if action == "enospc":
        assert info.value.errno == errno.ENOSPC and info.value.filename == str(path)
    assert torch.equal(torch.load(path, weights_only=True)["old"], torch.ones(3))
    assert os.listdir(tmp_path) == ["checkpoint.pt"]


def test_ctrl_c_during_torch_save_is_held_until_the_file_is_complete(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    _patch_open(monkeypatch, "sigint")
    with pytest.raises(KeyboardInterrupt):
        atomic_save(BIG, path)
    assert torch.equal(torch.load(path, weights_only=True)["w"], BIG["w"])  # complete, not a RuntimeError
    assert os.listdir(tmp_path) == ["checkpoint.pt"]


def test_full_disk_while_fit_sdf_checkpoints_ends_in_one_line(tmp_path, monkeypatch, capsys):
    from symfast.cli import main

    _patch_open(monkeypatch, "enospc")
    out = tmp_path / "out"
    rc = main(["readout", "--shapes", "square", "--pe", "dyadic", "--seeds", "3", "--steps", "4", "--points", "16",
               "--hidden", "8", "--sweep", "0", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "checkpoint_dyadic.pt" in err and "No space left" in err


def test_ctrl_c_while_fit_sdf_checkpoints_exits_130(tmp_path, monkeypatch, capsys):
    from symfast.cli import main

    _patch_open(monkeypatch, "sigint")
    rc = main(["readout", "--shapes", "square", "--pe", "dyadic", "--seeds", "3", "--steps", "4", "--points", "16",
               "--hidden", "8", "--sweep", "0", "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 130 and "Traceback" not in err, err
    assert torch.load(tmp_path / "out" / "checkpoint_dyadic.pt", weights_only=True)["step"] == 4


def test_atomic_path_leaves_no_empty_csv_on_a_full_disk(tmp_path, monkeypatch):
    path = tmp_path / "table.csv"
    pd.DataFrame({"a": [1]}).to_csv(path, index=False)

    def full(self, *a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError) as info, atomic_path(path) as tmp:
        open(tmp, "w").close()  # the 0-byte file a failing writer leaves behind
        monkeypatch.setattr(pd.DataFrame, "to_csv", full)
        pd.DataFrame({"a": [2]}).to_csv(tmp)
    assert info.value.filename == str(path)
    assert pd.read_csv(path)["a"].tolist() == [1] and os.listdir(tmp_path) == ["table.csv"]


@pytest.mark.parametrize("argv", [
    ["--task", "flipflop", "--construction", "cayley", "--hidden", "8"],  # tanh: fails on the damaged checkpoint
    ["--family", "ssm", "--task", "flipflop", "--hidden", "7"],  # family: fails on the odd width, after the cleanup
], ids=["tanh", "family"])
def test_schur_removes_checkpoint_temp_files_of_killed_runs(tmp_path, capsys, argv):
    """A kill -9 inside a checkpoint write leaves `.<name>.tmp-<host>-<pid>.pt` in OUT/ckpt; the next run
    removes those of dead local processes and keeps a live writer's and another host's."""
    import subprocess
    import sys

    from symfast.cli import main

    ckpt = tmp_path / "out" / "ckpt"
    ckpt.mkdir(parents=True)
    (ckpt / "flipflop_cayley_H8_s0.pt").write_bytes(b"PK\x03\x04 not a zip")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        stale = [ckpt / f".ssm_flipflop_diagonal_H8_s0.tmp-{sio.HOST_TAG}-{dead.pid}.pt",
                 ckpt / f".flipflop_cayley_H8_s0.tmp-{dead.pid}.pt"]  # the name before host tags
        kept = [ckpt / f".flipflop_cayley_H8_s1.tmp-{sio.HOST_TAG}-{live.pid}.pt",
                ckpt / ".flipflop_cayley_H8_s2.tmp-otherhost-1.pt"]
        for p in stale + kept:
            p.write_bytes(b"partial")
        rc = main(["schur", *argv, "--seeds", "1", "--epochs", "1", "--out", str(tmp_path / "out"), "--quiet"])
        assert rc == 2, capsys.readouterr().err
        assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)
    finally:
        live.kill()
        live.wait()


def test_atomic_writes_name_their_temp_files_by_host_and_pid(tmp_path):
    tmp = sio._tmp_for(str(tmp_path / "a.pt"))
    assert os.path.basename(tmp) == f".a.tmp-{sio.HOST_TAG}-{os.getpid()}.pt"
    assert not sio.is_stale_temp(os.path.basename(tmp))  # this process is alive
