"""Population sweeps: a tiny population trained and read out end to end; the truth columns come from the
population's groups; a run killed with SIGKILL resumes to the identical table; two shards merge to it;
weights are dropped unless asked for; bad input is one line and exit 2; the rates and their intervals."""
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import torch

import symfast
from symfast.cli import main
from symfast.readout.sweeps.population import (PopulationSpec, PopulationStore, candidates, load_population,
                                               open_store, run_population)
from symfast.readout.sweeps.rates import (calibration, clustered_wilson, compare, markdown, mover, near_by_design,
                                          wilson)
from symfast.shapes import population as pop

TINY = ["--seeds", "3", "--pe", "triaxis", "--hidden", "8", "--steps", "15", "--points", "64", "--max-batch", "3",
        "--quiet"]
SPEC = PopulationSpec(seed=0, size=6, seeds=3, encodings=["triaxis"], hidden=[8], steps=15, points=64, max_batch=3)


@pytest.fixture(scope="module")
def clean_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("pop") / "out"
    run_population(SPEC, str(out))
    return out


@pytest.fixture(scope="module")
def clean(clean_dir):
    return load_population(str(clean_dir))


def test_table_holds_every_member_and_the_truth_of_each_element(clean, clean_dir):
    assert sorted(clean["index"].unique()) == list(range(6))
    assert len(SPEC.plan()) == 6 and all(b.size == 3 for b in SPEC.plan())
    for r in clean.itertuples():
        d = pop.draw(0, r.index)
        assert r.shape == d.name and r.kind == d.kind and r.n == d.n and r.epsilon == d.epsilon
        assert r.true_symmetry == (r.element in d.group.names)
        assert r.near == (r.element in d.base_group.names and not r.true_symmetry)
    assert not clean.duplicated(["shape", "encoding", "element"]).any()
    models = pd.read_csv(clean_dir / "models.csv")
    assert len(models) == 6 * 3 and models["final_loss"].notna().all()
    assert (clean_dir / "calibration.csv").exists()


def test_weights_are_dropped_unless_kept(tmp_path, clean_dir):
    store = PopulationStore.open(str(clean_dir))
    assert all("ensemble" not in store.read_batch(b.batch_id) for b in SPEC.plan())
    keep = PopulationSpec(**dict(SPEC.to_dict(), size=2, keep_weights=True))
    store = run_population(keep, str(tmp_path / "k"))
    payload = store.read_batch(keep.plan()[0].batch_id)
    assert payload["ensemble"]["weights"][0].shape[0] == 3


def test_killed_run_resumes_to_the_identical_table(tmp_path, clean):
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(symfast.__file__)))
    proc = subprocess.Popen([sys.executable, "-m", "symfast.cli", "population", "0:6", "--out", str(out), *TINY],
                            cwd=tmp_path, env=env)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((out / "batches").glob("*.pt"))) < 1:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list((out / "batches").glob("*.pt")))
    assert 1 <= done < 6, "the run should be killed mid-run"
    assert not (out / "results.csv").exists()
    assert main(["population", "0:6", "--out", str(out), *TINY]) == 0
    pd.testing.assert_frame_equal(load_population(str(out)), clean)


def test_two_shards_merge_to_the_same_table(tmp_path, clean):
    a, b, m = (str(tmp_path / k) for k in "abm")
    assert main(["population", "0:6", "--out", a, "--shard", "0/2", *TINY]) == 0
    assert main(["merge", a, "--out", m]) == 2  # incomplete
    assert main(["population", "0:6", "--out", b, "--shard", "1/2", *TINY]) == 0
    assert isinstance(open_store(a), PopulationStore)
    assert main(["merge", a, b, "--out", m]) == 0
    pd.testing.assert_frame_equal(load_population(m), clean)
    assert main(["report", m]) == 2  # a population's report is its calibration page
    with pytest.raises(ValueError, match="different sweep"):
        run_population(PopulationSpec(**dict(SPEC.to_dict(), seed=1)), m)


def test_heldout_population_columns(tmp_path, clean_dir, capsys):
    h = str(tmp_path / "h")
    assert main(["population", "1:4", "--out", h, *TINY]) == 0
    out = str(tmp_path / "main")
    assert main(["population", "0:6", "--out", out, "--heldout", h, *TINY]) == 0
    calib = pd.read_csv(os.path.join(out, "calibration.csv"), dtype={"n": str, "epsilon": str})
    assert {"heldout_rate", "heldout_ci_low", "agree"} <= set(calib.columns)
    page = open(os.path.join(out, "calibration.md")).read()
    assert "N = 6 shapes" in page and "population 1:4" in page
    assert os.path.getsize(os.path.join(out, "near_symmetry.png")) > 1000  # population 0:6 has near shapes
    capsys.readouterr()
    assert main(["population", "0:6", "--out", str(tmp_path / "x"), "--heldout", str(clean_dir), *TINY]) == 2
    assert "another seed" in capsys.readouterr().err


@pytest.mark.parametrize("args, words", [
    (["x:5"], "SEED:N"), (["0:0"], "size N"), (["0:5:1"], "SEED:N"), (["0:5", "--seeds", "2"], "seeds"),
    (["0:5", "--pe", ","], "--pe"), (["0:5", "--pe", "bogus"], "unknown encoding"),
    (["0:5", "--hidden", "0"], "--hidden"), (["0:5", "--observable", "prefix9"], "observable"),
    (["0:5", "--shard", "3/2"], "shard"), (["0:99999999999"], "size N"),
])
def test_bad_input_is_one_line_and_exit_2(args, words, tmp_path, capsys):
    rc = main(["population", *args, "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert words in err, err
    assert not (tmp_path / "o" / "batches").exists() or not list((tmp_path / "o" / "batches").iterdir())


def test_merge_of_a_corrupt_spec_is_one_line(tmp_path, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "spec.json").write_text('{"spec": [1, 2]}')
    assert main(["merge", str(tmp_path / "d"), "--out", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err
    assert "spec.json is corrupt" in err and err.strip().count("\n") == 0


def test_wilson_interval_known_values():
    lo, hi = wilson(0, 10)
    assert lo == 0 and hi == pytest.approx(0.27754, abs=1e-5)
    lo, hi = wilson(5, 10)
    assert lo == pytest.approx(0.23659, abs=1e-5) and hi == pytest.approx(0.76341, abs=1e-5)
    assert wilson(10, 10)[1] == 1.0
    with pytest.raises(ValueError):
        wilson(3, 0)


def test_clustered_wilson_closed_forms():
    from scipy.stats import t

    t9 = t.ppf(0.975, 9)  # ten shapes: Student's quantile on 9 degrees of freedom
    # independent single trials, and shapes whose trials are all decided alike: n_eff = shapes - 1 in both
    lo, hi, n_eff = clustered_wilson([1] * 3 + [0] * 7, [1] * 10)
    assert n_eff == pytest.approx(9) and (lo, hi) == pytest.approx(wilson(0.3 * 9, 9, t9))
    for k in (4, 7):
        lo, hi, n_eff = clustered_wilson([k] * 3 + [0] * 7, [k] * 10)
        assert n_eff == pytest.approx(9) and (lo, hi) == pytest.approx(wilson(0.3 * 9, 9, t9))
    # spread evenly over the shapes (every shape one error in four): no design effect beyond 1
    assert clustered_wilson([1] * 10, [4] * 10)[2] == 40
    lo, hi, n_eff = clustered_wilson([0] * 5, [3] * 5)  # no error: the variance is not estimable, shapes count
    assert n_eff == 5 and lo == 0 and hi == pytest.approx(wilson(0, 5, t.ppf(0.975, 4))[1])
    assert clustered_wilson([2], [2])[2] == 1
    for bad in (([1], [0]), ([3], [2]), ([-1], [2]), ([], []), ([1, 2], [3]), ([float("nan")], [2])):
        with pytest.raises(ValueError):
            clustered_wilson(*bad)


def test_clustered_intervals_cover_the_rate_where_element_intervals_do_not():
    import numpy as np

    rng = np.random.default_rng(0)
    shapes, size, rate, reps = 40, 6, 0.2, 1000
    cover = {"elements": 0, "shapes": 0}
    for _ in range(reps):
        # half the shapes decide all their elements at once, the rest each element alone: the rate stays 0.2
        together = rng.random(shapes) < 0.5
        errors = np.where(together, size * (rng.random(shapes) < rate), rng.binomial(size, rate, shapes))
        lo, hi = wilson(int(errors.sum()), shapes * size)
        cover["elements"] += lo <= rate <= hi
        lo, hi, _ = clustered_wilson(errors, [size] * shapes)
        cover["shapes"] += lo <= rate <= hi
    assert cover["elements"] / reps < 0.85 and cover["shapes"] / reps >= 0.93, cover  # nominal 0.95 (0.935 measured)


def test_mover_closed_forms():
    # one proportion: its own interval; two, weighted: the estimate and each side's root sum of squares
    assert mover([0.3], [0.1], [0.6], [1.0]) == pytest.approx((0.3, 0.1, 0.6))
    est, lo, hi = mover([1.0, 0.5], [0.9, 0.2], [1.0, 0.9], [0.5, 0.5])
    assert est == pytest.approx(0.75)
    assert lo == pytest.approx(0.75 - 0.5 * (0.1 ** 2 + 0.3 ** 2) ** 0.5)
    assert hi == pytest.approx(0.75 + 0.5 * 0.4)
    assert mover([0.0, 0.0], [0.0, 0.0], [0.9, 0.9], [0.5, 0.5])[1:] == (0.0, pytest.approx(0.5 * 0.9 * 2 ** 0.5))
    for bad in (([0.5], [0.1], [0.9], [0.9]), ([0.5], [0.6], [0.9], [1.0]), ([0.5, 0.5], [0.1], [0.9], [1.0]),
                ([0.5], [0.1], [1.1], [1.0]), ([float("nan")], [0.1], [0.9], [1.0]), ([], [], [], []),
                ([0.5, 0.5], [0.1, 0.1], [0.9, 0.9], [1.5, -0.5])):
        with pytest.raises(ValueError):
            mover(*bad)


def test_design_weighted_near_rate_covers_it_with_a_narrower_interval():
    import numpy as np

    rng = np.random.default_rng(1)
    # a step in epsilon as measured; each shape draws its size uniformly and carries 1-5 near-symmetries,
    # half the shapes deciding all of theirs at once
    rates, shapes, reps = np.array([0.995, 0.99, 0.98, 0.9, 0.05]), 300, 1000
    truth = rates.mean()  # the design-weighted rate: what near_by_design estimates
    cover, half = {"pooled": 0, "by_design": 0}, {"pooled": 0.0, "by_design": 0.0}
    for _ in range(reps):
        size, k = rng.integers(0, 5, shapes), rng.integers(1, 6, shapes)
        together = rng.random(shapes) < 0.5
        errors = np.where(together, k * (rng.random(shapes) < rates[size]), rng.binomial(k, rates[size]))
        lo, hi, _ = clustered_wilson(errors, k)
        cover["pooled"] += lo <= truth <= hi
        half["pooled"] += (hi - lo) / 2 / reps
        per = [(errors[size == h].sum() / k[size == h].sum(), *clustered_wilson(errors[size == h], k[size == h])[:2])
               for h in range(5)]
        est, lo, hi = mover(*zip(*per), [0.2] * 5)
        cover["by_design"] += lo <= truth <= hi
        half["by_design"] += (hi - lo) / 2 / reps
    assert cover["by_design"] / reps >= 0.93, cover  # nominal 0.95 (0.959 measured)
    assert half["by_design"] < 0.6 * half["pooled"], half  # the sampled mix of sizes no longer counted


def test_near_rate_by_design_from_the_per_size_rows():
    def table(observed_by_size):  # per size epsilon: shapes of one near-symmetry each, decided as given
        return pd.DataFrame([dict(encoding="triaxis", shape=f"{eps}-{i}", element="r90", element_kind="rotation",
                                  n=4, epsilon=eps, true_symmetry=False, near=True, observed=bool(obs))
                             for eps, obs_list in observed_by_size.items() for i, obs in enumerate(obs_list)])

    sizes = pop.EPSILONS
    main_rows = table({e: [1] * 10 if e < 0.05 else [0] * 9 + [1] for e in sizes})
    held_rows = table({e: [1] * 12 if e < 0.05 else [0] * 12 for e in sizes})
    both = compare(calibration(main_rows), calibration(held_rows))
    d = near_by_design(both)
    assert list(d.encoding) == ["all", "triaxis"]
    row = d[d.encoding == "triaxis"].iloc[0]
    per = both[(both.encoding == "triaxis") & (both.metric == "near_FPR") & (both.epsilon != "all")]
    assert (row.rate, row.ci_low, row.ci_high) == pytest.approx(
        mover(per.rate, per.ci_low_shapes, per.ci_high_shapes, [1 / len(sizes)] * len(sizes)))
    assert row.rate == pytest.approx((4 + 0.1) / 5) and row.trials == 50 and row.heldout_trials == 60
    assert row.agree == "yes"
    assert "weighted by the design's mix of sizes" in markdown(both, "t", "i")
    # a size missing from either population: not the design's mix, no row, no section
    partial = compare(calibration(main_rows), calibration(held_rows[held_rows.epsilon != 0.05]))
    assert near_by_design(partial).empty and "design's mix" not in markdown(partial, "t", "i")


def test_population_draws_each_near_symmetry_size_with_equal_probability():
    from scipy.stats import chisquare

    eps = [d.epsilon for d in (pop.draw(5, i) for i in range(4000)) if d.kind == "near"]
    counts = [eps.count(e) for e in pop.EPSILONS]
    assert len(eps) > 500 and sum(counts) == len(eps)
    assert chisquare(counts).pvalue > 1e-3, counts  # the weights near_by_design gives each size


def test_calibration_intervals_count_shapes_and_held_out_agreement_uses_them():
    def table(observed_by_shape):  # every shape: 4 mirrors that are not symmetries, decided as given
        return pd.DataFrame([dict(encoding="dyadic", shape=f"s{i}", element=f"m{45 * j}", element_kind="reflection",
                                  n=4, epsilon=0.0, true_symmetry=False, near=False, observed=bool(obs))
                             for i, obs in enumerate(observed_by_shape) for j in range(4)])

    main_rates, held_rates = calibration(table([1] * 3 + [0] * 17)), calibration(table([0] * 20))
    row = main_rates[(main_rates.encoding == "dyadic") & (main_rates.element_kind == "all")].iloc[0]
    assert (row.errors, row.trials, row.shapes) == (12, 80, 20)
    assert (row.ci_low_shapes, row.ci_high_shapes) == pytest.approx(clustered_wilson([4] * 3 + [0] * 17, [4] * 20)[:2])
    assert row.ci_low_shapes < row.ci_low  # wider than counting the 80 elements
    both = compare(main_rates, held_rates)
    mine = both[(both.encoding == "dyadic") & (both.element_kind == "all")].iloc[0]
    assert mine.ci_low > mine.heldout_ci_high  # the element intervals do not overlap ...
    assert mine.agree == "yes"  # ... the intervals counting shapes do
    assert "95% CI counting shapes" in markdown(both, "t", "i")


def test_calibration_counts_each_metric_on_its_own_elements():
    rows = [  # member a: D2 truth; b: near (base D2 broken to D1)
        dict(encoding="dyadic", element="r0", element_kind="rotation", n=2, epsilon=0.0, true_symmetry=True,
             near=False, observed=True),
        dict(encoding="dyadic", element="r180", element_kind="rotation", n=2, epsilon=0.0, true_symmetry=True,
             near=False, observed=False),
        dict(encoding="dyadic", element="r90", element_kind="rotation", n=2, epsilon=0.0, true_symmetry=False,
             near=False, observed=True),
        dict(encoding="dyadic", element="m45", element_kind="reflection", n=2, epsilon=0.0, true_symmetry=False,
             near=False, observed=False),
        dict(encoding="dyadic", element="r180", element_kind="rotation", n=2, epsilon=0.01, true_symmetry=False,
             near=True, observed=True),
    ]
    c = calibration(pd.DataFrame(rows))
    top = c[(c.encoding == "dyadic") & (c.element_kind == "all") & (c.n == "all") & (c.epsilon == "all")]
    got = {r.metric: (r.errors, r.trials) for r in top.itertuples()}
    assert got == {"FNR": (1, 1), "FPR": (1, 2), "near_FPR": (1, 1)}  # the identity is not counted
    mirror = c[(c.encoding == "dyadic") & (c.metric == "FPR") & (c.element_kind == "mirror")]
    assert mirror[["errors", "trials"]].values.tolist() == [[0, 1]]
    assert set(c.loc[c.metric == "near_FPR", "epsilon"]) == {"all", "0.01"}
    both = compare(c, c)
    assert (both["agree"] == "yes").all() and (both["heldout_rate"] == both["rate"]).all()


def test_rates_of_your_own_shapes_from_a_readout_table():
    import symfast as sf
    from symfast.readout.sweeps.rates import from_readout

    shapes = [sf.shapes.triangle(), sf.shapes.square()]
    ens = sf.fit_sdf(shapes, sf.TriAxisPE(), seeds=3, hidden=(8,), steps=5, points=32)
    with pytest.warns(UserWarning):  # below the calibrated budget, on purpose
        table = sf.readout(ens, sweep=0).table
    rows = from_readout(table, shapes)
    assert len(rows) == int(table["liftable"].sum()) and set(rows["n"]) == {3, 4}
    c = calibration(rows)
    top = c[(c.encoding == "all") & (c.element_kind == "all") & (c.n == "all")].set_index("metric")
    liftable = table[table["liftable"]]
    assert top.loc["FPR", "trials"] == int((~liftable["true_symmetry"].astype(bool)).sum())
    assert top.loc["FNR", "trials"] == int((liftable["true_symmetry"].astype(bool) & (liftable["element"] != "r0")).sum())


def test_ray_executor_gives_the_same_table(tmp_path, clean):
    ray = pytest.importorskip("ray")  # optional (symfast[ray]): skipped when Ray is not installed
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        run_population(SPEC, str(tmp_path / "r"), executor="ray")
    finally:
        ray.shutdown()
    table = load_population(str(tmp_path / "r"))
    # Ray tasks run with one torch thread: scores may differ in the last bits, decisions should not
    num = ["score", "p_adjusted"]
    pd.testing.assert_frame_equal(table.drop(columns=num + ["observed"]), clean.drop(columns=num + ["observed"]))
    pd.testing.assert_frame_equal(table[num], clean[num], rtol=1e-4, atol=1e-6)
    assert (table["observed"] == clean["observed"]).mean() >= 0.95  # a p-value at the threshold may flip


def test_fixed_budget_specs_keep_their_content_id():
    # a results folder written before `budget` and `families` existed must still open and resume
    old = PopulationSpec(seed=0, size=64, steps=100)
    assert "budget" not in old.to_dict() and "families" not in old.to_dict()
    assert old.fingerprint() == "d7698cc12d322a32"  # that folder's spec.json fingerprint
    assert PopulationSpec(seed=0, size=64, steps=100, budget="auto").fingerprint() != old.fingerprint()
    assert "tolerance" not in old.to_dict()
    assert PopulationSpec(seed=0, size=64, steps=100, tolerance=0.05).fingerprint() != old.fingerprint()
    for bad in (0, -0.1, float("inf"), True, "0.1"):
        with pytest.raises(ValueError, match="tolerance"):
            PopulationSpec(seed=0, size=64, tolerance=bad)


def test_families_keep_only_those_members_of_the_first_n():
    spec = PopulationSpec(**dict(SPEC.to_dict(), size=40, families=["near", "asymmetric"]))
    kept = [i for i in range(40) if pop.draw(0, i).kind in ("near", "asymmetric")]
    assert list(spec.members()) == kept and 0 < len(kept) < 40
    assert [m for b in spec.plan() for m in b.members] == kept
    assert spec.num_cells == len(kept) * SPEC.seeds
    for bad, words in ((["bogus"], "subset"), ([], "subset")):
        with pytest.raises(ValueError, match=words):
            PopulationSpec(**dict(SPEC.to_dict(), families=bad))
    with pytest.raises(ValueError, match="none of the first 2"):
        PopulationSpec(**dict(SPEC.to_dict(), size=2, families=["asymmetric"]))


@pytest.fixture(scope="module")
def auto_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("auto") / "out"
    assert main(["population", "0:4", "--out", str(out), "--budget", "auto", "--seeds", "4", "--pe", "triaxis",
                 "--hidden", "8", "--steps", "9", "--points", "64", "--max-batch", "8", "--quiet"]) == 0
    return out


def test_adaptive_budget_rows_record_the_budget_each_member_was_read_at(auto_dir):
    from symfast.readout.budget import adaptive_readout

    table = load_population(str(auto_dir))
    models = pd.read_csv(auto_dir / "models.csv")
    spec = open_store(str(auto_dir)).spec
    assert spec.budget == "auto" and spec.auto_start() == (4, 3)
    # the same members through the adaptive rule directly: the same decisions at the same budgets
    assert [b.members for b in spec.plan()] == [(0, 1), (2, 3)]  # 8 models per batch = 2 members x 4 seeds
    shapes = [pop.population_shape(0, i) for i in (0, 1)]
    with pytest.warns(UserWarning, match="budget below"):
        res = adaptive_readout(shapes, symfast.TriAxisPE(), start_seeds=4, start_steps=3, max_seeds=4, steps=9,
                               points=64, hidden=[8], lr=spec.lr, candidates=candidates('{"name": "triaxis"}'))
    last = res.history.groupby("shape").last()
    for r in table[table["index"] < 2].itertuples():
        assert (r.seeds_used, r.steps_used) == (last.at[r.shape, "seeds"], last.at[r.shape, "steps"])
        want = res.readout.table.set_index(["shape", "element"]).loc[(r.shape, r.element)]
        assert bool(want["observed"]) == r.observed and float(want["score"]) == pytest.approx(r.score, abs=0)
    for r in table.itertuples():  # the truth survives the rule's rounds (pooled ensembles keep their Shapes)
        d = pop.draw(0, r.index)
        assert r.true_symmetry == (r.element in d.group.names)
        assert r.near == (r.element in d.base_group.names and not r.true_symmetry)
    assert res.readout.table["true_symmetry"].notna().all()
    per_shape = table.groupby("shape")[["seeds_used", "steps_used"]].first()
    assert per_shape["seeds_used"].between(4, 4).all() and per_shape["steps_used"].isin([3, 6, 9]).all()
    assert len(models) == int(per_shape["seeds_used"].sum()) and models["final_loss"].notna().all()
    calib = pd.read_csv(auto_dir / "calibration.csv")
    assert {"mean_seeds", "mean_steps", "family"} <= set(calib.columns)
    page = (auto_dir / "calibration.md").read_text()
    assert "Adaptive budget: each shape from 4 seeds x 3 steps" in page and "mean seeds x steps" in page


def test_tolerance_rows_and_rates(tmp_path):
    out = tmp_path / "tol"
    # a tolerance no 4-seed budget reaches: the rule trains to its caps, and every observed element but the
    # identity (score exactly 0) is unresolved
    assert main(["population", "0:4", "--out", str(out), "--budget", "auto", "--seeds", "4", "--pe", "triaxis",
                 "--hidden", "8", "--steps", "9", "--points", "64", "--max-batch", "8", "--quiet",
                 "--tolerance", "1e-6"]) == 0
    table = load_population(str(out))
    assert table["resolution"].notna().all() and (table["steps_used"] == 9).all()
    observed = table[table["observed"] & (table["element"] != "r0")]
    assert len(observed) and not observed["resolved"].any() and table.loc[~table["observed"], "resolved"].all()
    calib = pd.read_csv(out / "calibration.csv")
    overall = calib[(calib.encoding == "all") & (calib.family == "all") & (calib.element_kind == "all")
                    & (calib.n == "all") & (calib.epsilon == "all")].set_index("metric")
    false = table[~table["true_symmetry"] & ~table["near"]]
    assert overall.at["FPR", "errors"] == 0  # an unresolved element is no claim of a symmetry
    assert overall.at["FPR", "unresolved"] == int(false["observed"].sum())
    assert "Tolerance 1e-06" in (out / "calibration.md").read_text()


def test_unresolved_rows_are_not_false_positives():
    rows = pd.DataFrame([
        dict(encoding="triaxis", kind="near", element="m0", element_kind="reflection", n=4, epsilon=0.01,
             true_symmetry=False, near=True, observed=True, resolved=False),
        dict(encoding="triaxis", kind="near", element="r90", element_kind="rotation", n=4, epsilon=0.01,
             true_symmetry=False, near=True, observed=True, resolved=True),
        dict(encoding="triaxis", kind="dihedral", element="r90", element_kind="rotation", n=4, epsilon=0.0,
             true_symmetry=True, near=False, observed=True, resolved=False)])
    c = calibration(rows)
    near = c[(c.encoding == "all") & (c.metric == "near_FPR") & (c.family == "all") & (c.element_kind == "all")
             & (c.n == "all") & (c.epsilon == "all")].iloc[0]
    assert (near.errors, near.trials, near.unresolved) == (1, 2, 1)
    fnr = c[(c.encoding == "all") & (c.metric == "FNR") & (c.family == "all") & (c.element_kind == "all")
            & (c.n == "all")].iloc[0]
    assert (fnr.errors, fnr.trials, fnr.unresolved) == (0, 1, 1)  # not found broken, not resolved either
    from symfast.readout.sweeps.rates import markdown

    assert "| unresolved |" in markdown(c, "t", "i")
    assert "unresolved" not in calibration(rows.drop(columns="resolved")).columns


def test_calibration_rates_per_family_and_the_mean_budget():
    rows = pd.DataFrame([
        dict(encoding="triaxis", kind="near", element="m0", element_kind="reflection", n=4, epsilon=0.01,
             true_symmetry=False, near=True, observed=True, seeds_used=32, steps_used=1500),
        dict(encoding="triaxis", kind="near", element="r90", element_kind="rotation", n=4, epsilon=0.01,
             true_symmetry=False, near=True, observed=False, seeds_used=8, steps_used=500),
        dict(encoding="triaxis", kind="dihedral", element="r90", element_kind="rotation", n=4, epsilon=0.0,
             true_symmetry=True, near=False, observed=True, seeds_used=8, steps_used=500)])
    c = calibration(rows)
    near = c[(c.encoding == "all") & (c.metric == "near_FPR") & (c.family == "near")].iloc[0]
    assert (near.errors, near.trials, near.mean_seeds, near.mean_steps) == (1, 2, 20.0, 1000.0)
    assert set(c.loc[c.metric == "FNR", "family"]) == {"all", "dihedral"}  # no trials: no row
    from symfast.readout.sweeps.rates import markdown, with_keys

    old = c[c.family == "all"].drop(columns=["family", "mean_seeds", "mean_steps"])  # a table from before
    assert (with_keys(old)["family"] == "all").all()
    assert "## Per shape family" in markdown(c, "t", "i") and "## Per shape family" not in markdown(old, "t", "i")


def test_concatenated_ensembles_of_different_lengths_keep_every_final_loss():
    import symfast as sf
    from symfast.readout.budget import concat

    shapes = [sf.shapes.polygon([[0.5, 0.0], [0.0, 0.4], [-0.5, 0.0], [0.0, -0.4]], name="kite")]  # not registered
    a = sf.fit_sdf(shapes, sf.TriAxisPE(), seeds=[0, 1], hidden=(8,), steps=4, points=32)
    b = sf.fit_sdf(shapes, sf.TriAxisPE(), seeds=[2], hidden=(8,), steps=7, points=32)
    both = concat([a, b])
    assert both.losses.shape == (7, 3) and both.config["steps"] is None
    assert all(t is shapes[0] for t in both.targets)  # the Shape (and its group) is kept, not just its name
    assert torch.equal(both.losses[-1], torch.cat([a.losses[-1], b.losses[-1]]))
    assert both.losses[:3, :2].isnan().all() and not both.losses[3:].isnan().any()


def test_calibration_page_counts_the_members_kept(auto_dir, tmp_path):
    from symfast.commands.population import write_calibration

    spec = open_store(str(auto_dir)).spec
    page = (auto_dir / "calibration.md").read_text()
    assert f"(N = {len(spec.members())} shapes x {spec.seeds} seeds x 1 encoding(s) = at most {spec.num_cells} " \
           "fields)" in page
    out = tmp_path / "near"
    assert main(["population", "0:12", "--out", str(out), "--families", "near"] + TINY) == 0
    near = open_store(str(out)).spec
    text = (out / "calibration.md").read_text()
    assert f"Population the near members of 0:12 (N = {len(near.members())} shapes" in text
    assert len(near.members()) < 12 and write_calibration(str(out)).endswith("calibration.md")


SOLIDS = PopulationSpec(seed=0, size=4, seeds=3, encodings=["dyadic3", "rff3"], hidden=[8], steps=10, points=64,
                        max_batch=6, dim=3)


def test_solid_population_end_to_end(tmp_path):
    """dim=3 trains the prisms under 3D encodings; every row's truth and near flag come from the solid's
    O(3) group; the candidates are the O_h (dyadic3) or {e, i} (rff3) elements the encoding lifts."""
    from symfast.shapes import population_solids as ps

    out = tmp_path / "solids"
    assert main(["population", "0:4", "--dim", "3", "--pe", "dyadic3,rff3", "--out", str(out),
                 *[a for a in TINY if a not in ("--pe", "triaxis")]]) == 0
    table = load_population(str(out))
    assert open_store(str(out)).spec.dim == 3 and set(table["encoding"]) == {"dyadic3", "rff3"}
    for r in table.itertuples():
        d = ps.draw_solid(0, r.index)
        assert r.shape == d.name == f"solid0-{r.index}" and r.group == d.group.name
        assert r.true_symmetry == (r.element in d.group.names)
        assert r.near == (r.element in d.base_group.names and not r.true_symmetry)
    per = table.groupby(["shape", "encoding"]).size()
    assert set(per.xs("dyadic3", level="encoding")) == {48}
    assert set(table.loc[table.encoding == "rff3", "element"]) == {"e", "i"}
    assert {"inversion", "rotoreflection", "reflection"} <= set(table["element_kind"])
    calib = pd.read_csv(out / "calibration.csv", dtype={"n": str, "epsilon": str})
    kinds = set(calib.loc[calib.encoding == "dyadic3", "element_kind"])
    assert {"rotation", "mirror", "inversion", "rotoreflection"} <= kinds
    fnr = calib[(calib.metric == "FNR") & (calib.encoding == "all") & (calib.family == "all")
                & (calib.element_kind == "all") & (calib.n == "all")]
    assert int(fnr["trials"].iloc[0]) == int((table["true_symmetry"] & (table["element"] != "e")).sum())
    assert "extruded into prisms" in (out / "calibration.md").read_text()


def test_dim_is_checked_against_the_encodings_and_kept_out_of_planar_content_ids():
    assert "dim" not in SPEC.to_dict() and SOLIDS.to_dict()["dim"] == 3
    assert PopulationSpec(**dict(SPEC.to_dict(), dim=2)).fingerprint() == SPEC.fingerprint()
    assert len(candidates('{"name": "ico6"}')) == 120 and len(candidates('{"name": "dyadic3"}')) == 48
    for spec, words in ((dict(SPEC.to_dict(), dim=3), "'triaxis' is not a 3D encoding"),
                        (dict(SOLIDS.to_dict(), dim=2), "'dyadic3' is not a 2D encoding"),
                        (dict(SPEC.to_dict(), dim=4), "dim must be 2"), (dict(SPEC.to_dict(), dim=2.0), "dim must be 2"),
                        (dict(SOLIDS.to_dict(), encodings=[{"name": "dyadic3", "K": 4}]), "takes no parameters")):
        with pytest.raises(ValueError, match=words):
            PopulationSpec(**spec)


def test_cli_dim_3_rejects_planar_encodings_and_planar_heldout(tmp_path, capsys, clean_dir):
    assert main(["population", "0:4", "--dim", "3", "--pe", "triaxis", "--out", str(tmp_path / "o"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "not a 3D encoding" in err and err.strip().count("\n") == 0
    assert main(["population", "1:6", "--dim", "3", "--seeds", "3", "--hidden", "8", "--steps", "15", "--points", "64",
                 "--max-batch", "3", "--out", str(tmp_path / "p"), "--heldout", str(clean_dir), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "trained with other settings" in err and "dim" in err, err


@pytest.mark.parametrize("dim, names", [(2, ["dyadic", "triaxis", "rff"]), (3, ["dyadic3", "cube4", "ico6", "rff3"])])
def test_no_member_group_implies_a_false_candidate(dim, names):
    """The rates count every observed false element as a false positive; that is fair only if no Gram
    observable is forced invariant under it by the member's true elements (`implied_by`), checked here
    exactly for every distinct (group ∩ candidates) among the first 300 members, under every encoding."""
    import json

    import numpy as np

    from symfast.readout.readout import implied_by
    from symfast.readout.sweeps.spec import make_encoding

    spec = PopulationSpec(**dict(SPEC.to_dict(), size=300, encodings=[names[0]], dim=dim))
    for name in names:
        pe, cands = make_encoding({"name": name}), candidates(json.dumps({"name": name}))
        rho = torch.stack([torch.as_tensor(pe.lift(g)) for g in cands])
        seen = set()
        for i in range(300):
            group = spec.draw(i).group
            true = np.array([g in group for g in cands])
            if true.tobytes() in seen:
                continue
            seen.add(true.tobytes())
            implied = implied_by(rho, true) & ~true
            assert not implied.any(), (name, group.name, [g.name for g, t in zip(cands, implied) if t])
        assert len(seen) >= 2
