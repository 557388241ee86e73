"""The sweeps' shared protocol: seeds, split, law seed, bootstrap statistics, verdict rows, markdown."""
import numpy as np
import pandas as pd
import pytest
import torch

from symfast.layerwise.data import ImageData, load_digits
from symfast.layerwise.protocol import (EXACT_RATIO_BAR, FIT, HELDOUT, LAW_SEED, MIN_DECADES, SLOPE_BAR, STUDY,
                                        TEST_FRACTION, check_seed_offset, claims_markdown, combine_verdicts, fit_slope,
                                        law_generator, markdown_table, mean_interval, no_heldout_claim, rows_markdown,
                                        seed_medians, seed_roles, seeds_text, slope_and_ratio, slope_cells, slope_fits,
                                        theorem_note, train_test_split, verdict_claim)
from symfast.report.claim import Claim, Verdict


# ---- data and seeds -------------------------------------------------------------------------------

def test_every_sweep_gets_the_same_split_and_the_same_law_draws():
    d = load_digits()
    d = ImageData(d.x[:200], d.y[:200], d.shape, d.name)
    (train, test), (train2, test2) = train_test_split(d), train_test_split(d)
    np.testing.assert_array_equal(test.x, test2.x)
    np.testing.assert_array_equal(train.x, train2.x)
    assert len(test.x) == round(TEST_FRACTION * len(d.x)) and len(train.x) + len(test.x) == len(d.x)
    seen = {r.tobytes() for r in np.concatenate([train.x, test.x])}
    assert seen == {r.tobytes() for r in d.x}  # a split: nothing lost, nothing duplicated
    a, b = torch.rand(5, generator=law_generator()), torch.rand(5, generator=law_generator())
    assert torch.equal(a, b) and torch.equal(a, torch.rand(5, generator=torch.Generator().manual_seed(LAW_SEED)))


def test_seed_roles_put_fit_seeds_first_and_the_heldout_seeds_after_the_offset():
    roles = seed_roles(2, 3, 1000)
    assert list(roles.items()) == [(0, FIT), (1, FIT), (1000, HELDOUT), (1001, HELDOUT), (1002, HELDOUT)]
    assert seeds_text(2, 3, 1000) == "fit seeds 0..1, held-out seeds 1000..1002"
    check_seed_offset(5, 5)  # held-out seeds right after the fit seeds: no overlap
    with pytest.raises(ValueError, match="seed_offset=3, inside the fit seeds 0..4: pick seed_offset >= 5"):
        check_seed_offset(5, 3)


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


def test_mean_interval_brackets_the_mean_and_closes_on_constants():
    m, lo, hi = mean_interval([1.0, 2.0, 3.0, 4.0], 500)
    assert m == 2.5 and lo <= m <= hi and lo < hi
    assert mean_interval([0.3] * 4, 100) == pytest.approx((0.3, 0.3, 0.3))


def _two_splits(fit_slope_: float, heldout_slope: float) -> pd.DataFrame:
    rows = []
    for split, sds, k in ((FIT, (0, 1, 2), fit_slope_), (HELDOUT, (1000, 1001, 1002), heldout_slope)):
        for sd in sds:
            for j, lam in enumerate((1e-2, 1.0, 1e2)):
                e2e = 10.0 ** (-2 * j)
                rows.append({"lam": lam, "seed": sd, "split": split, "end_to_end": e2e,
                             "layer1_error": (1 + 0.1 * (sd % 5)) * e2e ** k, "layer1_ratio": 0.05})
    return pd.DataFrame(rows)


def test_slope_fits_reads_each_split_on_its_own_and_renders_its_cells():
    fits = slope_fits(_two_splits(0.3, 0.9), "end_to_end", "layer1_error", 100)
    assert list(fits) == ["slope_fit", "slope_fit_lo", "slope_fit_hi", "slope_heldout", "slope_heldout_lo",
                          "slope_heldout_hi"]
    assert fits["slope_fit"] == pytest.approx(0.3) and fits["slope_heldout"] == pytest.approx(0.9)
    cells = slope_cells(fits)
    assert cells == {"fit seeds": "0.30 [0.30, 0.30]", "held-out seeds": "0.90 [0.90, 0.90]"}


def test_slope_and_ratio_and_combined_verdicts():
    t = _two_splits(0.3, 0.9)
    r = slope_and_ratio(t[t["split"] == HELDOUT], "layer1_error", "layer1_ratio", 100)
    assert r["slope"] == pytest.approx(0.9) and r["ratio"] == pytest.approx(0.05) and r["decades"] == pytest.approx(4)
    assert r["seeds"] == [1000, 1001, 1002] and r["n"] == 3 and (r["top"]["lam"] == 1e2).all()
    assert SLOPE_BAR < 0.9 and EXACT_RATIO_BAR > 0.05  # both tests pass here
    assert r["v_slope"].verdict == "held" and r["v_ratio"].verdict == "held"
    held, missed, open_ = Verdict("held", "a"), Verdict("missed", "b"), Verdict("not comparable", "c")
    assert combine_verdicts([held, held], r["decades"]) == Verdict("held", "a; a")
    assert combine_verdicts([held, missed, open_], 2.0) == Verdict("missed", "b")
    assert combine_verdicts([held, open_], 2.0) == Verdict("not comparable", "c")
    v = combine_verdicts([held, held], MIN_DECADES / 2)
    assert v.verdict == "not comparable" and "decades" in v.reason


def test_verdict_rows_put_the_rule_in_the_note_and_a_reason_only_where_untested():
    kind, note = theorem_note("tanh")
    assert kind == "proven" and "hypothesis holds" in note
    assert theorem_note("relu")[0] == "conjectural"
    c = verdict_claim("claim", "expected", "measured", Verdict("held", "the rule"), note)
    assert c == Claim(STUDY, "claim", "expected", "measured", "held", f"the rule; {note}", "")
    c = verdict_claim("claim", "expected", "measured", Verdict("not comparable", "too few seeds (n = 2)"), note)
    assert c.note == note and c.reason == "too few seeds (n = 2)"
    c = no_heldout_claim("claim", "expected")
    assert c.verdict == "not comparable" and c.measured == "no held-out seeds" and "n = 0" in c.reason


def test_markdown_tables_format_float_cells_only():
    df = pd.DataFrame({"a": ["x", "y"], "n": [1, 2], "e": [1.5e-3, 2.0]})
    text = markdown_table(df, {"e": lambda v: f"{v:.1e}"})
    assert text.split("\n") == ["| a | n | e |", "|---|---|---|", "| x | 1 | 1.5e-03 |", "| y | 2 | 2.0e+00 |"]
    assert markdown_table(df).split("\n")[2] == "| x | 1 | 0.0015 |"
    rows = claims_markdown([Claim(STUDY, "c", "e", "m", "not comparable", reason="not converged")])
    assert rows.split("\n") == ["| claim | measured | verdict |", "|---|---|---|",
                                 "| c | m | not comparable: not converged |"]


def test_rows_markdown_draws_header_separator_and_rows_and_refuses_a_short_row():
    assert rows_markdown(["a", "b"], [("1", "x"), ["2", "y"]]).split("\n") == ["| a | b |", "|---|---|", "| 1 | x |",
                                                                            "| 2 | y |"]
    assert rows_markdown(["a"], []) == "| a |\n|---|"
    with pytest.raises(ValueError, match="2 cells"):
        rows_markdown(["a", "b"], [("1",)])


def test_seed_medians_keep_the_group_order_and_count_the_seeds():
    t = pd.DataFrame({"k": ["b", "b", "a"], "v": [1.0, 3.0, 5.0]})
    out = seed_medians(t, ["k"], ["v"])
    assert list(out.columns) == ["k", "seeds", "v"] and list(out["k"]) == ["b", "a"]
    assert list(out["seeds"]) == [2, 1] and list(out["v"]) == [2.0, 5.0]
