
import numpy as np
import pytest
import torch

import symfast as sf
from symfast.nn.fields import Ensemble
from symfast.readout.readout import readout


def planted_ensemble(pe, group, shape, seeds=6, H=24, seed=0):
    """First layers whose rows form orbits under rho(group): W1^T W1 is exactly invariant."""
    g = torch.Generator().manual_seed(seed)
    rhos = [torch.as_tensor(pe.lift(e)) for e in group]
    common = torch.randn(H // len(rhos), pe.dim, generator=g, dtype=torch.float64)
    w0 = []
    for _ in range(seeds):  # seeds share a common part (the "signal") plus seed noise
        base = common + 0.1 * torch.randn(common.shape, generator=g, dtype=torch.float64)
        w1 = torch.cat([base @ r for r in rhos])  # [H, d], paper convention
        w0.append(w1.T)
    # output weights equal across each orbit, so deeper prefixes stay invariant too
    out = torch.randn(seeds, H // len(rhos), 1, dtype=torch.float64, generator=g).repeat(1, len(rhos), 1)
    weights = [torch.stack(w0), out]
    biases = [torch.zeros(seeds, H, dtype=torch.float64), torch.zeros(seeds, 1, dtype=torch.float64)]
    return Ensemble(pe, weights, biases, "relu", [shape] * seeds, list(range(seeds)))


def test_planted_symmetry_scores_zero():
    pe = sf.TriAxisPE()
    ens = planted_ensemble(pe, sf.dihedral(3), "triangle")
    r = readout(ens, sweep=0)
    t = r.table.set_index("element")
    d3 = {g.name for g in sf.dihedral(3)}
    assert t.loc[list(d3), "score"].max() < 1e-12
    assert t.drop(index=list(d3))["score"].min() > 0.05
    assert {g.name for g in r.observed("triangle")} == d3
    assert r.violations.empty
    for obs in ("gram_bias", "prefix2"):
        assert readout(ens, observable=obs, sweep=0).table.set_index("element").loc[list(d3), "score"].max() < 1e-12


def test_violation_reported_for_false_symmetry():
    pe = sf.DyadicAxisPE()
    ens = planted_ensemble(pe, sf.dihedral(4), "triangle")  # D4-symmetric weights, labelled triangle
    r = readout(ens, sweep=0)
    assert {"r90", "m45"} <= set(r.violations["element"])


def test_per_model_aggregate_and_sweep():
    pe = sf.DyadicAxisPE()
    ens = planted_ensemble(pe, sf.dihedral(4), "square")
    with pytest.warns(UserWarning, match="aggregate='model' is not calibrated"):
        r = readout(ens, aggregate="model", sweep=8)
    assert {g.name for g in r.observed("square")} == {g.name for g in sf.dihedral(4)}
    sw = r.sweep.set_index("element")
    assert sw.loc["r90", "score"] < 1e-12 and sw.loc["r45", "lift_residual"] > 0.3
    assert not sw.loc["r45", "liftable"]


def test_readout_errors():
    ens = planted_ensemble(sf.DyadicAxisPE(), sf.dihedral(4), "square")
    with pytest.raises(ValueError, match="observable"):
        readout(ens, observable="hessian")
    with pytest.raises(ValueError, match="aggregate"):
        readout(ens, aggregate="median")
    with pytest.raises(ValueError, match="not in this readout"):
        readout(ens, sweep=0).observed("circle")
    ens.weights[0][0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        readout(ens)


def commuting_ensemble(pe, g, shape, seeds=8, eps=0.4, noise=0.02, seed=0):
    """First layers with Gram I + eps (R + R^T) + seed noise, R the best orthogonal lift of g.

    R^T (R + R^T) R = R^T + R for orthogonal R, so the Gram is exactly invariant under R:
    the element passes under its best lift whether or not the encoding lifts it exactly."""
    gen = torch.Generator().manual_seed(seed)
    R = torch.as_tensor(pe.lift_lstsq(g, orthogonal=True)[0])
    d = pe.dim
    evals, evecs = torch.linalg.eigh(torch.eye(d, dtype=torch.float64) + eps * (R + R.T))
    root = evecs @ torch.diag(evals.clamp_min(0).sqrt()) @ evecs.T  # [d, d], root^T root = Gram
    w0 = []
    for _ in range(seeds):
        u, _ = torch.linalg.qr(torch.randn(d, d, generator=gen, dtype=torch.float64))  # hidden-side rotation
        w1 = u @ (root + noise * torch.randn(d, d, generator=gen, dtype=torch.float64))  # [H = d, d]
        w0.append(w1.T)
    weights = [torch.stack(w0), torch.randn(seeds, d, 1, generator=gen, dtype=torch.float64)]
    biases = [torch.zeros(seeds, d, dtype=torch.float64), torch.zeros(seeds, 1, dtype=torch.float64)]
    return Ensemble(pe, weights, biases, "relu", [shape] * seeds, list(range(seeds)))


def test_decision_columns_and_alpha():
    ens = planted_ensemble(sf.TriAxisPE(), sf.dihedral(3), "triangle")
    r = readout(ens, sweep=0, alpha=0.01)
    t = r.table.set_index("element")
    for col in ("p_value", "p_adjusted", "z", "threshold", "margin", "approx_observed", "p_adjusted_all"):
        assert col in t
    d3 = [g.name for g in sf.dihedral(3)]
    false = t.drop(index=d3)
    assert (t.loc[d3, "margin"] > 0).all() and (false.loc[false["liftable"], "margin"] < 0).all()
    assert false.loc[~false["liftable"], "margin"].isna().all()  # G_obs tests exact lifts only
    assert (false.loc[false["liftable"], "p_adjusted"] < 0.01).all() and (t["alpha"] == 0.01).all()
    assert (false["p_adjusted_all"] < 0.01).all() and not false["approx_observed"].any()
    with pytest.raises(ValueError, match="alpha"):
        readout(ens, sweep=0, alpha=0)


def test_non_liftable_true_symmetry_passing_under_its_best_lift_is_reported():
    pe = sf.DyadicAxisPE()  # lifts D4 only; the triangle's r120 has no exact lift
    ens = commuting_ensemble(pe, sf.rotation(2 * np.pi / 3), "triangle")
    r = readout(ens, sweep=0)
    t = r.table.set_index("element")
    assert not t.loc["r120", "liftable"] and t.loc["r120", "approx_observed"]
    assert not t.loc["r120", "observed"]  # G_obs still needs an exact lift
    s = r.summary().iloc[0]
    assert "r120" in s["passes_best_lift"].split() and "r120" not in s["hidden_under_best_lift"].split()
    assert "r120" in r.report().split("passes under its best lift:")[1]


def test_planted_d4_hides_hexagon_rotations_under_their_best_lift():
    pe = sf.DyadicAxisPE()
    r = readout(planted_ensemble(pe, sf.dihedral(4), "hexagon"), sweep=0)
    s = r.summary().iloc[0]
    assert {"r60", "r120"} <= set(s["hidden_under_best_lift"].split())
    assert "hidden even under their best orthogonal lift" in r.report()
    assert not r.table.set_index("element").loc[["r60", "r120"], "approx_observed"].any()


def test_prefix_grams_side_by_side_and_separation():
    pe = sf.TriAxisPE()
    ens = planted_ensemble(pe, sf.dihedral(3), "triangle")
    r = readout(ens, observable="prefixes", sweep=0)
    assert list(dict.fromkeys(r.table["observable"])) == ["prefix1", "prefix2"]
    with pytest.raises(ValueError, match="several values"):
        r.observed("triangle")
    assert names(r.observed("triangle", observable="prefix1")) == names(sf.dihedral(3))
    # the planted output layer is seed noise, so the depth-2 prefix keeps D3 but separates less
    assert names(r.observed("triangle", observable="prefix2")) >= names(sf.dihedral(3))
    sep = r.separation().set_index("observable")
    assert sep.loc["prefix1", "min_gap_z"] > 3 and sep.loc["prefix1", "best"] and not sep.loc["prefix2", "best"]


def test_sweep_normalised_by_lift_only_null():
    pe = sf.DyadicAxisPE()
    r = readout(planted_ensemble(pe, sf.dihedral(4), "square"), sweep=24)
    sw = r.sweep.set_index("element")
    sw = sw.drop(index="r0")  # identity: score and null both 0
    assert (sw["score_null"] > 0.1).all()
    np.testing.assert_allclose(sw["score_norm"], sw["score"] / sw["score_null"])
    assert sw.loc["r90", "score_norm"] < 1e-9  # exact symmetry: a dip to zero
    assert sw.loc["r15", "score_norm"] > 0.7  # small rotation, not a symmetry: no dip
    r.plot_sweep(None)


@pytest.fixture(scope="module")
def trained():
    """Small but real training run (8 seeds): the paper's PE-dependent pattern must show."""
    kw = dict(seeds=8, steps=300, points=1024, progress=False)  # fused kernels (checked against reference elsewhere)
    return {name: sf.fit_sdf(["triangle", "square"], pe, **kw)
            for name, pe in (("triaxis", sf.TriAxisPE()), ("dyadic", sf.DyadicAxisPE()),
                             ("rff", sf.RandomFourierPE()))}


def names(group):
    return {g.name for g in group}


def test_trained_readout_reproduces_paper_pattern(trained):
    r = readout(list(trained.values()), sweep=0)
    assert names(r.observed("triangle", pe="triaxis")) == names(sf.dihedral(3))
    assert names(r.observed("triangle", pe="dyadic")) == {"r0", "m0"}
    assert names(r.observed("square", pe="dyadic")) == names(sf.dihedral(4))
    assert names(r.observed("square", pe="rff")) <= {"r0", "r180"}
    assert names(r.observed("triangle", pe="rff")) <= {"r0", "r180"}
    assert r.violations.empty


def test_readout_warns_below_the_calibrated_budget():
    """4 seeds x 30 steps of the triangle under DyadicAxisPE observe all of D4: the readout says its
    error rates were not measured there, naming the calibrated minimum."""
    import warnings

    from symfast.readout.decision import CALIBRATED_SEEDS, CALIBRATED_STEPS

    pool = sf.fit_sdf(["triangle"], sf.DyadicAxisPE(), seeds=CALIBRATED_SEEDS, steps=30, points=64, hidden=(8,))
    few = pool.subset(list(range(4)))
    with pytest.warns(UserWarning, match=f"4 seeds per shape and 30 training steps; .* from {CALIBRATED_SEEDS} "
                                         f"seeds x {CALIBRATED_STEPS} steps up"):
        sf.readout(few, sweep=0, num_null=8)
    with pytest.warns(UserWarning, match="30 training steps"):
        sf.readout(pool, sweep=0, num_null=8)
    pool.config["steps"] = CALIBRATED_STEPS  # the check reads the recorded budget, not the weights
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sf.readout(pool, sweep=0, num_null=8)


@pytest.mark.parametrize("seeds", [1, 2])
def test_fewer_than_three_models_decide_nothing_and_the_readout_says_so(seeds):
    """With one or two models no null exists: every p-value is missing, nothing is observed (not even
    the identity), and the readout warns instead of returning a silent empty G_obs."""
    from symfast.readout.readout import MIN_MODELS_PER_SHAPE

    assert MIN_MODELS_PER_SHAPE == 3
    ens = planted_ensemble(sf.DyadicAxisPE(), sf.dihedral(4), "square", seeds=seeds, H=8)
    with pytest.warns(UserWarning, match=f"square/dyadic: {seeds} model\\(s\\) give no usable noise floor"):
        r = readout(ens, sweep=0, num_null=8)
    assert r.table["p_adjusted"].isna().all() and not r.table["observed"].any()
    three = planted_ensemble(sf.DyadicAxisPE(), sf.dihedral(4), "square", seeds=3, H=8)
    assert "r0" in readout(three, sweep=0, num_null=8).observed("square").names
