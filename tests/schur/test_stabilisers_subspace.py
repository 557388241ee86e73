"""d_D and eps-stabiliser classes, subspace-vs-coupling projections, damage predictors, paper verdicts."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings, strategies as st

import symfast as sf
from symfast.schur import rnn
from symfast.schur.ablation import rollout_distance
from symfast.schur.blocks import ablate, schur_blocks
from symfast.schur.paper import PAPER_COPY, SCHUR_MIN_SEEDS, compare_with_paper, converged
from symfast.schur.subspace import damage_predictors, removed_direction_projections
from symfast.testing import assert_close


def _model(task, H=12, recurrent="normal", seed=0, scale=1.5):
    m = rnn.TanhRNN(task.n_in, H, task.n_out, recurrent=recurrent, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        if recurrent != "cayley":
            m.rnn.weight_hh_l0.mul_(scale)  # non-normal with a non-empty C sector
    return m


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000))
def test_rollout_distance_to_targets_is_fvu(seed):
    g = torch.Generator().manual_seed(seed)
    y, yh = torch.randn(3, 5, 2, generator=g), torch.randn(4, 3, 5, 2, generator=g)
    m = (torch.rand(3, 5, 2, generator=g) < 0.7).float()
    assert_close("d_D_vs_fvu", rnn.fvu(yh, y, m), rollout_distance(yh, y, y, m))
    assert float(rollout_distance(y, y, y, m)) == 0.0
    # symmetric in its two rollouts
    assert_close("d_D_sym", rollout_distance(yh[0], yh[1], y, m), rollout_distance(yh[1], yh[0], y, m))


def test_schur_ablation_d_D_and_classes():
    task = rnn.FlipFlop(T=20)
    model = _model(task)
    df = sf.schur_ablation(model, task, n_eval=32, n_random=0, epsilon=0.05)
    # d_D recomputed by hand: rollouts of every ablated W against the full model's
    W = model.recurrent_weight(torch.float64).detach()
    W_ab, _ = ablate(schur_blocks(W, alpha=0.9))
    x, y, m = task.sample(32, 10**6)
    with torch.no_grad():
        outs = []
        for Wk in W_ab:
            model2 = _model(task)
            model2.load_state_dict(model.state_dict())
            model2.rnn.weight_hh_l0.copy_(Wk.float())
            outs.append(model2(x))
    want = rollout_distance(torch.stack(outs).double(), outs[0].double(), y.double(), m)
    assert_close("d_D", want, torch.tensor(df["d_D"].to_numpy()), rtol=1e-3, atol=1e-6)
    assert df.loc[df.subset == "full", "stabiliser"].item() == "no-op"
    rest = df[df.subset != "full"]
    assert ((rest["d_D"] <= 0.05) == (rest["stabiliser"] == "eps-stabiliser")).all()
    assert (rest["removed_rel_T"] > 0).all() and set(rest["stabiliser"]) <= {"eps-stabiliser", "fragile"}
    loose = sf.schur_ablation(model, task, n_eval=32, n_random=0, epsilon=1e9)
    assert (loose.loc[loose.subset != "full", "stabiliser"] == "eps-stabiliser").all()
    with pytest.raises(ValueError, match="epsilon"):
        sf.schur_ablation(model, task, n_eval=8, epsilon=-1.0)


def test_cayley_ablations_are_no_ops():
    task = rnn.SineGeneration(T=15)
    df = sf.schur_ablation(_model(task, recurrent="cayley"), task, n_eval=16, n_random=0)
    assert (df["stabiliser"] == "no-op").all() and (df["d_D"] < 1e-10).all()


def test_removed_direction_projections_by_hand():
    task = rnn.ContextIntegration(T=20, t_on=2, t_off=12)
    model = _model(task, H=16, seed=3)
    pr = removed_direction_projections(model, task, alpha=0.9, n_eval=24, pc_var=0.9)
    assert list(pr["subset"]) == ["-T_RR", "-T_C->R", "-T_CC"]
    W = model.recurrent_weight(torch.float64).detach()
    sb = schur_blocks(W, alpha=0.9)
    W_ab, _ = ablate(sb, [("T_C->R",)])
    dW = (W - W_ab[0]).numpy()
    with torch.no_grad():
        _, hs = model(task.sample(24, 10**6)[0], return_hidden=True)
    h = hs.reshape(-1, 16).double().numpy()
    c = h - h.mean(0)
    ev, evec = np.linalg.eigh(c.T @ c)
    ev, evec = ev[::-1], evec[:, ::-1]
    k = int(np.searchsorted(np.cumsum(ev) / ev.sum(), 0.9) + 1)
    V = model.readout.detach().double().numpy()
    Pv = V.T @ np.linalg.pinv(V.T)  # projector onto the row space of V
    row = pr.set_index("subset").loc["-T_C->R"]
    nrm = np.linalg.norm(dW)
    assert int(row["n_pc"]) == k
    assert math.isclose(row["pc_overlap"], np.linalg.norm(dW @ evec[:, :k]) / nrm, rel_tol=1e-6)
    assert math.isclose(row["readout_overlap"], np.linalg.norm(Pv @ dW) / nrm, rel_tol=1e-6)
    assert math.isclose(row["manifold_overlap"], np.linalg.norm(h @ dW.T) / (nrm * np.linalg.norm(h)), rel_tol=1e-6)
    ok = pr.dropna()
    for col in ("pc_overlap", "readout_overlap", "manifold_overlap"):
        assert ((ok[col] >= 0) & (ok[col] <= 1 + 1e-12)).all(), col


def test_damage_predictors_rank_correlation_and_bootstrap():
    x = np.arange(20.0)
    df = pd.DataFrame({"dfvu": x ** 3, "removed_rel_T": x, "pc_overlap": -x, "readout_overlap": np.r_[x[:10], x[:10]],
                       "manifold_overlap": 0.5, "task": ["a"] * 10 + ["b"] * 10})
    out = damage_predictors(df, n_boot=200).set_index("predictor")
    assert out.loc["removed_rel_T", "rho"] == pytest.approx(1.0) and out.loc["removed_rel_T", "rho_lo"] == pytest.approx(1.0)
    assert out.loc["pc_overlap", "rho"] == pytest.approx(-1.0)
    assert out.loc["readout_overlap", "rho_lo"] < out.loc["readout_overlap", "rho"] < out.loc["readout_overlap", "rho_hi"]
    assert out.loc["manifold_overlap", "n"] == 20 and math.isnan(out.loc["manifold_overlap", "rho"])  # constant
    holes = df.assign(pc_overlap=np.r_[np.nan, -x[1:]])  # a row without overlaps leaves every predictor
    assert (damage_predictors(holes, n_boot=10)["n"] == 19).all()
    by = damage_predictors(df, n_boot=50, by="task")
    assert set(by["task"]) == {"a", "b"} and (by.loc[by.predictor == "readout_overlap", "rho"] > 0.99).all()


def test_converged_targets():
    assert converged("flipflop", 0.009) and not converged("flipflop", 0.011)
    assert converged("copy", 5.0, replay_acc=0.995) and not converged("copy", 0.0, replay_acc=0.9)
    assert not converged("copy", 0.0, None)


def test_compare_with_paper_verdicts():
    def summ_row(task, cons, hidden, subset, metric, mu, lo, hi, n=SCHUR_MIN_SEEDS, alpha=0.9):
        return {"task": task, "construction": cons, "hidden": hidden, "alpha": alpha, "subset": subset, "n": n,
                f"{metric}_mean": mu, f"{metric}_lo": lo, f"{metric}_hi": hi}
    rows = [summ_row("copy", "orthogonal", 72, s, "replay_acc", p, p - 0.01, p + 0.01) for s, p in PAPER_COPY.items()]
    rows[4] = summ_row("copy", "orthogonal", 72, "-T_C->R", "replay_acc", 0.95, 0.94, 0.96)  # far from 0.639
    rows += [summ_row("flipflop", "orthogonal", 64, "-T_C->R", "dfvu", 0.095, 0.09, 0.1),  # paper 0.0945
             summ_row("flipflop", "orthogonal", 64, "-T_CC", "dfvu", 0.3, 0.25, 0.4),     # paper 0.0496
             summ_row("flipflop", "orthogonal", 64, "-T_RR", "dfvu", 0.001, -0.001, 0.003)]  # paper ~0
    cmp = compare_with_paper(pd.DataFrame(rows))
    v = cmp.set_index(["table", "setting", "subset"])["verdict"]
    why = cmp.set_index(["table", "setting", "subset"])["reason"]
    assert v["copy", "copy orthogonal H=72 alpha=0.9", "-T_RR"] == "held"
    # far from the paper on the copy task, whose definition is inferred: not a miss
    assert v["copy", "copy orthogonal H=72 alpha=0.9", "-T_C->R"] == "not comparable"
    assert why["copy", "copy orthogonal H=72 alpha=0.9", "-T_C->R"].startswith("task definition differs")
    assert v["cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R"] == "held"  # inside the +-25% band
    assert v["cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_CC"] == "missed"
    assert v["cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_RR"] == "held"
    assert v["cross-task", "sine orthogonal H=64 alpha=0.9", "-T_CC"] == "not comparable"
    assert v["claim", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R"] == "missed"  # ours: -T_CC above, disjoint
    assert v["Table 1", "copy orthogonal H=72 alpha=0.85", "-T_C->R"] == "not comparable"
    # inclusion is not enough: the paper's value inside a wider interval that leaves the band is not held
    wide = compare_with_paper(pd.DataFrame([summ_row("flipflop", "orthogonal", 64, "-T_C->R", "dfvu", 0.1, 0.05, 0.2)]))
    row = wide.set_index(["table", "setting", "subset"]).loc[("cross-task", "flipflop orthogonal H=64 alpha=0.9", "-T_C->R")]
    assert row["verdict"] == "not comparable" and "too wide" in row["reason"]


def test_compare_with_paper_wide_intervals_and_unresolved_rankings_are_not_comparable():
    def summ_row(task, subset, mu, lo, hi, n=SCHUR_MIN_SEEDS):
        return {"task": task, "construction": "orthogonal", "hidden": 64, "alpha": 0.9, "subset": subset, "n": n,
                "dfvu_mean": mu, "dfvu_lo": lo, "dfvu_hi": hi}
    rows = [summ_row("sine", "-T_CC", 1.89, -21.4, 25.2),     # holds 2.08, but would hold almost anything
            summ_row("sine", "-T_C->R", 1.5, 1.2, 1.8),
            summ_row("sine", "-T_RR", 0.1, 0.0, 0.2)]
    cmp = compare_with_paper(pd.DataFrame(rows))
    v = cmp.set_index(["table", "setting", "subset"])
    row = v.loc[("cross-task", "sine orthogonal H=64 alpha=0.9", "-T_CC")]
    assert row["verdict"] == "not comparable" and "too wide" in row["reason"]
    claim = v.loc[("claim", "sine orthogonal H=64 alpha=0.9", "-T_CC")]  # -T_CC largest, overlapping -T_C->R
    assert claim["verdict"] == "not comparable" and "overlaps" in claim["reason"]
    two = compare_with_paper(pd.DataFrame([summ_row("sine", "-T_CC", 2.08, 2.0, 2.1, n=2)]))  # tight, but n < 3
    row = two.set_index(["table", "setting", "subset"]).loc[("cross-task", "sine orthogonal H=64 alpha=0.9", "-T_CC")]
    assert row["verdict"] == "not comparable" and "too few seeds" in row["reason"]


def test_paper_numbers_need_ten_converged_seeds():
    """A tight interval inside the band holds at SCHUR_MIN_SEEDS converged seeds and not one fewer (the
    paper's 3 included); a replicate reading may lower the minimum explicitly. Rankings likewise."""
    def rows(n):
        return pd.DataFrame([{"task": "sine", "construction": "orthogonal", "hidden": 64, "alpha": 0.9, "subset": s,
                              "n": n, "dfvu_mean": mu, "dfvu_lo": mu - 0.05, "dfvu_hi": mu + 0.05}
                             for s, mu in (("-T_CC", 2.08), ("-T_C->R", 1.0), ("-T_RR", 0.1))])
    key = ("cross-task", "sine orthogonal H=64 alpha=0.9", "-T_CC")
    claim = ("claim", "sine orthogonal H=64 alpha=0.9", "-T_CC")  # the paper: -T_CC damages most on sine
    for n, want in ((SCHUR_MIN_SEEDS, "held"), (SCHUR_MIN_SEEDS - 1, "not comparable"), (3, "not comparable")):
        v = compare_with_paper(rows(n)).set_index(["table", "setting", "subset"])
        assert v.loc[key, "verdict"] == want and v.loc[claim, "verdict"] == want, (n, v.loc[key, "reason"])
        if want == "not comparable":
            assert f"too few seeds (n = {n} < {SCHUR_MIN_SEEDS} converged)" in v.loc[key, "reason"]
            assert "too few seeds" in v.loc[claim, "reason"]
    low = compare_with_paper(rows(3), min_seeds=3).set_index(["table", "setting", "subset"])
    assert low.loc[key, "verdict"] == "held" and low.loc[claim, "verdict"] == "held"
