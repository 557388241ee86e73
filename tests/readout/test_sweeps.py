import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

import symfast
from symfast.cli import main
from symfast.readout.sweeps import SweepSpec, SweepStore, load_results, load_spec, run_sweep

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
def clean(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean")
    spec = load_spec(spec_file(root))
    run_sweep(spec, str(root / "out"), quiet=True)
    return load_results(str(root / "out")).drop(columns=VOLATILE)


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
    store = run_sweep(load_spec(spec_file(tmp_path)), str(out), quiet=True)
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
        run_sweep(SweepSpec(shapes=["circle"], steps=[1], points=[8], seeds=1), str(tmp_path / "m"), quiet=True)
    with pytest.raises(ValueError, match="shard"):
        run_sweep(load_spec(spec), str(tmp_path / "c"), shard="2/2", quiet=True)


def test_ray_executor_local_cluster(tmp_path, clean):
    ray = pytest.importorskip("ray")  # optional (symfast[ray]): skipped when Ray is not installed
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_sweep(load_spec(spec_file(tmp_path)), str(tmp_path / "r"), executor="ray", quiet=True)
    finally:
        ray.shutdown()
    table = load_results(str(tmp_path / "r")).drop(columns=VOLATILE)
    # Ray tasks run with one torch thread: float results may differ in the last bits
    num = ["final_loss", "score"]
    pd.testing.assert_frame_equal(table.drop(columns=num + ["observed"]), clean.drop(columns=num + ["observed"]))
    pd.testing.assert_frame_equal(table[num], clean[num], rtol=1e-4, atol=1e-6)
