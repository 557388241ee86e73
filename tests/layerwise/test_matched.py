"""The identifiability comparison at matched end-to-end error: where each net is read, the match gate, a
planted confound the matching removes, and a tiny sweep whose read nets lie in the band."""
import numpy as np
import pandas as pd
import pytest

from symfast.cli import main
from symfast.layerwise.data import ImageData, load_digits
from symfast.layerwise.identifiability import (EFFECT_MARGIN, RATIO_COLUMN, IdentifiabilitySettings,
                                               identifiability_claims)
from symfast.layerwise.matched import (BAND, IN_BAND, MATCH_TOLERANCE, TARGET, MatchedSettings, band_reads,
                                       format_matched, matched_claims, matched_summary, matched_sweep,
                                       plot_matched, read_index)
from symfast.report.claim import VERDICTS


def test_read_index_reads_the_weight_inside_closest_to_the_centre_and_names_the_misses():
    lo, hi = 1e-3, 1e-2  # centre 10^-2.5
    assert read_index([0.1, 0.05, 6e-3, 1e-4], lo, hi) == (2, IN_BAND)  # a falling net: its one point inside
    assert read_index([0.1, 6e-3, 2.5e-3, 1.2e-3], lo, hi) == (2, IN_BAND)
    assert read_index([0.1, 8e-3, 4e-3, 3.5e-3], lo, hi) == (3, IN_BAND)  # a stalling net: its latest, nearest point
    assert read_index([0.1, 4e-3, 4e-3], lo, hi) == (1, IN_BAND)  # a tie: the earlier weight
    assert read_index([0.1, 1e-2], lo, hi) == (1, IN_BAND)  # the band is closed
    assert read_index([0.1, 0.05, 0.02], lo, hi) == (None, "above the band at every weight")
    assert read_index([5e-4, 1e-4], lo, hi) == (None, "below the band at every weight")
    assert read_index([0.1, 1e-4, 5e-3], lo, hi) == (2, IN_BAND)  # back into the band later: still read
    assert read_index([0.1, 1e-4], lo, hi) == (None, "jumped over the band")
    with pytest.raises(ValueError, match="finite positive"):
        read_index([0.1, 0.0], lo, hi)
    with pytest.raises(ValueError, match="lo < hi"):
        read_index([0.1], hi, lo)


@pytest.mark.parametrize("kw, match", [(dict(target=0.0), "target"), (dict(band=-0.1), "band"),
                                       (dict(grid=IdentifiabilitySettings(lams=(1.0,))), "ladder")],
                         ids=["target", "band", "ladder"])
def test_settings_refuse_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        MatchedSettings(**kw)
    lo, hi = MatchedSettings().limits
    assert lo < TARGET < hi and np.log10(hi / lo) == pytest.approx(2 * BAND)


LADDER = (0.1, 1.0, 10.0, 100.0)


def _planted(effect: float, saturated_path=(1.2, 0.6, 0.0, 0.0), linear_path=(1.2, 0.6, 0.0, -0.6)):
    """Nets whose layer-1 ratio depends on their end-to-end error only (0.3 + 0.1 per decade above
    TARGET), minus `effect` for the saturated ones. The paths are in decades from TARGET: the
    near-linear nets go on to more exact errors along the ladder than the saturated ones, which
    stall: the confound the matching removes."""
    paths, rows = [], []
    for split, seeds in (("fit", (0, 1, 2)), ("heldout", (6, 7, 8))):
        for sd in seeds:
            for scale, nl, path in ((10.0, 0.05, saturated_path), (0.1, 0.95, linear_path)):
                keys = {"activation": "tanh", "scale": scale, "weight_decay": 0.0, "seed": sd, "split": split}
                e = {lam: TARGET * 10 ** (v + 0.001 * sd) for lam, v in zip(LADDER, path)}
                paths += [{**keys, "lam": lam, "end_to_end": v} for lam, v in e.items()]
                rows.append((keys, nl, e))
    reads = band_reads(pd.DataFrame(paths), *MatchedSettings().limits)
    out = {}
    for name, lam_of in (("matched", lambda k: reads.set_index(["scale", "seed"]).loc[(k["scale"], k["seed"])]),
                         ("last weight", lambda k: {"lam": LADDER[-1], "match": IN_BAND})):
        t = []
        for keys, nl, e in rows:
            r = lam_of(keys)
            err = e[r["lam"]]
            t.append({**keys, "lam": r["lam"], "match": r["match"], "end_to_end": err, "accuracy": 0.9,
                      "layer1_near_linear": nl,
                      RATIO_COLUMN: 0.3 + 0.1 * np.log10(err / TARGET) - (effect if nl < 0.5 else 0.0)})
        out[name] = pd.DataFrame(t)
    return out


def test_matching_removes_a_planted_confound_and_keeps_a_planted_effect():
    t = _planted(effect=0.0)
    # read at the last weight the more exact near-linear nets look better: a spurious reversal
    (c,) = identifiability_claims(t["last weight"], bootstrap=300)
    assert c.verdict == "missed" and "difference -0.0" in c.measured
    m = t["matched"]
    assert (m["match"] == IN_BAND).all() and set(m["lam"]) == {10.0}  # both read where they cross the target
    lo, hi = MatchedSettings().limits
    assert m["end_to_end"].between(lo, hi).all()
    (c,) = matched_claims(m, MatchedSettings())
    assert c.verdict == "missed" and "difference 0.00" in c.measured and "gap +0.00 decade" in c.measured
    # a real effect of the identifiable nets survives the matching
    (c,) = matched_claims(_planted(effect=2 * EFFECT_MARGIN)["matched"], MatchedSettings())
    assert c.verdict == "held" and "difference 0.20" in c.measured


def test_unmatched_groups_or_excluded_nets_give_no_false_verdict():
    # both groups inside the band but a band apart on average: not matched, whatever the effect
    t = _planted(effect=2 * EFFECT_MARGIN, saturated_path=(1.2, 0.6, 0.15, 0.15),
                 linear_path=(1.2, 0.6, -0.15, -0.6))["matched"]
    assert (t["match"] == IN_BAND).all()
    (c,) = matched_claims(t, MatchedSettings())
    assert c.verdict == "not comparable" and c.reason.startswith("not matched") and f"{MATCH_TOLERANCE:g}" in c.reason
    # saturated nets that stall above the band are excluded and counted, not grouped
    t = _planted(effect=2 * EFFECT_MARGIN, saturated_path=(1.2, 0.8, 0.6, 0.5))["matched"]
    (c,) = matched_claims(t, MatchedSettings())
    assert c.verdict == "not comparable" and "too few seeds" in c.reason
    assert "0 identifiable and 3 near-linear among the 3 trained of 3 held-out nets" in c.measured
    assert "3 held-out nets excluded (3 above the band at every weight)" in c.measured
    with pytest.raises(ValueError, match="lacks columns"):
        matched_claims(t.drop(columns=["match"]))
    with pytest.raises(ValueError, match="lam and end_to_end"):
        band_reads(pd.DataFrame({"lam": []}), 1e-3, 1e-2)


def _digits(n: int) -> ImageData:
    d = load_digits()
    idx = np.random.default_rng(0).permutation(len(d.x))[:n]
    return ImageData(d.x[idx], d.y[idx], d.shape, d.name)


def test_tiny_sweep_reads_every_net_at_its_in_band_weight(tmp_path):
    grid = IdentifiabilitySettings(scales=(10.0,), weight_decays=(0.0,), lams=(0.01, 1.0, 100.0), seeds=1,
                                   heldout_seeds=3, sizes=(8,), steps=30, batch=32, bootstrap=100, seed_offset=6)
    # tiny nets stay far from exact: a band where their paths pass (about 0.3 after the first weight)
    s = MatchedSettings(grid=grid, target=0.25, band=0.3)
    res = matched_sweep(_digits(200), ("tanh",), s)
    t, p = res.table, res.paths
    assert len(t) == 4 and len(p) == 3 * len(t) and set(t.loc[t["split"] == "heldout", "seed"]) == {6, 7, 8}
    lo, hi = s.limits
    inb = t[t["match"] == IN_BAND]
    assert len(inb) >= 2  # the test is void if no net reached the band
    assert inb["end_to_end"].between(lo, hi).all()
    for _, r in t.iterrows():
        path = p[(p["scale"] == r["scale"]) & (p["seed"] == r["seed"])].sort_values("lam")
        # the table's error is the path's at the weight read; no weight of the path lies in the band
        # nearer the target (in log), and an excluded net's path never enters it
        assert r["end_to_end"] == pytest.approx(float(path.loc[path["lam"] == r["lam"], "end_to_end"].iloc[0]))
        inside = path[path["end_to_end"].between(lo, hi)]["end_to_end"]
        if r["match"] == IN_BAND:
            dist = np.abs(np.log(inside / s.target))
            assert np.log(r["end_to_end"] / s.target) ** 2 <= dist.min() ** 2 + 1e-12
        else:
            assert inside.empty
    # the contrast: every net at the ladder's last weight, the same measurement where the weights agree
    last = res.last
    assert (last["lam"] == 100.0).all() and list(last["seed"]) == list(t["seed"])
    same = t["lam"].to_numpy() == 100.0
    np.testing.assert_allclose(last.loc[same, RATIO_COLUMN], t.loc[same, RATIO_COLUMN])
    assert list(res.fits["reading"]) == ["matched", "last weight"] * 2
    assert (res.fits.loc[res.fits["reading"] == "last weight", "excluded"] == 0).all()
    (c,) = res.claims
    assert c.verdict in VERDICTS and c == matched_claims(t[t["split"] == "heldout"], s)[0]
    assert len(matched_summary(t)) <= 1 and "### Verdicts" in format_matched(res)
    plot_matched(t, tmp_path / "f.png")
    plot_matched(t.assign(match="jumped over the band"), tmp_path / "none.png")
    for f in ("f.png", "none.png"):
        with open(tmp_path / f, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_cli_matched_needs_identifiability(tmp_path, capsys):
    assert main(["layerwise", "--matched", "--out", str(tmp_path)]) == 2
    assert "--matched is for --identifiability" in capsys.readouterr().err
