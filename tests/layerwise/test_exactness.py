"""The exactness sweep: layer error against end-to-end error along a penalty sweep, and its verdicts."""
import numpy as np
import pandas as pd
import pytest

from symfast.cli import main
from symfast.layerwise.data import ImageData, load_digits
from symfast.layerwise.exactness import COLUMNS, exactness_claims, exactness_sweep, summary_table
from symfast.layerwise.measurement import LAYER_COLUMNS
from symfast.layerwise.penalty_training import ExactnessSettings
from symfast.layerwise.protocol import EXACT_RATIO_BAR, SLOPE_BAR, fit_slope
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
