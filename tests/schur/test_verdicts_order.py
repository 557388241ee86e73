"""Verdicts against the paper: order-dependent numbers are never held; Cayley rows are by construction."""
import pandas as pd
import pytest

from symfast.report.claim import VERDICTS
from symfast.schur.claims import schur_claims
from symfast.schur.paper import PAPER_COPY, SCHUR_MIN_SEEDS, compare_with_paper


def _row(task, cons, hidden, subset, metric, mu, lo, hi, n=SCHUR_MIN_SEEDS, alpha=0.9, **extra):
    return {"task": task, "construction": cons, "hidden": hidden, "alpha": alpha, "subset": subset, "n": n,
            f"{metric}_mean": mu, f"{metric}_lo": lo, f"{metric}_hi": hi,
            **{f"{k}_mean": v for k, v in extra.items()}}


def test_order_dependent_and_by_construction_verdicts(tmp_path):
    """Read on the paper's modulus order; "order-dependent" only where that order is ambiguous (tied
    moduli in a seed whose effect moves with the order)."""
    od = dict(order_dependent=1 / 3, dfvu_order_min=0.01, dfvu_order_max=0.2, paper_order_ambiguous=1 / 3)
    calm = dict(order_dependent=0.0, dfvu_order_min=0.09, dfvu_order_max=0.1, paper_order_ambiguous=0.0)
    rows = [_row("copy", "orthogonal", 72, s, "replay_acc", p, p - 0.01, p + 0.01, **calm) for s, p in PAPER_COPY.items()]
    rows[list(PAPER_COPY).index("-T_RR")] = _row("copy", "orthogonal", 72, "-T_RR", "replay_acc", 0.876, 0.87, 0.88, **od)  # would be "held"
    rows += [_row("flipflop", "orthogonal", 64, "-T_C->R", "dfvu", 0.0945, 0.085, 0.105, **calm),  # inside the band
             _row("flipflop", "orthogonal", 64, "-T_CC", "dfvu", 0.0496, 0.03, 0.07, **od),
             _row("flipflop", "orthogonal", 64, "-T_RR", "dfvu", 0.001, -0.001, 0.003, **calm)]
    rows += [_row("copy", "cayley", 72, s, "replay_acc", 1.0, 1.0, 1.0, alpha=a, noop=1.0)
             for a in (0.85, 0.9, 0.95) for s in ("-T_C->R", "-T_RR,-T_C->R,-T_CC")]
    cmp = compare_with_paper(pd.DataFrame(rows))
    v = cmp.set_index(["table", "setting", "subset"])
    assert v.loc[("copy", "copy orthogonal H=72 alpha=0.9", "-T_RR"), "verdict"] == "order-dependent"
    assert v.loc[("copy", "copy orthogonal H=72 alpha=0.9", "-T_CC"), "verdict"] == "held"  # calm: not flagged
    assert v.loc[("cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_CC"), "verdict"] == "order-dependent"
    assert v.loc[("cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R"), "verdict"] == "held"
    # -T_C->R largest in the modulus order, but -T_CC's range over orderings reaches above it
    claim = v.loc[("claim", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R")]
    assert claim["verdict"] == "order-dependent" and "-T_CC" in claim["reason"]
    cay = cmp[cmp.setting.str.contains("cayley")]
    assert len(cay) == 6 and (cay["verdict"] == "by construction").all()
    assert cay["reason"].str.contains("no-op in 100%").all()
    assert "held" not in set(cmp[cmp.verdict.isin(["order-dependent", "by construction"])]["verdict"])
    path = tmp_path / "cmp.csv"
    cmp.to_csv(path, index=False)
    claims = schur_claims(str(path))
    got = {c.verdict for c in claims}
    assert {"order-dependent", "by construction", "held"} <= got and got <= set(VERDICTS)


def test_a_spread_over_orderings_the_paper_fixes_by_modulus_is_robustness_not_a_verdict():
    """The effect moves over within-sector orderings, but the moduli are not tied: the paper's order is
    unique, so the number is held or missed on it and the spread is said beside the verdict."""
    moves = dict(order_dependent=1.0, dfvu_order_min=0.01, dfvu_order_max=0.2, paper_order_ambiguous=0.0)
    rows = [_row("copy", "orthogonal", 72, "-T_CC", "replay_acc", 1.0, 0.995, 1.0, **moves),
            _row("flipflop", "orthogonal", 64, "-T_C->R", "dfvu", 0.0945, 0.085, 0.105, **moves),
            _row("flipflop", "orthogonal", 64, "-T_CC", "dfvu", 0.0496, 0.03, 0.07, **moves),
            _row("flipflop", "orthogonal", 64, "-T_RR", "dfvu", 0.001, -0.001, 0.003, **moves)]
    v = compare_with_paper(pd.DataFrame(rows)).set_index(["table", "setting", "subset"])
    cc = v.loc[("copy", "copy orthogonal H=72 alpha=0.9", "-T_CC")]
    assert cc["verdict"] == "held" and "robustness: dFVU over within-sector orderings 0.01..0.2" in cc["reason"]
    assert "an order the paper fixes by modulus" in cc["reason"]
    claim = v.loc[("claim", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R")]
    assert claim["verdict"] != "order-dependent"
    assert "order-dependent" not in set(v["verdict"])


def test_cayley_without_a_converged_model_is_still_by_construction():
    cmp = compare_with_paper(pd.DataFrame([_row("copy", "orthogonal", 72, "full", "replay_acc", 1.0, 1.0, 1.0)]))
    cay = cmp[cmp.setting.str.contains("cayley")]
    assert (cay["verdict"] == "by construction").all() and cay["reason"].str.contains("no converged").all()


def test_every_paper_number_is_its_own_row(tmp_path):
    """No folding: each published number (and each ranking claim) is one verdict row, tested or not."""
    from symfast.schur.paper import PAPER_CROSS_TASK, PAPER_TABLE1

    empty = pd.DataFrame(columns=["task", "construction", "hidden", "alpha", "subset", "n"])
    cmp = compare_with_paper(empty)
    expected = len(PAPER_COPY) + 3 * len(PAPER_TABLE1) + len(PAPER_CROSS_TASK) + 4  # + 4 ranking claims
    assert len(cmp) == expected
    assert set(cmp["verdict"]) == {"not comparable", "by construction"}  # Cayley rows hold for any W of their kind
    path = tmp_path / "schur_paper_comparison.csv"
    cmp.to_csv(path, index=False)
    claims = schur_claims(str(path))
    assert len(claims) == expected
    assert all(c.verdict == "by construction" or "no converged model" in c.reason for c in claims)
    assert not any(c.tested for c in claims)


def _seed_rows(seeds, dfvu):
    """Per-model rows of flip-flop -T_C->R (orthogonal, H = 64, alpha 0.9) with the given dFVU per seed."""
    return pd.DataFrame([{"task": "flipflop", "construction": "orthogonal", "hidden": 64, "alpha": 0.9,
                          "subset": "-T_C->R", "seed": s, "dfvu": d, "order_dependent": 0.0}
                         for s, d in zip(seeds, dfvu)])


def test_replicates_read_the_verdict_on_each_seed_set():
    """The paper's seeds (0-2) near the published 0.0945, the held-out seeds (3-8) far from it: the first
    set holds, the second misses, and the row says it did not replicate; a row without models in both
    sets has no replication value."""
    from symfast.schur.ablation import summarize
    from symfast.schur.paper import compare_replicates

    def summarise(rows):
        return summarize(rows, by=("task", "construction", "hidden", "alpha", "subset"),
                         values=("dfvu", "order_dependent"))
    used = pd.concat([_seed_rows([0, 1, 2], [0.094, 0.095, 0.0945]),
                      _seed_rows([3, 4, 5, 6, 7, 8], [0.50, 0.52, 0.49, 0.51, 0.50, 0.505])], ignore_index=True)
    reps = compare_replicates(used, summarise)
    r = reps.set_index(["table", "setting", "subset"]).loc[("cross-task", "flipflop orthogonal H=64 alpha=0.9",
                                                            "-T_C->R")]
    assert (r.n_paper_seeds, r.n_heldout, r.n_all) == (3, 6, 9)
    assert (r.verdict_paper_seeds, r.verdict_heldout) == ("held", "missed") and r.replicated == False  # noqa: E712
    assert reps[(reps.n_paper_seeds == 0) | (reps.n_heldout == 0)].replicated.isna().all()
    same = compare_replicates(pd.concat([_seed_rows([0, 1, 2], [0.094, 0.095, 0.0945]),
                                         _seed_rows([3, 4, 5], [0.0944, 0.0946, 0.0945])]), summarise)
    row = same.set_index(["table", "setting", "subset"]).loc[("cross-task", "flipflop orthogonal H=64 alpha=0.9",
                                                              "-T_C->R")]
    assert row.verdict_heldout == "held" and row.replicated == True  # noqa: E712
    with pytest.raises(ValueError, match="held-out"):
        compare_replicates(_seed_rows([0, 1, 2], [0.1, 0.1, 0.1]), summarise)


def test_a_row_without_converged_models_says_whether_its_setting_ran():
    """Given the trained models (converged or not), "not comparable" says "not run" or "none of the k
    trained converged" instead of both."""
    summ = pd.DataFrame([_row("flipflop", "orthogonal", 64, "-T_C->R", "dfvu", 0.09, 0.08, 0.1)]).iloc[0:0]
    trained = pd.DataFrame({"task": ["flipflop"] * 3 + ["copy"], "construction": ["orthogonal"] * 4,
                            "hidden": [64, 64, 64, 64]})
    v = compare_with_paper(summ, trained=trained).set_index(["table", "setting", "subset"])
    ff = v.loc[("cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R"), "reason"]
    assert ff == "no converged model at this setting: none of the 3 trained converged"
    sine = v.loc[("cross-task", "sine orthogonal H=64 alpha=0.9", "-T_C->R"), "reason"]
    assert sine == "not run: this run trained no model at this setting"
    h72 = v.loc[("copy", "copy orthogonal H=72 alpha=0.9", "-T_RR"), "reason"]  # copy trained at H = 64 only
    assert h72.startswith("not run")
    claim = v.loc[("claim", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R"), "reason"]
    assert "none of the 3 trained converged" in claim
    assert (v["verdict"].isin(["not comparable", "by construction"])).all()


def test_class_rules_inferred_task_selection_and_a_defined_task():
    """A miss on a task whose definition was inferred (copy, sine, context) is "not comparable: task
    definition differs"; the full copy model's replay (selected by the convergence target on the same
    evaluation) is "by construction"; flip-flop, a defined task, can be missed."""
    calm = dict(order_dependent=0.0, dfvu_order_min=0.0, dfvu_order_max=0.0, paper_order_ambiguous=0.0)
    rows = [_row("copy", "orthogonal", 72, "full", "replay_acc", 1.0, 0.995, 1.0, **calm),
            _row("copy", "orthogonal", 72, "-T_C->R", "replay_acc", 0.99, 0.98, 1.0, **calm),  # paper 0.639
            _row("sine", "orthogonal", 64, "-T_CC", "dfvu", 0.2, 0.1, 0.3, **calm),  # paper 2.08
            _row("flipflop", "orthogonal", 64, "-T_CC", "dfvu", 0.5, 0.45, 0.55, **calm)]  # paper 4.96e-2
    v = compare_with_paper(pd.DataFrame(rows)).set_index(["table", "setting", "subset"])
    full = v.loc[("copy", "copy orthogonal H=72 alpha=0.9", "full")]
    assert full["verdict"] == "by construction" and "convergence target on this same evaluation" in full["reason"]
    for key in [("copy", "copy orthogonal H=72 alpha=0.9", "-T_C->R"),
                ("cross-task", "sine orthogonal H=64 alpha=0.9", "-T_CC")]:
        assert v.loc[key, "verdict"] == "not comparable"
        assert v.loc[key, "reason"].startswith("task definition differs: ") and "on ours: missed" in v.loc[key, "reason"]
    assert v.loc[("cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_CC"), "verdict"] == "missed"


def test_replicates_that_disagree_turn_the_pooled_verdict_not_comparable():
    """Paper seeds hold flip-flop -T_C->R, held-out seeds miss it: whatever all seeds pooled say, the
    comparison row reads "not comparable: replicates disagree"; a row the two sets agree on keeps its
    verdict."""
    from symfast.schur.ablation import summarize
    from symfast.schur.paper import apply_replicates, compare_replicates

    def summarise(rows):
        return summarize(rows, by=("task", "construction", "hidden", "alpha", "subset"),
                         values=("dfvu", "order_dependent"))
    key = ("cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R")
    held = _seed_rows([0, 1, 2], [0.094, 0.095, 0.0945])
    flip = pd.concat([held, _seed_rows(range(3, 13), [0.50, 0.52, 0.49, 0.51, 0.50, 0.505, 0.5, 0.51, 0.49, 0.5])])
    reps = compare_replicates(flip, summarise)
    assert reps.set_index(["table", "setting", "subset"]).loc[key, "replicates_disagree"]
    cmp = compare_with_paper(summarise(flip), min_seeds=10)
    pooled = cmp.set_index(["table", "setting", "subset"]).loc[key]
    out = apply_replicates(cmp, reps).set_index(["table", "setting", "subset"]).loc[key]
    assert out["verdict"] == "not comparable" and out["reason"].startswith("replicates disagree: seeds 0-2")
    assert f"all seeds pooled: {pooled['verdict']}" in out["reason"]
    agree = pd.concat([held, _seed_rows(range(3, 13), [0.0944 + 1e-4 * (i % 3) for i in range(10)])])
    reps = compare_replicates(agree, summarise)
    assert not reps.replicates_disagree.any()
    cmp = compare_with_paper(summarise(agree), min_seeds=10)
    same = apply_replicates(cmp, reps)
    pd.testing.assert_frame_equal(same, cmp)
    assert same.set_index(["table", "setting", "subset"]).loc[key, "verdict"] == "held"
