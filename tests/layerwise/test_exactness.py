"""The exactness sweep: layer error against end-to-end error along a penalty sweep, and its verdicts."""
import numpy as np
import pandas as pd
import pytest
import torch

from symfast.cli import main
from symfast.layerwise.data import ImageData, flip_matrix, flip_permutation, load_digits
from symfast.layerwise.exactness import (COLUMNS, EXACT_RATIO_BAR, LAYER_COLUMNS, SLOPE_BAR, ExactnessSettings,
                                         covering_inputs, exactness_claims, exactness_sweep, fit_slope, measure,
                                         polish_net, summary_table, train_sweep)
from symfast.layerwise.planted import planted_mlp
from symfast.layerwise.projection import equivariance_error
from symfast.report.claim import VERDICTS


def _digits(n: int = 400) -> ImageData:
    d = load_digits()
    idx = np.random.default_rng(0).permutation(len(d.x))[:n]
    return ImageData(d.x[idx], d.y[idx], d.shape, d.name)


TINY = dict(sizes=(16, 8), steps=150, batch=64, bootstrap=200)


@pytest.fixture(scope="module")
def tiny_sweep():
    s = ExactnessSettings(lams=(1e-3, 1e-1, 1e1), seeds=1, heldout_seeds=3, seed_offset=1000, **TINY)
    return exactness_sweep(_digits(), ("tanh",), s)


# ---- the slope fit --------------------------------------------------------------------------------

def test_fit_slope_recovers_an_exact_power_law():
    e2e = np.repeat(np.logspace(-4, 0, 5)[None], 3, 0)
    layer = 2.5 * e2e ** 0.7 * np.array([[1.0], [1.5], [0.8]])  # per-seed prefactors: slope unchanged
    seeds = np.repeat(np.arange(3)[:, None], 5, 1)
    s, lo, hi = fit_slope(e2e.ravel(), layer.ravel(), seeds.ravel(), bootstrap=200)
    # pooled fit over seeds with equal e2e grids: the prefactors shift log(layer) per seed only
    assert s == pytest.approx(0.7, abs=1e-12)
    assert lo == pytest.approx(0.7, abs=1e-12) and hi == pytest.approx(0.7, abs=1e-12)


def test_fit_slope_interval_covers_a_noisy_slope_and_needs_two_seeds():
    rng = np.random.default_rng(1)
    e2e = np.tile(np.logspace(-3, 0, 6), 8)
    seeds = np.repeat(np.arange(8), 6)
    covered = 0
    for rep in range(20):  # a 95 % interval should cover the true slope in most of 20 noise draws
        layer = e2e ** 0.4 * np.exp(rng.normal(0, 0.05, e2e.size))
        s, lo, hi = fit_slope(e2e, layer, seeds, bootstrap=300, seed=rep)
        assert lo <= s <= hi and hi - lo < 0.1
        covered += lo < 0.4 < hi
    assert covered >= 15
    s1, lo1, hi1 = fit_slope(e2e[:6], layer[:6], seeds[:6])
    assert np.isfinite(s1) and np.isnan(lo1) and np.isnan(hi1)  # one seed: no interval


@pytest.mark.parametrize("bad, match", [
    ((np.array([1.0, -1.0]), np.array([1.0, 1.0]), np.array([0, 1])), "positive"),
    ((np.array([1.0, 0.1]), np.array([1.0, np.nan]), np.array([0, 1])), "finite"),
    ((np.array([1.0, 0.1, 0.3]), np.array([1.0, 0.5]), np.array([0, 1])), r"\[N\] each"),
], ids=["negative", "nan", "shapes"])
def test_fit_slope_bad_input_names_the_problem(bad, match):
    with pytest.raises(ValueError, match=match):
        fit_slope(*bad)


# ---- verdicts --------------------------------------------------------------------------------------

def _synthetic(split_slopes: dict, ratio_top: dict, seeds=(0, 1, 2), heldout=(1000, 1001, 1002)):
    """A table with layer1_error = e2e ** slope per split, and layer1_ratio at the largest lam."""
    rows = []
    lams = [1e-2, 1.0, 1e2, 1e4]
    for split, sds in (("fit", seeds), ("heldout", heldout)):
        for sd in sds:
            for k, lam in enumerate(lams):
                e2e = 10.0 ** (-k)  # three decades
                err = 0.9 * e2e ** split_slopes[split] * (1 + 0.01 * (sd % 7))
                ratio = ratio_top[split] if lam == lams[-1] else 0.8
                rows.append({"activation": "tanh", "lam": lam, "seed": sd, "split": split, "end_to_end": e2e,
                             "layer1_error": err, "layer1_ratio": ratio})
    return pd.DataFrame(rows)


def test_verdict_is_read_on_heldout_seeds_not_fit_seeds():
    good, bad = 1.0, 0.05
    t = _synthetic({"fit": good, "heldout": bad}, {"fit": 0.01, "heldout": 0.5})
    (c,) = exactness_claims(t)
    assert c.verdict == "missed" and "1000..1002" in c.measured
    t = _synthetic({"fit": bad, "heldout": good}, {"fit": 0.5, "heldout": 0.01})
    (c,) = exactness_claims(t)
    assert c.verdict == "held"
    # dropping the fit rows changes nothing
    assert exactness_claims(t[t["split"] == "heldout"])[0] == c


def test_verdict_bars_and_not_comparable_cases():
    assert 0 < SLOPE_BAR and 0 < EXACT_RATIO_BAR < 1
    # steep slope but the most exact point still far from zero error: missed on the ratio
    (c,) = exactness_claims(_synthetic({"fit": 1.0, "heldout": 1.0}, {"fit": 0.5, "heldout": 0.5}))
    assert c.verdict == "missed" and "ratio" in c.note and "slope" not in c.note.split(";")[0]
    (c,) = exactness_claims(_synthetic({"fit": 1.0, "heldout": 1.0}, {"fit": 0.01, "heldout": 0.01},
                                       heldout=(1000, 1001)))
    assert c.verdict == "not comparable" and "too few seeds" in c.reason
    t = _synthetic({"fit": 1.0, "heldout": 1.0}, {"fit": 0.01, "heldout": 0.01})
    t["end_to_end"] = 0.5 + 0.01 * t["lam"].rank()  # less than a decade: no slope to read
    t["layer1_error"] = t["end_to_end"]
    (c,) = exactness_claims(t)
    assert c.verdict == "not comparable" and "decades" in c.reason
    with pytest.raises(ValueError, match="lacks columns"):
        exactness_claims(t.drop(columns=["layer1_ratio"]))


def test_a_net_that_lost_its_task_gives_no_verdict():
    t = _synthetic({"fit": 1.0, "heldout": 1.0}, {"fit": 0.01, "heldout": 0.01})
    t["accuracy"] = 0.9
    assert exactness_claims(t)[0].verdict == "held"
    t.loc[t["lam"] == t["lam"].max(), "accuracy"] = 0.19  # accurate on the way, lost at the most exact point
    (c,) = exactness_claims(t)
    assert c.verdict == "not comparable" and "not trained" in c.reason and "0.19" in c.reason


# ---- settings, covering law, training ---------------------------------------------------------------

@pytest.mark.parametrize("kw, match", [
    (dict(seeds=5, seed_offset=3), "seed_offset"),
    (dict(lams=(1.0, 0.0)), "penalty weights"),
    (dict(covering="ball"), "covering"),
    (dict(steps=0), "steps"),
    (dict(lams=(1.0, 10.0), polish_lams=(5.0,)), "polish penalty weights"),
    (dict(polish_lams=(np.inf,)), "polish penalty weights"),
    (dict(polish_iters=0), "polish_iters"),
    (dict(polish_samples=0), "polish_samples"),
    (dict(polish_history=0), "polish_history"),
], ids=["overlap", "zero-lam", "covering", "steps", "polish-below", "polish-inf", "polish-iters", "polish-samples",
        "polish-history"])
def test_settings_refuse_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        ExactnessSettings(**kw)


@pytest.mark.parametrize("kind", ["uniform", "gaussian"])
def test_covering_law_is_flip_invariant(kind):
    d = _digits(300)
    perm = flip_permutation(d.shape)
    x = covering_inputs(d.x, perm, kind)(8000, torch.Generator().manual_seed(0)).numpy()
    assert x.shape == (8000, 64)
    # the flipped samples have the same per-pixel law: compare means and spreads pixel by pixel
    np.testing.assert_allclose(x.mean(0), x[:, perm].mean(0), atol=0.03)
    np.testing.assert_allclose(x.std(0), x[:, perm].std(0), atol=0.03)
    assert (x.std(0) > 0.1).all()  # every direction is exercised, also pixels (4, 0), (4, 7) the data never lights
    with pytest.raises(ValueError, match=r"\[N >= 2, 64\]"):
        covering_inputs(d.x[:, :10], perm, kind)


def test_stacked_training_equals_training_alone():
    train = _digits(200)
    s = ExactnessSettings(lams=(1e-2, 1.0), seeds=1, heldout_seeds=1, seed_offset=7, sizes=(8,), steps=20, batch=32)
    both = train_sweep(train, "tanh", s.lams, [0, 7], s)
    alone = train_sweep(train, "tanh", s.lams, [7], s)
    for lam in s.lams:
        for (W, b), (Wa, ba) in zip(both[(lam, 7)].layers, alone[(lam, 7)].layers):
            np.testing.assert_allclose(W, Wa, atol=1e-6)
            np.testing.assert_allclose(b, ba, atol=1e-6)


def test_measure_reads_an_exactly_invariant_network_as_exact():
    d = _digits(200)
    net, _ = planted_mlp([64, 12, 6, 10], flip_matrix(d.shape), activation="tanh", seed=3)
    row = measure(net, d, d.x)
    assert row["end_to_end"] < 1e-12 and row["end_to_end_data"] < 1e-12 and "end_to_end_law" not in row
    law = np.random.default_rng(0).uniform(0, 1, (50, 64))
    assert measure(net, d, d.x, law=law)["end_to_end_law"] < 1e-12
    with pytest.raises(ValueError, match="law must be"):
        measure(net, d, d.x, law=law[:, :10])
    # a net that is not invariant: the law error is the relative error on the law samples alone
    W1, b1 = net.layers[0]
    skew = net.with_layers([(W1 + 0.3 * np.random.default_rng(1).standard_normal(W1.shape), b1), *net.layers[1:]])
    row_skew = measure(skew, d, d.x, law=law)
    assert row_skew["end_to_end_law"] > 1e-3
    assert row_skew["end_to_end_law"] == pytest.approx(equivariance_error(skew, law, flip_matrix(d.shape)))
    assert row_skew["end_to_end_law"] != pytest.approx(row_skew["end_to_end"])
    assert row_skew["layer1_data_error"] > 1e-3  # the skewed layer 1 is no longer equivariant on data
    for name in ("layer1", "layer2", "output"):
        assert row[f"{name}_error"] < 1e-10 and row[f"{name}_random"] > 0.3
    assert row["layer1_data_error"] < 1e-10 and row["layer2_data_error"] < 1e-10 and "output_data_error" not in row
    # projecting an exactly equivariant net onto its recovered actions changes nothing
    assert row["accuracy_projected"] == row["accuracy"] and 0 <= row["accuracy_random_projection"] <= 1
    assert 0 <= row["layer1_near_linear"] <= 1
    # a duplicated layer-1 unit (outgoing weight split in two) keeps the function and is counted
    (W1, b1), (W2, b2) = net.layers[:2]
    W2d = np.concatenate([W2, 0.5 * W2[:, :1]], 1)
    W2d[:, 0] *= 0.5
    dup = net.with_layers([(np.concatenate([W1, W1[:1]]), np.append(b1, b1[0])), (W2d, b2), *net.layers[2:]])
    row2 = measure(dup, d, d.x)
    assert row2["end_to_end"] < 1e-12 and np.abs(dup(d.x) - net(d.x)).max() < 1e-12
    assert row2["duplicate_units"] == row["duplicate_units"] + 1 and row2["dead_units"] == row["dead_units"]


# ---- the sweep itself (reduced) ---------------------------------------------------------------------

def test_end_to_end_error_falls_with_the_penalty_weight(tiny_sweep):
    t = tiny_sweep.table
    for sd, g in t.groupby("seed"):
        e = g.sort_values("lam")["end_to_end"].to_numpy()
        assert (np.diff(e) < 0).all(), (sd, e)
        assert e[0] / e[-1] > 10  # more than a decade across the reduced sweep


def test_sweep_table_and_verdict(tiny_sweep):
    t = tiny_sweep.table
    layer_cols = [f"{n}_{c}" for n in ("layer1", "layer2", "output") for c in LAYER_COLUMNS]
    assert list(t.columns[:len(COLUMNS)]) == COLUMNS
    assert set(layer_cols + ["layer1_near_linear", "dead_units", "duplicate_units", "layer1_data_error",
                             "layer2_data_error", "accuracy_projected", "accuracy_random_projection"]) <= set(t.columns)
    assert ((t["layer1_data_error"] > 0) & t[["accuracy_projected", "accuracy_random_projection"]].apply(
        lambda c: c.between(0, 1)).all(axis=1)).all()
    assert len(t) == 3 * 4 and set(t["split"]) == {"fit", "heldout"}
    assert set(t.loc[t["split"] == "heldout", "seed"]) == {1000, 1001, 1002}
    assert (t["layer1_error"] > 0).all() and (t["layer1_random"] > t["layer1_error"] * 0.5).all()
    np.testing.assert_allclose(t["layer1_ratio"], t["layer1_error"] / t["layer1_random"])
    # one verdict per end-to-end measure: on the covering inputs, and on the covering law alone
    c, c_law = tiny_sweep.claims
    assert c.verdict in VERDICTS and c.study == "layerwise" and c_law.verdict in VERDICTS
    assert "covering law" not in c.claim and "covering law" in c_law.claim
    assert [c, c_law] == exactness_claims(t[t["split"] == "heldout"], tiny_sweep.settings.bootstrap)
    # the law row is the same test read against the law column: dropping that column drops the row
    assert exactness_claims(t[t["split"] == "heldout"].drop(columns="end_to_end_law"),
                            tiny_sweep.settings.bootstrap) == [c]
    summ = summary_table(t)
    assert len(summ) == 3 and (summ["seeds"] == 1).all()  # medians over the fit seeds only
    assert list(tiny_sweep.fits["against"]) == ["end_to_end", "end_to_end_law"]
    for _, f in tiny_sweep.fits.iterrows():
        assert np.isfinite(f["slope_fit"]) and f["slope_heldout_lo"] <= f["slope_heldout"] <= f["slope_heldout_hi"]
    h = t[t["split"] == "fit"]
    law_fit = tiny_sweep.fits.iloc[1]
    assert law_fit["slope_fit"] == pytest.approx(fit_slope(h["end_to_end_law"], h["layer1_error"], h["seed"], 1)[0])


def test_polish_stage_closes_the_end_to_end_error_further():
    """The L-BFGS polish continues the path: at larger lam the end-to-end error falls well below the
    Adam path's last point, the default (no polish) trains exactly the Adam-only sweep, and the
    polish's memory reaches the optimiser."""
    d = _digits(300)
    train, test = d.split(0.25, seed=0)
    draw = covering_inputs(train.x, flip_permutation(d.shape), "uniform")
    cover = np.concatenate([test.x, draw(len(test.x), torch.Generator().manual_seed(5)).numpy()])
    base = dict(lams=(1e-2, 1.0), seeds=1, heldout_seeds=1, seed_offset=7, sizes=(12, 8), steps=150, batch=64)
    plain = train_sweep(train, "tanh", base["lams"], [0], ExactnessSettings(**base))
    s = ExactnessSettings(**base, polish_lams=(1e2, 1e4), polish_iters=150, polish_samples=512)
    nets = train_sweep(train, "tanh", s.lams, [0], s)
    assert set(nets) == {(lam, 0) for lam in (1e-2, 1.0, 1e2, 1e4)}
    for lam in base["lams"]:  # the Adam path is untouched by the polish
        for (W, b), (Wp, bp) in zip(plain[(lam, 0)].layers, nets[(lam, 0)].layers):
            np.testing.assert_array_equal(W, Wp)
            np.testing.assert_array_equal(b, bp)
    e = [measure(nets[(lam, 0)], test, cover)["end_to_end"] for lam in (1.0, 1e2, 1e4)]
    assert e[1] < e[0] and e[2] < e[1] / 3 and e[2] < e[0] / 30, e
    assert (nets[(1e4, 0)](test.x).argmax(1) == test.y).mean() > 0.5  # still a classifier
    # a longer L-BFGS memory closes the penalised residual faster per iteration (why it is a setting):
    # 100 curvature pairs against 3, the same 60 iterations from the same net
    fixed = np.concatenate([train.x, draw(512, torch.Generator().manual_seed(0)).numpy()])
    short, long = (equivariance_error(polish_net(plain[(1.0, 0)], train, fixed, 1e4, 60, h), fixed,
                                      flip_matrix(d.shape)) for h in (3, 100))
    assert long < short / 2, (short, long)


def test_polish_net_refuses_bad_input():
    d = _digits(100)
    net = train_sweep(d, "tanh", (1.0,), [0], ExactnessSettings(lams=(1.0,), seeds=1, heldout_seeds=1,
                                                                  seed_offset=7, sizes=(4,), steps=2))[(1.0, 0)]
    with pytest.raises(ValueError, match="lam > 0"):
        polish_net(net, d, d.x, 0.0)
    with pytest.raises(ValueError, match=r"\[N, 64\]"):
        polish_net(net, d, d.x[:, :10], 1.0)
    with pytest.raises(ValueError, match="history >= 1"):
        polish_net(net, d, d.x, 1.0, history=0)


def test_cli_exactness_bad_input(tmp_path, capsys):
    assert main(["layerwise", "--exactness", "--activations", "tanh,bogus", "--out", str(tmp_path)]) == 2
    assert "bogus" in capsys.readouterr().err
    assert main(["layerwise", "--exactness", "--quick", "--polish", "1e2", "--out", str(tmp_path)]) == 2
    assert "max(lams)" in capsys.readouterr().err  # the quick sweep ends at 1e3
    assert main(["layerwise", "--exactness", "--polish", "x", "--out", str(tmp_path)]) == 2
    assert "--polish" in capsys.readouterr().err
    assert main(["layerwise", "--suite", "--polish", "1e5", "--out", str(tmp_path)]) == 2
    assert "--polish is for --exactness" in capsys.readouterr().err
    assert main(["layerwise", "--exactness", "--suite", "--out", str(tmp_path)]) == 2
    assert "pick one" in capsys.readouterr().err
    assert main(["layerwise", "--exactness", "--quick", "--seed-offset", "1", "--out", str(tmp_path)]) == 2
    assert "seed_offset" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_exactness_writes_tables_figure_and_claims(tmp_path, capsys):
    out = tmp_path / "exact"
    assert main(["layerwise", "--exactness", "--quick", "--activations", "relu", "--limit", "200",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Verdicts (held-out seeds" in text and "slope" in text
    for name in ("exactness.md", "exactness.csv", "exactness_summary.csv", "exactness_fits.csv", "claims.csv",
                 "exactness.png"):
        assert (out / name).stat().st_size > 0
    t = pd.read_csv(out / "exactness.csv")
    assert list(t.columns[:len(COLUMNS)]) == COLUMNS and set(t["activation"]) == {"relu"}
    assert set(t.loc[t["split"] == "heldout", "seed"]) == {1000, 1001, 1002}
    claims = pd.read_csv(out / "claims.csv", keep_default_na=False)
    # one row per end-to-end measure; --quick rows are not evidence
    assert len(claims) == 2 and (claims["verdict"] == "not comparable").all()
    assert (claims["reason"] == "not converged").all()
    with open(out / "exactness.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
