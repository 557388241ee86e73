"""Fault injection: kill -9 and Ctrl-C (SIGINT) at random points of `symfast sweep` and `symfast readout`,
then resume and compare with an uninterrupted run.

Each round starts the command in a subprocess, waits a random time (drawn from a seeded
generator: SYMFAST_FAULT_SEED, default 0), sends the signal, and checks what the process
left: an interrupted command exits 130 with one line and no traceback; no finished batch
file is ever unreadable. After all rounds the command runs to completion and its table
must equal the clean run's (row for row, the training time excepted). Counts are printed
(pytest -s) and written to SYMFAST_FAULT_REPORT if set.
"""
from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from symfast.cli import main
from symfast.readout.sweeps import SweepStore, load_results, load_spec, run_sweep

SEED = int(os.environ.get("SYMFAST_FAULT_SEED", "0"))
ROUNDS = int(os.environ.get("SYMFAST_FAULT_ROUNDS", "4"))
TALLY = collections.Counter()

SPEC = """
shapes = ["triangle", "square"]
encodings = ["dyadic"]
hidden = [[16]]
steps = 30
points = 64
seeds = 6
max_batch = 2
"""
READOUT = ["readout", "--shapes", "square,triangle", "--pe", "dyadic", "--seeds", "4", "--steps", "300",
           "--points", "64", "--hidden", "16", "--sweep", "0"]


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    print(f"\nfaults (seed {SEED}): " + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items())))
    if os.environ.get("SYMFAST_FAULT_REPORT"):
        with open(os.environ["SYMFAST_FAULT_REPORT"], "w") as f:
            json.dump({"seed": SEED, **TALLY}, f, indent=1)


def _env():
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def interrupt(argv, cwd, sig, delay, ready=None):
    """Run `symfast ARGV`, send `sig` `delay` s after `ready()` (or the start) turns true; return (rc, stderr)."""
    p = subprocess.Popen([sys.executable, "-m", "symfast.cli", *argv], cwd=cwd, env=_env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    t_end = time.time() + 120
    while ready is not None and not ready() and p.poll() is None and time.time() < t_end:
        time.sleep(0.02)
    time.sleep(delay)
    if p.poll() is None:
        p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    TALLY["runs"] += 1
    TALLY["kill -9" if sig == signal.SIGKILL else "SIGINT"] += 1
    if p.returncode == 0:
        TALLY["finished before the signal"] += 1
    return p.returncode, err


def check_interrupted(rc, err, sig):
    """A SIGINT ends in exit 130 and one line; kill -9 in -9. Anything else is a crash."""
    if rc == 0:
        return
    if sig == signal.SIGINT and rc == -signal.SIGINT:
        # the signal landed while Python had no handler installed (interpreter start-up, or
        # finalisation after the command finished): the process dies of it, which is what any
        # Python program does there; the callers then check that nothing written was lost
        TALLY["SIGINT outside Python's handler (start-up or shutdown)"] += 1
        return
    if sig == signal.SIGINT:
        # warnings printed before the signal (e.g. the readout's small-budget warning and the source line
        # Python echoes under it) are not part of the interrupt; a traceback still fails below
        lines = [l for l in err.strip().splitlines()
                 if l.strip() and "Warning: " not in l and not l.startswith("  ")]
        ok = rc == 130 and "Traceback" not in err and len(lines) <= 1
        TALLY["clear exit" if ok else "crash"] += 1
        assert ok, f"SIGINT: exit {rc}, stderr:\n{err[-2000:]}"
    else:
        assert rc == -signal.SIGKILL, (rc, err[-2000:])


def test_sweep_survives_kill_and_ctrl_c(tmp_path):
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC)
    run_sweep(load_spec(spec), str(tmp_path / "clean"), quiet=True)
    clean = load_results(str(tmp_path / "clean")).drop(columns=["train_seconds"])
    out = tmp_path / "faulty"
    rng = random.Random(SEED)
    batches = out / "batches"
    for r in range(ROUNDS):
        sig = signal.SIGKILL if r % 2 == 0 else signal.SIGINT
        n0 = len(list(batches.glob("*.pt"))) if batches.exists() else 0
        # after the next batch file appears (so the run is training), wait a random fraction of a batch
        rc, err = interrupt(["sweep", str(spec), "--out", str(out), "--quiet"], tmp_path, sig, rng.uniform(0, 0.6),
                            ready=lambda: batches.exists() and len(list(batches.glob("*.pt"))) > n0)
        check_interrupted(rc, err, sig)
        store = SweepStore.open(str(out))
        assert not store.invalid(), f"a batch file was left half-written: {store.invalid()}"
    assert main(["sweep", str(spec), "--out", str(out), "--quiet"]) == 0
    resumed = load_results(str(out)).drop(columns=["train_seconds"])
    lost = len(set(clean["cell_id"]) - set(resumed["cell_id"]))
    TALLY["sweep rows lost"] += lost
    TALLY["sweep rows compared"] += len(clean)
    same = resumed.equals(clean)
    TALLY["sweep silent wrong"] += 0 if same else 1
    pd.testing.assert_frame_equal(resumed, clean)


def _readout_table(out):
    return pd.read_csv(out / "readout.csv")


@pytest.fixture(scope="module")
def readout_clean(tmp_path_factory):
    out = tmp_path_factory.mktemp("ro_clean")
    assert main([*READOUT, "--out", str(out), "--quiet"]) == 0
    return _readout_table(out)


def _interrupt_readout(tmp_path, sig, rounds, rng):
    out = tmp_path / "ro"
    ck = out / "checkpoint_dyadic.pt"
    for _ in range(rounds):
        # wait for a new periodic checkpoint (training under way), then a random part of a checkpoint period
        before = ck.stat().st_mtime_ns if ck.exists() else 0
        rc, err = interrupt([*READOUT, "--out", str(out), "--quiet"], tmp_path, sig, rng.uniform(0, 0.5),
                            ready=lambda: ck.exists() and ck.stat().st_mtime_ns != before)
        check_interrupted(rc, err, sig)
    assert main([*READOUT, "--out", str(out), "--quiet"]) == 0
    return _readout_table(out)


def test_readout_resumes_exactly_after_kill(tmp_path, readout_clean):
    resumed = _interrupt_readout(tmp_path, signal.SIGKILL, 2, random.Random(SEED + 1))
    TALLY["readout rows compared"] += len(readout_clean)
    TALLY["readout silent wrong (kill -9)"] += 0 if resumed.equals(readout_clean) else 1
    pd.testing.assert_frame_equal(resumed, readout_clean)


_AFTER_CTRL_C: dict = {}


def test_readout_ctrl_c_exits_cleanly_and_resumes(tmp_path, readout_clean):
    """Two Ctrl-C during training: each exits 130 with one line; the rerun completes with the same rows."""
    resumed = _interrupt_readout(tmp_path, signal.SIGINT, 2, random.Random(SEED + 2))
    assert resumed[["shape", "pe", "element"]].equals(readout_clean[["shape", "pe", "element"]])
    _AFTER_CTRL_C["table"] = resumed


def test_readout_resumes_exactly_after_ctrl_c(readout_clean):
    resumed = _AFTER_CTRL_C.get("table")
    assert resumed is not None, "the Ctrl-C run above did not complete"
    TALLY["readout rows compared"] += len(readout_clean)
    same = resumed.equals(readout_clean)
    TALLY["readout silent wrong (SIGINT)"] += 0 if same else 1
    pd.testing.assert_frame_equal(resumed, readout_clean)
