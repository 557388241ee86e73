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
