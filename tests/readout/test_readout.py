
import pytest
import torch

import symfast as sf
from symfast.readout.ensemble import Ensemble
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
