"""Error counting of the calibration grid and its seed replay, on hand-made tables and ensembles."""
import pandas as pd
import pytest
import torch

import symfast as sf
from symfast.readout import calibration as c
from symfast.nn.fields import Ensemble


def test_score_table_and_rates_count_errors():
    shapes = [sf.shapes.square(), sf.shapes.polygon([[0.5, 0], [0, 0.4], [-0.3, -0.2]], name="blob")]
    rows = [  # (shape, element, liftable, observed)
        ("square", "r90", True, True), ("square", "m45", True, False),  # true: one hit, one miss (FN)
        ("square", "r60", True, False), ("square", "r120", False, False),  # false: correct; not liftable: skipped
        ("blob", "r0", True, True), ("blob", "r180", True, True),  # blob: r180 is a false positive
    ]
    table = pd.DataFrame(rows, columns=["shape", "element", "liftable", "observed"]).assign(pe="dyadic")
    t = c.score_table(table, shapes)
    assert t["error"].tolist() == ["", "FN", "", "", "FP"]
    r = c.rates(t.assign(seeds=8, steps=300, points=1024)).iloc[0]
    assert (r["FPR"], r["FNR"]) == (1 / 2, 1 / 3)
    assert (r["cells_with_FP"], r["cells_with_FN"], r["n_cells"]) == (0.5, 0.5, 2)


def test_first_seeds_and_replay_trainer():
    pe = sf.DyadicAxisPE(K=2)
    B = 6
    weights = [torch.randn(B, pe.dim, 4), torch.randn(B, 4, 1)]
    biases = [torch.zeros(B, 4), torch.zeros(B, 1)]
    pool = Ensemble(pe, weights, biases, "relu", ["a"] * 3 + ["b"] * 3, [0, 1, 2] * 2)
    sub = c.first_seeds(pool, 2)
    assert sub.shapes == ["a", "a", "b", "b"] and sub.seeds == [0, 1, 0, 1]
    got = c.replay_trainer(pool)(["b"], pe, seeds=[2, 1], steps=1, points=1)
    assert got.seeds == [2, 1] and torch.equal(got.weights[0][0], pool.weights[0][5])
    with pytest.raises(ValueError, match="lacks"):
        c.replay_trainer(pool)(["a"], pe, seeds=[3], steps=1, points=1)
    later = pool.subset(range(B))
    later.weights[0].add_(1)
    by_steps = c.replay_trainer({10: pool, 20: later})
    assert torch.equal(by_steps(["a"], pe, seeds=[1], steps=20, points=1).weights[0][0], pool.weights[0][1] + 1)
    with pytest.raises(ValueError, match="snapshots at"):
        by_steps(["a"], pe, seeds=[1], steps=15, points=1)


def test_train_snapshots_are_one_run(tmp_path):
    kw = dict(hidden=(8,), points=32, backend="reference", progress=False)
    snaps = c.train_snapshots(["square"], sf.DyadicAxisPE(2), seeds=2, steps=[6, 3], directory=tmp_path, **kw)
    once = sf.fit_sdf(["square"], sf.DyadicAxisPE(2), seeds=2, steps=6, **kw)
    assert sorted(snaps) == [3, 6] and torch.equal(snaps[6].weights[0], once.weights[0])
    assert torch.equal(snaps[3].losses, once.losses[:3])
    again = c.train_snapshots(["square"], sf.DyadicAxisPE(2), seeds=2, steps=[3, 6], directory=tmp_path, **kw)
    assert torch.equal(again[3].weights[1], snaps[3].weights[1])  # read back from the directory
    with pytest.raises(ValueError, match="holds another run"):
        c.train_snapshots(["square"], sf.DyadicAxisPE(2), seeds=[5, 6], steps=[3], directory=tmp_path, **kw)


def test_grid_candidates_cover_every_lift_and_truth():
    cands = c.candidates_for(c.grid_shapes())
    for s in c.grid_shapes():
        assert all(g in cands for g in s.group), s.name
    for pe in c.grid_encodings():
        assert sum(pe.lift(g) is not None for g in cands) >= 2


def _orbit_ensemble(pe, group, shape, seeds=3, hidden=8):
    """First layers [rho(h) W]_h: each model's own Gram is exactly invariant under `group`, nothing more."""
    g = torch.Generator().manual_seed(0)
    w0 = []
    for _ in range(seeds):
        w = torch.randn(pe.dim, hidden, generator=g, dtype=torch.float64)
        w0.append(torch.cat([torch.as_tensor(pe.lift(e)) @ w for e in group], dim=1))
    H = w0[0].shape[1]
    weights = [torch.stack(w0), torch.randn(seeds, H, 1, generator=g, dtype=torch.float64)]
    biases = [torch.zeros(seeds, H, dtype=torch.float64), torch.zeros(seeds, 1, dtype=torch.float64)]
    return Ensemble(pe, weights, biases, "relu", [shape] * seeds, list(range(seeds)))


def test_model_separation_ranks_each_models_own_scores():
    pe, rect = sf.DyadicAxisPE(K=2), sf.shapes.rectangle()
    exact = c.model_separation(_orbit_ensemble(pe, sf.dihedral(2), "rectangle"), [rect])
    assert len(exact) == 3 and (exact["auc"] == 1.0).all() and exact["separated"].all()
    # D4-invariant models labelled rectangle: the false r90 and m45 score 0 like the true elements
    tied = c.model_separation(_orbit_ensemble(pe, sf.dihedral(4), "rectangle"), [rect])
    assert (tied["auc"] == 0.5).all() and not tied["separated"].any()
    # a shape whose only liftable true symmetry is the identity gives no row
    assert c.model_separation(_orbit_ensemble(pe, sf.dihedral(2), "blob"), [sf.shapes.polygon(
        [[0.55, 0.05], [0.1, 0.5], [-0.5, 0.2], [-0.2, -0.45]], name="blob")]).empty
