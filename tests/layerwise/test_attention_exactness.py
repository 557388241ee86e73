"""The attention exactness sweep: head action against end-to-end error along a penalty sweep, and its verdicts."""
import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

import symfast.layerwise.attention_exactness as ae
from symfast.cli import main
from symfast.layerwise.attention import Attention, attention_forward, planted_attention, recover_attention_action
from symfast.layerwise.attention_exactness import (COLUMNS, RHO, TRAINED_BAR, AttentionExactnessSettings,
                                                   attention_exactness_claims, attention_exactness_sweep,
                                                   attention_summary, measure_attention, train_attention_sweep,
                                                   true_head_index)
from symfast.layerwise.protocol import EXACT_RATIO_BAR, SLOPE_BAR
from symfast.report.claim import VERDICTS

TINY = dict(lams=(1e-2, 1e2), seeds=1, heldout_seeds=3, steps=40, batch=8, test=16, random_draws=4, bootstrap=100)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny float64 tensors: extra torch threads only contend on a shared machine (the sweep sets 1 itself)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def tiny_sweep():
    return attention_exactness_sweep(settings=AttentionExactnessSettings(**TINY))


def _inputs(s, seed=0):
    X = torch.randn(32, s.tokens, s.d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return X, X


def _regauged(att: Attention, perm, seed=0) -> Attention:
    """The same function with heads reordered by perm and random invertible gauges per head."""
    rng = np.random.default_rng(seed)
    H, k = att.heads, att.Wq.shape[2]
    A = torch.as_tensor(np.eye(k) + 0.3 * rng.normal(size=(H, k, k)))
    B = torch.as_tensor(np.eye(k) + 0.3 * rng.normal(size=(H, k, k)))
    p = torch.as_tensor(perm)
    return Attention((att.Wq @ A)[p], (att.Wk @ torch.linalg.inv(A).transpose(1, 2))[p], (att.Wv @ B)[p],
                     (torch.linalg.inv(B) @ att.Wo)[p])


# ---- an exactly equivariant block ----------------------------------------------------------------

def test_planted_block_is_exact_and_its_permutation_is_the_true_one():
    s = AttentionExactnessSettings()
    att, index = ae.teacher(3, s)
    X, _ = _inputs(s)
    row = measure_attention(att, X, X, att(X), s, (att, index), seed=0)
    assert row["end_to_end"] < 1e-12 and row["task_error"] < 1e-12 and row["teacher_error"] < 1e-12
    assert row["head_error"] < 1e-8 and row["head_random"] > 0.3 and row["head_ratio"] < 1e-7
    assert row["match_error"] < 1e-10 and row["match_random"] > 0.3
    assert row["perm_true"] == 1.0 and row["index"] == row["true_index"] == " ".join(map(str, index))
    assert row["fixed_heads"] == ae.TEACHER_FIXED
    assert set(COLUMNS) - {"task", "lam", "seed", "split"} == set(row)


def test_true_index_follows_a_reordered_regauged_student():
    s = AttentionExactnessSettings()
    teacher_att, index = ae.teacher(5, s)
    perm = np.array([2, 0, 3, 1])
    student = _regauged(teacher_att, perm, seed=1)
    X, _ = _inputs(s, 1)
    torch.testing.assert_close(student(X), teacher_att(X))  # the same function
    true, err = true_head_index(student, teacher_att, index)
    assert err < 1e-10
    assert not np.array_equal(true, index)  # relabelled heads: the truth is conjugated, not copied
    np.testing.assert_array_equal(recover_attention_action(student, RHO).index, true)
    row = measure_attention(student, X, X, teacher_att(X), s, (teacher_att, index))
    assert row["perm_true"] == 1.0 and row["head_error"] < 1e-8
    # a wrong claimed teacher permutation is reported as not true
    wrong = measure_attention(student, X, X, teacher_att(X), s, (teacher_att, np.arange(4)))
    assert wrong["perm_true"] == 0.0


def test_a_non_equivariant_block_sits_near_the_random_level():
    s = AttentionExactnessSettings()
    rng = np.random.default_rng(0)
    att = Attention(*(rng.normal(size=sh) / 2 for sh in ((4, 4, 2), (4, 4, 2), (4, 4, 2), (4, 2, 4))))
    X, _ = _inputs(s)
    row = measure_attention(att, X, X, att(X), s)
    assert row["end_to_end"] > 0.1 and row["head_ratio"] > 0.2
    assert np.isnan(row["perm_true"]) and row["true_index"] == ""


# ---- training --------------------------------------------------------------------------------------

def test_stacked_forward_matches_the_block_forward():
    rng = np.random.default_rng(1)
    W = [torch.as_tensor(rng.normal(size=(3, *sh))) for sh in ((4, 4, 2), (4, 4, 2), (4, 4, 2), (4, 2, 4))]
    X = torch.as_tensor(rng.normal(size=(3, 5, 6, 4)))
    out = ae._forward(X, *W)
    for m in range(3):
        torch.testing.assert_close(out[m], attention_forward(X[m], *(w[m] for w in W)))


def test_stacked_training_equals_training_alone():
    s = AttentionExactnessSettings(**{**TINY, "steps": 10})
    both = train_attention_sweep("teacher", s.lams, [0, 1000], s)
    alone = train_attention_sweep("teacher", s.lams, [1000], s)
    for lam in s.lams:
        for w in ("Wq", "Wk", "Wv", "Wo"):
            torch.testing.assert_close(getattr(both[(lam, 1000)], w), getattr(alone[(lam, 1000)], w), atol=1e-6,
                                       rtol=0)


@pytest.mark.parametrize("kw, match", [
    (dict(seeds=5, seed_offset=3), "seed_offset"), (dict(lams=(1.0, -1.0)), "penalty weights"),
    (dict(d=6), "d must be 4"), (dict(heads=3), "heads"), (dict(steps=0), "steps"),
], ids=["overlap", "negative-lam", "d", "odd-heads", "steps"])
def test_settings_refuse_bad_values(kw, match):
    with pytest.raises(ValueError, match=match):
        AttentionExactnessSettings(**kw)


def test_unknown_task_is_refused():
    with pytest.raises(ValueError, match="task must be one of"):
        attention_exactness_sweep(("teacher", "copy"), AttentionExactnessSettings(**TINY))


# ---- verdicts on synthetic tables ------------------------------------------------------------------

def _synthetic(slope=1.0, ratio=0.01, perm=1.0, task_error=0.05, heldout=(1000, 1001, 1002), task="teacher",
               decades=3):
    rows = []
    lams = [1e-2, 1.0, 1e2, 1e4]
    for split, sds in (("fit", (0, 1, 2)), ("heldout", heldout)):
        for sd in sds:
            for i, lam in enumerate(lams):
                e2e = 10.0 ** (-i * decades / 3)
                top = lam == lams[-1]
                rows.append({"task": task, "lam": lam, "seed": sd, "split": split, "end_to_end": e2e,
                             "task_error": task_error, "head_error": 0.9 * e2e ** slope * (1 + 0.01 * (sd % 7)),
                             "head_ratio": ratio if top else 0.8,
                             "perm_true": (perm if sd != heldout[0] else 1.0) if task == "teacher" else np.nan})
    return pd.DataFrame(rows)


def test_verdict_held_and_missed_both_ways():
    (c,) = attention_exactness_claims(_synthetic())
    assert c.verdict == "held" and "true permutation in 3 of 3" in c.measured
    (c,) = attention_exactness_claims(_synthetic(slope=0.1))
    assert c.verdict == "missed" and "bar lies above slope" in c.note
    (c,) = attention_exactness_claims(_synthetic(ratio=0.6))
    assert c.verdict == "missed" and "ratio" in c.note
    (c,) = attention_exactness_claims(_synthetic(perm=0.0))  # two of three held-out blocks carry a wrong one
    assert c.verdict == "missed" and "true permutation in only 1 of 3" in c.note
    (c,) = attention_exactness_claims(_synthetic(task="smoothing"))  # no truth: slope and ratio alone
    assert c.verdict == "held" and "true permutation" not in c.expected


def test_verdict_not_comparable_cases_and_heldout_only():
    assert 0 < SLOPE_BAR and 0 < EXACT_RATIO_BAR < 1 and 0 < TRAINED_BAR <= 1
    (c,) = attention_exactness_claims(_synthetic(task_error=0.9))
    assert c.verdict == "not comparable" and c.reason == "not converged" and "did not train" in c.note
    (c,) = attention_exactness_claims(_synthetic(heldout=(1000, 1001)))
    assert c.verdict == "not comparable" and "too few seeds" in c.reason
    (c,) = attention_exactness_claims(_synthetic(decades=0.5))
    assert c.verdict == "not comparable" and "decades" in c.reason
    t = _synthetic()
    bad_fit = t.copy()
    bad_fit.loc[bad_fit["split"] == "fit", "head_error"] = 0.5  # flat on the fit seeds: must not matter
    assert attention_exactness_claims(bad_fit) == attention_exactness_claims(t)
    with pytest.raises(ValueError, match="lacks columns"):
        attention_exactness_claims(t.drop(columns=["perm_true"]))


# ---- the sweep itself (reduced) -------------------------------------------------------------------------

def test_sweep_table_columns_and_claims(tiny_sweep):
    t = tiny_sweep.table
    assert list(t.columns) == COLUMNS
    assert len(t) == 2 * 2 * 4 and set(t["task"]) == {"teacher", "smoothing"}
    assert set(t.loc[t["split"] == "heldout", "seed"]) == {1000, 1001, 1002}
    assert (t["head_error"] > 0).all() and (t["head_random"] > 0).all() and (t["end_to_end"] > 0).all()
    np.testing.assert_allclose(t["head_ratio"], t["head_error"] / t["head_random"])
    teach = t[t["task"] == "teacher"]
    assert teach["perm_true"].isin([0.0, 1.0]).all() and (teach["teacher_error"] >= 0).all()
    assert t.loc[t["task"] == "smoothing", "perm_true"].isna().all()
    for _, g in t.groupby(["task", "seed"]):  # the penalty bites: the larger lam is more equivariant
        e = g.sort_values("lam")["end_to_end"].to_numpy()
        assert e[-1] < e[0]
    assert [c.claim.split("(")[-1] for c in tiny_sweep.claims] == ["teacher task)", "smoothing task)"]
    assert all(c.verdict in VERDICTS and c.study == "layerwise" for c in tiny_sweep.claims)
    assert tiny_sweep.claims == attention_exactness_claims(t[t["split"] == "heldout"], tiny_sweep.settings.bootstrap)
    summ = attention_summary(t)
    assert len(summ) == 4 and (summ["seeds"] == 1).all()
    assert np.isfinite(tiny_sweep.fits[["slope_fit", "slope_heldout"]].to_numpy()).all()


# ---- command line --------------------------------------------------------------------------------------

def test_cli_attention_exactness_bad_input(tmp_path, capsys):
    base = ["layerwise", "--exactness", "--model", "attention", "--out", str(tmp_path)]
    assert main(base + ["--tasks", "teacher,copy"]) == 2
    assert "copy" in capsys.readouterr().err
    assert main(base + ["--activations", "tanh"]) == 2
    assert "--tasks" in capsys.readouterr().err
    assert main(["layerwise", "--exactness", "--tasks", "teacher", "--out", str(tmp_path)]) == 2
    assert "--model attention" in capsys.readouterr().err
    assert main(["layerwise", "--exactness", "--model", "cnn", "--out", str(tmp_path)]) == 2
    assert main(base + ["--quick", "--seed-offset", "1"]) == 2
    assert "seed_offset" in capsys.readouterr().err


def test_cli_attention_exactness_writes_tables_figure_and_not_comparable_quick_rows(tmp_path, capsys, monkeypatch):
    real = ae.AttentionExactnessSettings
    # the --quick settings, shrunk further so that the command's plumbing is tested in seconds
    monkeypatch.setattr(ae, "AttentionExactnessSettings", lambda **kw: dataclasses.replace(
        real(**kw), steps=20, batch=8, test=16, random_draws=4, bootstrap=50))
    out = tmp_path / "att"
    assert main(["layerwise", "--exactness", "--model", "attention", "--quick", "--tasks", "teacher",
                 "--out", str(out)]) == 0
    assert "Verdicts (held-out seeds" in capsys.readouterr().out
    for name in ("exactness_attention.md", "exactness_attention.csv", "exactness_attention_summary.csv",
                 "exactness_attention_fits.csv", "claims.csv", "exactness_attention.png"):
        assert (out / name).stat().st_size > 0
    t = pd.read_csv(out / "exactness_attention.csv")
    assert list(t.columns) == COLUMNS and set(t["task"]) == {"teacher"} and t["lam"].nunique() == 4
    claims = pd.read_csv(out / "claims.csv", keep_default_na=False)
    assert len(claims) == 1 and claims["verdict"].iloc[0] == "not comparable"
    assert claims["reason"].iloc[0] == "not converged"
    with open(out / "exactness_attention.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
