"""The identifiability sweep: layer error / random against the near-linear fraction over a regime grid."""
import numpy as np
import pandas as pd
import pytest

from symfast.cli import main
from symfast.layerwise.data import ImageData, load_digits
from symfast.layerwise.identifiability import (EFFECT_MARGIN, LINEAR_ABOVE, RATIO_COLUMN, SATURATED_BELOW,
                                               IdentifiabilitySettings, effect_test, format_identifiability,
                                               identifiability_claims, identifiability_sweep, plot_identifiability,
                                               regime_summary, scaled)
from symfast.layerwise.protocol import TRAINED_ACCURACY
from symfast.report.claim import VERDICTS


def _digits(n: int = 300) -> ImageData:
    d = load_digits()
    idx = np.random.default_rng(0).permutation(len(d.x))[:n]
    return ImageData(d.x[idx], d.y[idx], d.shape, d.name)


# ---- the rule ---------------------------------------------------------------------------------------

def test_effect_rule_held_missed_and_too_wide():
    rng = np.random.default_rng(0)
    assert 0 < SATURATED_BELOW < LINEAR_ABOVE < 1 and EFFECT_MARGIN > 0
    lin = 0.8 + 0.01 * rng.normal(size=8)
    e = effect_test(lin - 0.3, lin[::-1], bootstrap=300)
    assert e["verdict"] == "held" and e["diff_lo"] > EFFECT_MARGIN and e["ident_hi"] < e["linear_lo"]
    assert e["diff"] == pytest.approx(0.3, abs=0.02)
    # lower, but by less than the margin, and surely so: missed
    assert effect_test(lin - 0.5 * EFFECT_MARGIN, lin[::-1], bootstrap=300)["verdict"] == "missed"
    # no effect at all, or the other way round: missed
    assert effect_test(lin + 0.2, lin, bootstrap=300)["verdict"] == "missed"
    # three scattered nets per group: the difference's interval straddles the margin
    wide = effect_test(np.array([0.2, 0.9, 0.5]), np.array([0.3, 1.0, 0.8]), bootstrap=300)
    assert wide["verdict"] == "interval too wide" and wide["diff_lo"] < EFFECT_MARGIN < wide["diff_hi"]
    with pytest.raises(ValueError, match="finite"):
        effect_test([0.1, np.nan], [0.5])
    with pytest.raises(ValueError, match=">= 1 ratio"):
        effect_test([], [0.5])


def _table(ident_ratio: float, linear_ratio: float, heldout=(3, 4, 5), fit=(0, 1, 2), act="tanh", acc=0.9):
    """Two regimes per seed: one saturated (near-linear 0.05), one linear (0.95), plus one in between."""
    rows = []
    for split, sds in (("fit", fit), ("heldout", heldout)):
        for sd in sds:
            for scale, nl, r in ((10.0, 0.05, ident_ratio), (0.1, 0.95, linear_ratio), (1.0, 0.5, 0.0)):
                rows.append({"activation": act, "scale": scale, "weight_decay": 0.0, "seed": sd, "split": split,
                             "accuracy": acc, "layer1_near_linear": nl,
                             RATIO_COLUMN: r * (1 + 0.01 * sd) if r else 0.0})
    return pd.DataFrame(rows)


def test_verdict_reads_heldout_trained_nets_in_the_two_groups_only():
    t = _table(0.2, 0.8)
    (c,) = identifiability_claims(t, bootstrap=300)
    assert c.verdict == "held" and "3..5" in c.measured and "3 identifiable and 3 near-linear" in c.measured
    # the in-between nets (ratio 0) enter no group: the identifiable mean is not pulled down
    assert "ratio 0.2" in c.measured
    # fit seeds saying the opposite change nothing
    flip = _table(0.8, 0.2)
    t2 = pd.concat([flip[flip["split"] == "fit"], t[t["split"] == "heldout"]])
    assert identifiability_claims(t2, bootstrap=300)[0] == c
    (m,) = identifiability_claims(_table(0.8, 0.8), bootstrap=300)
    assert m.verdict == "missed"


def test_untrained_or_missing_groups_give_no_verdict():
    t = _table(0.2, 0.8)
    t.loc[(t["split"] == "heldout") & (t["scale"] == 10.0), "accuracy"] = TRAINED_ACCURACY - 0.3
    (c,) = identifiability_claims(t, bootstrap=300)
    assert c.verdict == "not comparable" and "too few seeds" in c.reason and "0 identifiable" in c.measured
    (c,) = identifiability_claims(_table(0.2, 0.8, acc=0.1), bootstrap=300)
    assert c.verdict == "not comparable" and "not trained" in c.reason
    (c,) = identifiability_claims(_table(0.2, 0.8, heldout=(3, 4)), bootstrap=300)
    assert c.verdict == "not comparable" and "too few seeds" in c.reason
    (c,) = identifiability_claims(_table(0.2, 0.8, act="relu"), bootstrap=300)
    assert c.verdict == "held" and "conjectural" in c.claim and "does not contradict" in c.note
    with pytest.raises(ValueError, match="lacks columns"):
        identifiability_claims(t.drop(columns=[RATIO_COLUMN]))


# ---- settings ---------------------------------------------------------------------

@pytest.mark.parametrize("kw, match", [
    (dict(scales=(1.0, 0.0)), "scales"),
    (dict(scales=()), "scales"),
    (dict(weight_decays=(-0.1,)), "weight decays"),
    (dict(seeds=3, seed_offset=2), "seed_offset"),
    (dict(steps=0), "steps"),
], ids=["zero-scale", "no-scale", "negative-decay", "overlap", "steps"])
def test_settings_refuse_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        IdentifiabilitySettings(**kw)


def test_scaled_multiplies_the_images_only():
    d = _digits(20)
    s = scaled(d, 4.0)
    np.testing.assert_allclose(s.x, 4 * d.x, rtol=1e-6)
    assert s.x.dtype == np.float32 and (s.y == d.y).all() and s.shape == d.shape
    with pytest.raises(ValueError, match="input scale"):
        scaled(d, 0.0)


# ---- the sweep itself (reduced) ---------------------------------------------------------------------------

def test_tiny_sweep_spans_the_regimes_and_writes_its_table_and_figure(tmp_path):
    s = IdentifiabilitySettings(scales=(0.03, 30.0), weight_decays=(0.0,), lams=(1.0, 10.0), seeds=1,
                                heldout_seeds=3, sizes=(8,), steps=40, batch=32, bootstrap=100)
    res = identifiability_sweep(_digits(200), ("tanh",), s)
    t = res.table
    assert len(t) == 2 * 4 and set(t.loc[t["split"] == "heldout", "seed"]) == {3, 4, 5}
    assert (t["lam"] == 10.0).all()
    nl = t.groupby("scale")["layer1_near_linear"].median()
    assert nl[0.03] > LINEAR_ABOVE and nl[30.0] < SATURATED_BELOW  # the grid goes from linear to saturated
    assert (t["layer1_random"] > 0).all() and (t[RATIO_COLUMN] > 0).all()
    np.testing.assert_allclose(t["layer1_ratio"], t["layer1_error"] / t["layer1_random"])
    (c,) = res.claims
    assert c.verdict in VERDICTS and c == identifiability_claims(t[t["split"] == "heldout"], s.bootstrap)[0]
    assert list(res.fits["split"]) == ["fit", "heldout"]
    summ = regime_summary(t)
    assert len(summ) == 2 and (summ["seeds"] == 1).all()
    assert "### Verdicts" in format_identifiability(res)
    plot_identifiability(t, tmp_path / "f.png")
    with open(tmp_path / "f.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_identifiability_bad_input(tmp_path, capsys):
    assert main(["layerwise", "--identifiability", "--model", "cnn", "--out", str(tmp_path)]) == 2
    assert "--model mlp" in capsys.readouterr().err
    assert main(["layerwise", "--identifiability", "--exactness", "--out", str(tmp_path)]) == 2
    assert "pick one" in capsys.readouterr().err
    assert main(["layerwise", "--identifiability", "--activations", "bogus", "--out", str(tmp_path)]) == 2
    assert "bogus" in capsys.readouterr().err
    assert main(["layerwise", "--identifiability", "--seed-offset", "1", "--out", str(tmp_path)]) == 2
    assert "seed_offset" in capsys.readouterr().err
