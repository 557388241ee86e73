import os
import shutil
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

import symfast
from symfast._io import HOST_TAG
from symfast.cli import main
from symfast.readout.sweeps import SweepSpec, SweepStore, load_results, load_spec, run_sweep
from symfast.readout.sweeps.store import BatchError

SPEC_TOML = """
[sweep]
shapes = ["triangle", "square"]
encodings = ["dyadic", {name = "multiaxis", num_axes = 3, K = 4}]
hidden = [[8], [8, 8]]
steps = 40
points = 64
seeds = 3
max_batch = 4
"""

VOLATILE = ["train_seconds"]


def spec_file(tmp_path):
    p = tmp_path / "spec.toml"
    p.write_text(SPEC_TOML)
    return p


@pytest.fixture(scope="module")
def clean_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean")
    spec = load_spec(spec_file(root))
    run_sweep(spec, str(root / "out"), progress=False)
    return root / "out"


@pytest.fixture(scope="module")
def clean(clean_dir):
    return load_results(str(clean_dir)).drop(columns=VOLATILE)


def copy_sweep(src, dst, drop_results=True):
    shutil.copytree(src, dst)
    if drop_results:
        for f in dst.glob("results.*"):
            f.unlink()
    return dst


class _Payload:
    """Unpickling this runs `touch <marker>`: the classic pickle code-execution payload."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_plan_covers_every_cell_once():
    spec = SweepSpec(shapes=["triangle", "square", "circle"], encodings=["dyadic", "rff"], hidden=[[8], [16]],
                     seeds=5, max_batch=6)
    cells = [(b.encoding["name"], b.hidden, s, seed) for b in spec.plan() for s in b.shapes for seed in b.seeds]
    assert len(cells) == len(set(cells)) == 3 * 2 * 2 * 5 == spec.num_cells
    assert all(b.size <= 6 for b in spec.plan())
    ids = [b.batch_id for b in spec.plan()]
    assert ids == [b.batch_id for b in SweepSpec(**spec.to_dict()).plan()]  # deterministic


def test_spec_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[sweep]\nshapes = ['blob']\n")
    with pytest.raises(ValueError, match="unknown shape"):
        load_spec(bad)
    bad.write_text("[sweep]\nwidth = 3\n")
    with pytest.raises(ValueError, match="unknown sweep keys"):
        load_spec(bad)
    with pytest.raises(ValueError, match="cannot read"):
        load_spec(tmp_path / "missing.toml")
    assert main(["sweep", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "o")]) == 2
    for shapes, encodings, words in ((["cube"], ["dyadic"], "encodes 2D points but the shapes are 3D"),
                                     (["circle"], ["dyadic3"], "encodes 3D points but the shapes are 2D"),
                                     (["circle", "cube"], ["dyadic"], "mixes 2D and 3D")):
        with pytest.raises(ValueError, match=words):
            SweepSpec(shapes=shapes, encodings=encodings)


def test_table_is_tidy(clean):
    assert clean["cell_id"].nunique() == 2 * 2 * 2 * 3
    assert len(clean) == clean["cell_id"].nunique() * 16  # one row per cell x element (D4 ∪ D6)
    assert not clean.duplicated(["cell_id", "observable", "element"]).any()
    assert {"shape", "encoding", "hidden", "seed", "final_loss", "score", "observed"} <= set(clean.columns)


def test_killed_sweep_resumes_without_loss_or_duplicates(tmp_path, clean):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(symfast.__file__)))
    proc = subprocess.Popen([sys.executable, "-m", "symfast.cli", "sweep", str(spec_file(tmp_path)), "--out",
                             str(out), "--quiet"], cwd=tmp_path, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((out / "batches").glob("*.pt"))) < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list((out / "batches").glob("*.pt")))
    assert 2 <= done < 8, "the sweep should be killed mid-run"
    assert not (out / "results.csv").exists()
    store = run_sweep(load_spec(spec_file(tmp_path)), str(out), progress=False)
    assert not store.missing()
    resumed = load_results(str(out)).drop(columns=VOLATILE)
    pd.testing.assert_frame_equal(resumed, clean)


def test_two_shards_merge_to_the_same_table(tmp_path, clean):
    spec = spec_file(tmp_path)
    assert main(["sweep", str(spec), "--out", str(tmp_path / "a"), "--shard", "0/2", "--quiet"]) == 0
    assert main(["merge", str(tmp_path / "a"), "--out", str(tmp_path / "m")]) == 2  # incomplete
    assert main(["sweep", str(spec), "--out", str(tmp_path / "b"), "--shard", "1/2", "--quiet"]) == 0
    a, b = SweepStore.open(str(tmp_path / "a")), SweepStore.open(str(tmp_path / "b"))
    assert a.done().isdisjoint(b.done()) and len(a.done() | b.done()) == len(a.spec.plan())
    assert main(["merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m")]) == 0
    pd.testing.assert_frame_equal(load_results(str(tmp_path / "m")).drop(columns=VOLATILE), clean)
    assert main(["report", str(tmp_path / "m")]) == 0
    assert list((tmp_path / "m").glob("heatmap_*.png"))
    with pytest.raises(ValueError, match="different sweep"):
        run_sweep(SweepSpec(shapes=["circle"], steps=[1], points=[8], seeds=1), str(tmp_path / "m"), progress=False)
    with pytest.raises(ValueError, match="shard"):
        run_sweep(load_spec(spec), str(tmp_path / "c"), shard="2/2", progress=False)


def test_ray_executor_local_cluster(tmp_path, clean):
    ray = pytest.importorskip("ray")  # optional (symfast[ray]): skipped when Ray is not installed
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_sweep(load_spec(spec_file(tmp_path)), str(tmp_path / "r"), executor="ray", progress=False)
    finally:
        ray.shutdown()
    table = load_results(str(tmp_path / "r")).drop(columns=VOLATILE)
    # Ray tasks run with one torch thread: float results may differ in the last bits
    num = ["final_loss", "score"]
    pd.testing.assert_frame_equal(table.drop(columns=num + ["observed"]), clean.drop(columns=num + ["observed"]))
    pd.testing.assert_frame_equal(table[num], clean[num], rtol=1e-4, atol=1e-6)


def test_pickle_payload_in_a_batch_never_runs(tmp_path, clean_dir, clean):
    """A tampered batch file holding a pickle payload is refused on resume, read and merge; nothing runs."""
    d = copy_sweep(clean_dir, tmp_path / "d")
    marker = tmp_path / "pwned"
    victim = sorted((d / "batches").glob("*.pt"))[0]
    torch.save({"batch": _Payload(marker), "cells": [], "scores": [], "ensemble": {}}, victim)
    store = SweepStore.open(str(d))
    assert victim.stem not in store.done()
    with pytest.raises(BatchError, match="unreadable"):
        store.read_batch(victim.stem)
    new, refused = SweepStore(str(tmp_path / "m"), store.spec).merge_from(store)
    assert victim.stem in refused and new == len(store.spec.plan()) - 1
    run_sweep(load_spec(spec_file(tmp_path)), str(d), progress=False)  # resume: retrains the batch
    assert not marker.exists()
    pd.testing.assert_frame_equal(load_results(str(d)).drop(columns=VOLATILE), clean)


def test_batch_copied_under_another_id_is_rejected(tmp_path, clean_dir):
    src = copy_sweep(clean_dir, tmp_path / "src")
    a, b = sorted((src / "batches").glob("*.pt"))[:2]
    shutil.copyfile(a, b)  # b's name, a's content
    store = SweepStore.open(str(src))
    assert b.stem not in store.done() and a.stem in store.done()
    assert "not the planned batch" in store.invalid()[b.stem]
    target = SweepStore(str(tmp_path / "m"), store.spec)
    new, refused = target.merge_from(store)
    assert b.stem in refused and b.stem not in target.done() and not (tmp_path / "m/batches" / b.name).exists()
    assert main(["merge", str(src), "--out", str(tmp_path / "m2")]) == 2  # incomplete, says so


def test_truncated_batch_is_retrained_on_resume(tmp_path, clean_dir, clean):
    d = copy_sweep(clean_dir, tmp_path / "d")
    victim = sorted((d / "batches").glob("*.pt"))[3]
    data = victim.read_bytes()
    victim.write_bytes(data[: len(data) // 2])
    assert victim.stem not in SweepStore.open(str(d)).done()
    run_sweep(load_spec(spec_file(tmp_path)), str(d), progress=False)
    assert list((d / "batches").glob(f"{victim.name}.invalid-*")), "the bad file is kept aside"
    pd.testing.assert_frame_equal(load_results(str(d)).drop(columns=VOLATILE), clean)


def test_merge_never_copies_a_corrupt_batch_and_a_good_merge_repairs(tmp_path, clean_dir, clean):
    bad = copy_sweep(clean_dir, tmp_path / "bad")
    victim = sorted((bad / "batches").glob("*.pt"))[2]
    victim.write_bytes(victim.read_bytes()[:100])
    assert main(["merge", str(bad), "--out", str(tmp_path / "m")]) == 2
    assert not (tmp_path / "m/batches" / victim.name).exists()
    # a corrupt file already in the target (e.g. from an older version) is replaced by a good merge
    shutil.copyfile(victim, tmp_path / "m/batches" / victim.name)
    assert main(["merge", str(bad), str(clean_dir), "--out", str(tmp_path / "m")]) == 0
    pd.testing.assert_frame_equal(load_results(str(tmp_path / "m")).drop(columns=VOLATILE), clean)


def test_merge_writes_are_fsynced(tmp_path, clean_dir, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    store = SweepStore.open(str(clean_dir))
    new, _ = SweepStore(str(tmp_path / "m"), store.spec).merge_from(store)
    assert new == len(store.spec.plan()) and len(synced) >= 2 * new  # each file and its directory


def test_only_stale_temp_files_are_cleaned(tmp_path):
    """A starting sweep removes temp files of dead writers only, never a live writer's in-flight file."""
    spec = SweepSpec(shapes=["circle"], encodings=["dyadic"], steps=[1], points=[8], seeds=1)
    batches = tmp_path / "s" / "batches"
    batches.mkdir(parents=True)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        (batches / f"a.pt.tmp-{HOST_TAG}-{live.pid}").write_bytes(b"in flight")
        (batches / f"b.pt.tmp-{HOST_TAG}-{dead.pid}").write_bytes(b"stale")
        (batches / "c.pt.tmp-otherhost-1").write_bytes(b"another machine")
        SweepStore(str(tmp_path / "s"), spec)
        assert sorted(p.name.split(".")[0] for p in batches.iterdir()) == ["a", "c"]
    finally:
        live.kill()
        live.wait()


def test_two_shards_in_one_directory_concurrently(tmp_path, clean):
    """`--shard 0/2` and `--shard 1/2` writing one --out at the same time give the clean table."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    spec, out = spec_file(tmp_path), tmp_path / "shared"
    procs = [subprocess.Popen([sys.executable, "-m", "symfast.cli", "sweep", str(spec), "--out", str(out),
                               "--shard", f"{i}/2", "--quiet"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in (0, 1)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    assert not list((out / "batches").glob("*.tmp-*"))
    if not (out / "results.csv").exists():  # both finished at once and each saw the other's batch in flight
        assert main(["merge", str(out), "--out", str(out)]) == 0
    pd.testing.assert_frame_equal(load_results(str(out)).drop(columns=VOLATILE), clean)


@pytest.mark.parametrize("body,message", [
    ('lr = "0.002"', "lr must be a number"),
    ("seeds = 2.5", "seeds must be a positive integer count"),
    ("seeds = true", "seeds must be a positive integer count"),
    ("steps = inf", "steps must be an integer"),
    ("steps = 2.7", "steps must be an integer"),
    ("hidden = [[8, 0]]", "hidden must be in 1.."),
    ("seeds = 100000000", "seeds must be in 1..1000000"),
    ("seeds = 50000\nshapes = ['circle', 'square', 'triangle']\nencodings = ['dyadic', 'rff', 'triaxis']\n"
     "hidden = [[8], [16], [32]]\nsteps = [1, 2, 3, 4]", "more than the 1e+06"),
    ('observables = ["gram", "nope"]', "unknown observable 'nope'"),
    ('observables = ["prefix5"]\nhidden = [[8]]', "unknown observable 'prefix5'"),
    ('activation = "swish"', "unknown activation"),
    ("encodings = [3]", "encoding must be a name"),
    ("", "the spec is empty"),
    ("shapes = [", "invalid TOML"),
])
def test_spec_values_are_type_checked(tmp_path, body, message):
    p = tmp_path / "s.toml"
    p.write_text(body.replace("\\n", "\n"))
    t = time.perf_counter()
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("+", r"\+")):
        load_spec(p)
    assert time.perf_counter() - t < 5  # size guards fire before planning


def test_spec_errors_fire_before_anything_trains(tmp_path, capsys):
    p = tmp_path / "s.yaml"
    p.write_text("shapes: [circle\n  - x: ]")
    assert main(["sweep", str(p), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "invalid YAML" in err and str(p) in err and err.count("\n") == 1
    p = tmp_path / "s.toml"
    p.write_text('shapes = ["circle"]\nencodings = ["dyadic"]\nsteps = 2\npoints = 8\nseeds = 1\n'
                 'observables = ["gram", "gram_bais"]\n')
    assert main(["sweep", str(p), "--out", str(tmp_path / "o")]) == 2
    assert "gram_bais" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_store_files_stay_within_their_bound(clean_dir):
    """The bound a store reads batch files under leaves room for every real batch file."""
    store = SweepStore.open(str(clean_dir))
    for b in store.spec.plan():
        assert os.path.getsize(store.batch_path(b.batch_id)) * 4 < store.bytes_bound(b.batch_id)


def test_store_refuses_oversized_linked_out_and_special_files_unread(tmp_path, clean_dir, monkeypatch):
    """A file over the plan's bound (sparse: nothing is allocated), a link out of the sweep directory to a
    valid batch, and a FIFO are refused without being read; the store reads no file its plan does not name."""
    src = copy_sweep(clean_dir, tmp_path / "src")
    store = SweepStore.open(str(src))
    big, out, fifo, *_ = [b.batch_id for b in store.spec.plan()]
    with open(store.batch_path(big), "r+b") as f:
        f.truncate(store.bytes_bound(big) + 1)
    elsewhere = tmp_path / "elsewhere.pt"
    os.replace(store.batch_path(out), elsewhere)
    os.symlink(elsewhere, store.batch_path(out))
    os.remove(store.batch_path(fifo))
    os.mkfifo(store.batch_path(fifo))
    (src / "batches" / "unplanned.pt").symlink_to("/dev/zero")
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda p, *a, **k: (opened.append(os.fspath(p)), real_open(p, *a, **k))[1])
    store = SweepStore.open(str(src))
    bad = store.invalid()
    assert f"more than the {store.bytes_bound(big)} bytes" in bad[big]
    assert "outside" in bad[out] and str(elsewhere) in bad[out]
    assert "not a regular file" in bad[fifo]
    assert "not a batch of this sweep" in bad["unplanned"]
    assert not any(p.endswith("unplanned.pt") for p in opened)
    new, refused = SweepStore(str(tmp_path / "m"), store.spec).merge_from(store)
    assert {big, out, fifo, "unplanned"} <= set(refused) and new == len(store.spec.plan()) - 3


def test_merge_of_a_link_to_dev_zero_is_one_line_in_bounded_memory(tmp_path, clean_dir):
    """`symfast merge` of a shard whose batch is a link to /dev/zero: exit 2, one line naming the file.
    Run with a 2 GiB data limit and a timeout, so that reading the link would fail this test, not the machine."""
    import resource

    src = copy_sweep(clean_dir, tmp_path / "src")
    victim = sorted((src / "batches").glob("*.pt"))[-1]
    victim.unlink()
    victim.symlink_to("/dev/zero")
    (src / "batches" / "0unplanned.pt").symlink_to("/dev/zero")  # listed first, never opened

    def limit():
        resource.setrlimit(resource.RLIMIT_DATA, (2 << 30, 2 << 30))

    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(symfast.__file__)))
    proc = subprocess.run([sys.executable, "-m", "symfast.cli", "merge", str(src), "--out", str(tmp_path / "m")],
                          capture_output=True, text=True, env=env, timeout=300, preexec_fn=limit)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert str(victim) in proc.stderr and "/dev/zero, outside" in proc.stderr, proc.stderr
    assert not (tmp_path / "m" / "batches" / victim.name).exists()
