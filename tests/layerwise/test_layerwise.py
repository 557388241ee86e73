"""Layerwise equivariance: planted recovery, homomorphism, identifiable reduction, projection, matching."""
import numpy as np
import pytest
import torch

import symfast as sf
from symfast.testing import assert_close
from symfast.layerwise import (MLP, data_errors, homomorphism_check, planted_mlp, project_equivariant,
                               projection_report)
from symfast.layerwise.data import flip_matrix, flip_permutation, from_dataset, load_local
from symfast.layerwise.reduction import identifiable_submodel, near_linear_fraction
from symfast.ops.matching.reference import matching_scores_reference
from symfast.layerwise.projection import closure, equivariance_error


def grid_reps(n=4):
    """Horizontal flip and rotation by 90 degrees of an n x n image (pixel permutations)."""
    d = n * n
    flip = flip_matrix((1, n, n))
    rot = np.zeros((d, d))
    for r in range(n):
        for c in range(n):
            rot[c * n + (n - 1 - r), r * n + c] = 1.0
    return flip, rot


def d4_elements():
    flip, rot = grid_reps()
    chains = closure([[flip], [rot]])
    return {f"e{k}": c[0] for k, c in enumerate(chains)}


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_planted_flip_recovered_exactly(activation):
    flip, _ = grid_reps()
    net, chains = planted_mlp([16, 24, 20, 3], flip, activation=activation, seed=3)
    res = sf.recover_latent_actions(net.layers, flip, activation=activation)
    assert res.mode == ("sign" if activation == "tanh" else "scale")
    assert res.errors.max() < 1e-12, res.errors
    assert res.bias_errors.max() < 1e-12
    for l, act in enumerate(res.actions):
        np.testing.assert_allclose(act.matrix, chains[0][l + 1], atol=1e-12, err_msg=f"layer {l + 1}")
        assert act.residual.max() < 1e-10
    assert (res.baseline[:-1] > 0.8).all(), res.baseline  # random permutations are far off
    assert res.homomorphism.ok and len(res.homomorphism.relations) == 2  # flip^2 = e on 2 hidden layers
    counts = res.counts()
    for l, c in counts.iterrows():
        diag = np.diag(chains[0][l + 1])
        assert c["fixed"] == int((diag > 0).sum()) and c["antisymmetric"] == int((diag < 0).sum())
        assert c["fixed"] + c["antisymmetric"] + c["cycled"] == 24 if l == 0 else 20
    if activation == "tanh":
        assert counts.iloc[0]["antisymmetric"] > 0  # the sign character is planted for odd activations


def test_planted_d4_group_and_homomorphism():
    flip, rot = grid_reps()
    net, _ = planted_mlp([16, 24, 18, 16], [flip, rot], rho_out=[flip, rot], activation="tanh", seed=1)
    elems = d4_elements()
    outs = {k: v for k, v in elems.items()}  # output rep = input rep (an equivariant map)
    res = sf.recover_latent_actions(net.to_sequential(torch.float64), elems, outs)
    assert len(res.names) == 8
    assert res.errors.max() < 1e-12
    hom = res.homomorphism
    assert hom.ok and len(hom.relations) > 64
    # corrupt one recovered action: swap two neurons of element e1 on layer 1
    bad = res["e1"].actions[0]
    bad.index[[0, 1]] = bad.index[[1, 0]]
    hom2 = homomorphism_check(res.elements)
    assert not hom2.ok
    assert {f["layer"] for f in hom2.failures} == {1}
    assert all("e1" in f["relation"] for f in hom2.failures)


def test_sequential_and_list_agree_and_data_errors():
    flip, _ = grid_reps()
    net, _ = planted_mlp([16, 12, 4], flip, activation="tanh", seed=5)
    seq = net.to_sequential(torch.float64)
    x = np.random.default_rng(0).normal(size=(50, 16))
    a = sf.recover_latent_actions(seq, flip, data=x)
    b = sf.recover_latent_actions(net.layers, flip, activation="tanh")
    np.testing.assert_array_equal(a.actions[0].index, b.actions[0].index)
    assert a.data_errors.shape == (2,) and a.data_errors.max() < 1e-12
    # a generic (non-equivariant) net: weight and data errors both large
    rng = np.random.default_rng(1)
    gen = [(rng.normal(size=(12, 16)), rng.normal(size=12)), (rng.normal(size=(4, 12)), rng.normal(size=4))]
    r = sf.recover_latent_actions(gen, flip, activation="tanh", data=x)
    assert r.errors[0] > 0.3 and r.data_errors[-1] > 0.1


def test_noisy_planted_and_projection():
    flip, _ = grid_reps()
    net, chains = planted_mlp([16, 24, 20, 3], flip, activation="tanh", seed=2)
    rng = np.random.default_rng(0)
    noisy = net.with_layers([(W + 0.05 * np.linalg.norm(W) / np.sqrt(W.size) * rng.normal(size=W.shape), b)
                             for W, b in net.layers])
    res = sf.recover_latent_actions(noisy, flip)
    for l, act in enumerate(res.actions):
        np.testing.assert_array_equal(act.matrix, chains[0][l + 1])  # recovered despite 5% noise
    assert 0.01 < res.errors[0] < 0.3
    x = rng.normal(size=(64, 16))
    rep = projection_report(noisy, res, x, flip, loss_fn=lambda y: float(np.abs(y - net(x)).mean()))
    assert rep["equivariance_before"] > 1e-3 and rep["equivariance_after"] < 1e-12
    assert rep["equivariance_random"] < 1e-12  # any representation gives equivariance ...
    assert rep["loss_after"] < rep["loss_before"] < rep["loss_random"]  # ... but only the right one keeps f
    p2 = project_equivariant(rep["projected"], res)  # a projection is idempotent
    for (W1, _), (W2, _) in zip(rep["projected"].layers, p2.layers):
        np.testing.assert_allclose(W1, W2, atol=1e-12)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_identifiable_reduction_preserves_function(activation):
    rng = np.random.default_rng(0)
    W1, b1 = rng.normal(size=(10, 6)), rng.normal(size=10)
    c = -1.0 if activation == "tanh" else 2.5
    W1[3], b1[3] = c * W1[1], c * b1[1]  # duplicate
    W1[5] = 0.0  # constant neuron
    W2, b2 = rng.normal(size=(7, 10)), rng.normal(size=7)
    W2[:, 7] = 0.0  # no outgoing weights
    W1[8], b1[8] = -np.abs(W1[8]), -10.0  # ReLU: never active on positive data
    W3, b3 = rng.normal(size=(2, 7)), rng.normal(size=2)
    x = np.abs(rng.normal(size=(100, 6)))
    net = MLP([(W1, b1), (W2, b2), (W3, b3)], activation)
    red = identifiable_submodel(net, data=x)
    reasons = {i: r.split()[0] for i, r in red.removed[0]}
    assert reasons[3] == "duplicate-of-1" and reasons[5] == "constant" and reasons[7] == "zero-out"
    if activation == "relu":
        assert reasons[8] == "dead-on-data"
    assert red.model.sizes[:2] == [6, 10 - len(reasons)]
    assert red.model.sizes[2] == 7 - len(red.removed[1])
    # nothing in layer 2 is redundant by construction, except ReLU units silent on this data
    assert all(r == "dead-on-data" for _, r in red.removed[1])
    z2 = net.hidden(x, pre=True)[1]
    assert len(red.removed[1]) == (int((z2.max(0) <= 0).sum()) if activation == "relu" else 0)
    assert red.function_error < 1e-12
    np.testing.assert_allclose(red.model(x), net(x), atol=1e-12)


def test_near_linear_flag():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 8))
    small = [(0.01 * rng.normal(size=(16, 8)), np.zeros(16)), (rng.normal(size=(2, 16)), np.zeros(2))]
    big = [(5 * rng.normal(size=(16, 8)), np.zeros(16)), (rng.normal(size=(2, 16)), np.zeros(2))]
    assert near_linear_fraction(small, x, "tanh")[0] > 0.99
    assert near_linear_fraction(big, x, "tanh")[0] < 0.2
    assert near_linear_fraction([(np.abs(small[0][0]), np.ones(16)), small[1]], np.abs(x), "relu")[0] == 1.0


def test_bad_inputs():
    flip, _ = grid_reps()
    rng = np.random.default_rng(0)
    layers = [(rng.normal(size=(8, 16)), rng.normal(size=8)), (rng.normal(size=(2, 8)), rng.normal(size=2))]
    with pytest.raises(ValueError, match="not orthogonal"):
        sf.recover_latent_actions(layers, 2 * flip)
    with pytest.raises(ValueError, match=r"rho_in must be \[16, 16\]"):
        sf.recover_latent_actions(layers, np.eye(4))
    with pytest.raises(ValueError, match=r"layer 0 has 8 outputs"):
        sf.recover_latent_actions([layers[0], (rng.normal(size=(2, 7)), np.zeros(2))], flip)
    with pytest.raises(ValueError, match=r"b\[1\] must be \[2\]"):
        sf.recover_latent_actions([layers[0], (layers[1][0], np.zeros(3))], flip)
    nan = [(layers[0][0].copy(), layers[0][1]), layers[1]]
    nan[0][0][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"W\[0\] has NaN"):
        sf.recover_latent_actions(nan, flip)
    with pytest.raises(ValueError, match="rho_out must be"):
        sf.recover_latent_actions(layers, flip, np.eye(3))
    with pytest.raises(ValueError, match="no axis of size d"):
        sf.matching_scores(rng.normal(size=(3, 8, 5)), [np.eye(6)])
    with pytest.raises(ValueError, match="H == d"):
        sf.matching_scores(rng.normal(size=(3, 6, 6)), [np.eye(6)])
    with pytest.raises(ValueError, match="NaN"):
        sf.matching_scores(np.full((2, 8, 6), np.nan), [np.eye(6)])
    with pytest.raises(ValueError, match="mode must be one of"):
        sf.matching_scores(rng.normal(size=(3, 8, 6)), [np.eye(6)], mode="orthogonal")


@pytest.mark.parametrize("general", [False, True], ids=["signed-perm-lifts", "general-lifts"])
@pytest.mark.parametrize("mode", ["sign", "perm", "scale"])
def test_matching_scores_match_reference(mode, general):
    rng = np.random.default_rng(0)
    pe = sf.DyadicAxisPE(K=3)
    lifts = {g.name: pe.lift(g) for g in sf.dihedral(4)}  # signed permutations: the fused C++ kernel
    if general:  # a non-permutation orthogonal lift: the chunked GEMM path
        lifts["random_orthogonal"] = np.linalg.qr(rng.normal(size=(pe.dim, pe.dim)))[0]
    W = rng.normal(size=(5, 7, pe.dim))  # [M, H, d]
    b = rng.normal(size=(5, 7))
    ref = matching_scores_reference(W, list(lifts.values()), biases=b, mode=mode)
    fast = sf.matching_scores(torch.as_tensor(W), lifts, biases=b, mode=mode)
    assert_close("per_model", torch.as_tensor(ref), torch.as_tensor(fast.per_model))
    np.testing.assert_allclose(fast.mean, ref.mean(0), atol=1e-12)
    dh = sf.matching_scores(W.transpose(0, 2, 1), lifts, mode=mode)  # fan-in-first layout
    hd = sf.matching_scores(W, lifts, mode=mode)
    np.testing.assert_allclose(dh.per_model, hd.per_model, atol=1e-12)
    assert fast.per_model[:, 0].max() < 1e-7  # identity element
    sci = sf.matching_scores(W, lifts, biases=b, mode=mode, backend="reference")
    assert_close("per_model_scipy", torch.as_tensor(ref), torch.as_tensor(sci.per_model))
    f32 = sf.matching_scores(torch.as_tensor(W, dtype=torch.float32), lifts, biases=b, mode=mode)
    assert_close("per_model_f32", torch.as_tensor(ref, dtype=torch.float32), torch.as_tensor(f32.per_model,
                 dtype=torch.float32), rtol=1e-4, atol=1e-5)


def test_matching_scores_planted_first_layer():
    """A first layer built as W rho(g) = P W for the D4 lifts scores 0 on D4 and > 0 elsewhere."""
    pe = sf.DyadicAxisPE(K=3)
    gens = [pe.lift(sf.rotation(np.pi / 2)), pe.lift(sf.reflection(0.0))]
    net, _ = planted_mlp([pe.dim, 32, 1], gens, activation="tanh", seed=0)
    W1 = net.layers[0][0]
    lifts = {g.name: pe.lift(g) for g in sf.dihedral(4)}
    s = sf.matching_scores(np.stack([W1, W1]), lifts)
    assert s.per_model.max() < 1e-12 and s.per_model.shape == (2, 8)
    noise = sf.matching_scores(np.random.default_rng(0).normal(size=(2, 32, pe.dim)), lifts)
    assert noise.mean[1:].min() > 0.5


def test_data_adapters(tmp_path):
    p = flip_permutation((3, 2, 4))
    np.testing.assert_array_equal(p[p], np.arange(24))
    imgs = [(np.full((2, 4, 3), 255, np.uint8), 1), (np.zeros((2, 4, 3), np.uint8), 0)]
    d = from_dataset(imgs)
    assert d.shape == (3, 2, 4) and d.x.shape == (2, 24) and d.x.max() == 1.0 and list(d.y) == [1, 0]
    with pytest.raises(FileNotFoundError, match="never downloads"):
        load_local("cifar10", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="unknown local dataset"):
        load_local("imagenet", str(tmp_path))
    from symfast.layerwise.data import load_npz

    np.savez(tmp_path / "d.npz", images=np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4), labels=[3, 4])
    d = load_npz(str(tmp_path / "d.npz"))
    assert d.shape == (1, 3, 4) and d.x.shape == (2, 12) and list(d.y) == [3, 4]
    np.testing.assert_allclose(d.x[:, flip_permutation(d.shape)].reshape(2, 3, 4), d.x.reshape(2, 3, 4)[:, :, ::-1])


@pytest.mark.parametrize("n", [1, 2, 5, 33])
def test_batched_assignment_cpp_matches_scipy(n):
    from symfast.ops.matching import assign

    if not sf.cpp_available():
        pytest.skip("symfast._C not built")
    rng = np.random.default_rng(n)
    cost = rng.random((60, n, n))
    cost[::3] = np.round(cost[::3] * 3)  # ties
    cost[1::3] = -rng.integers(0, 50, (20, n, n))  # negative integers
    cost[2] = np.eye(n)[::-1] * -1  # row minima distinct: the fast path
    ref = assign(cost, "reference")
    fast = assign(cost, "cpu")
    rows = np.arange(n)
    for p in range(len(cost)):
        assert sorted(fast[p]) == list(range(n))
        assert abs(cost[p][rows, fast[p]].sum() - cost[p][rows, ref[p]].sum()) < 1e-9, p
    with pytest.raises(ValueError, match="NaN"):
        assign(np.full((1, 3, 3), np.nan), "cpu")


def test_group_projection_makes_all_elements_exact():
    flip, rot = grid_reps()
    net, _ = planted_mlp([16, 24, 3], [flip, rot], activation="relu", seed=4)
    rng = np.random.default_rng(1)
    noisy = net.with_layers([(W * (1 + 0.03 * rng.normal(size=W.shape)), b) for W, b in net.layers])
    elems = d4_elements()
    res = sf.recover_latent_actions(noisy, elems)
    assert res.homomorphism.ok and 0 < res.errors[:, 0].max() < 0.2
    proj = project_equivariant(noisy, res)
    x = rng.normal(size=(32, 16))
    for k, R in elems.items():
        if not np.array_equal(R, np.eye(16)):
            assert equivariance_error(noisy, x, R) > 1e-4
        assert equivariance_error(proj, x, R) < 1e-12, k
    with pytest.raises(ValueError, match="data must be"):
        data_errors(noisy, res["e1"], np.zeros((3, 5)))


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_bridge_compare_observables_on_planted_ensemble(activation):
    """Planted D2 (rectangle) first layers: matching is exactly 0 on D2 and > 0 off it. With ReLU the
    planted hidden action is a *scaled* permutation D P D^-1: matching ("scale") still sees it,
    the Gram W1^T W1 does not (P^T P != I), which is what matching adds to the readout."""
    from symfast.readout.matching import compare_observables, separation

    pe = sf.DyadicAxisPE(K=2)
    gens = [pe.lift(sf.rotation(np.pi)), pe.lift(sf.reflection(0.0))]
    W1s = [planted_mlp([pe.dim, 16, 1], gens, activation=activation, seed=s)[0].layers[0] for s in range(3)]
    weights = [torch.stack([torch.as_tensor(W.T) for W, _ in W1s]), torch.randn(3, 16, 1, dtype=torch.float64)]
    biases = [torch.stack([torch.as_tensor(b) for _, b in W1s]), torch.zeros(3, 1, dtype=torch.float64)]
    ens = sf.Ensemble(pe, weights, biases, "relu", ["rectangle"] * 3, [0, 1, 2])
    mode = "sign" if activation == "tanh" else "scale"
    df = compare_observables(ens, "rectangle", sf.dihedral(4), modes=(mode,))
    true = df[df["true_symmetry"]]
    assert set(true["element"]) == {"r0", "r180", "m0", "m90"}
    assert true[f"match_{mode}"].max() < 1e-12 and true[f"match_{mode}_bias"].max() < 1e-12
    assert df.loc[~df["true_symmetry"], f"match_{mode}"].min() > 0.05
    assert separation(df, f"match_{mode}") > 0
    assert (df[f"match_{mode}_init"][df["element"] != "r0"] > 0.3).all()
    if activation == "tanh":  # orthogonal hidden action: the Gram is exactly invariant too
        assert true["gram_model"].max() < 1e-12
    else:  # ReLU rescaling: the Gram misses the planted symmetry
        assert true.loc[true["element"] != "r0", "gram_model"].min() > 0.05


def test_results_follow_the_readout_conventions_table_counts_report():
    """`.table` is a DataFrame attribute and `counts()` a DataFrame (as `Readout.table` / `.counts()`),
    `report()` / `str()` the text; the earlier `table()` call and list/dict indexing still answer,
    with a DeprecationWarning."""
    import pickle
    import warnings

    import pandas as pd

    flip, rot = grid_reps()
    net, _ = planted_mlp([16, 24, 18, 16], [flip], rho_out=[flip], activation="tanh", seed=1)
    x = torch.as_tensor(np.random.default_rng(0).normal(size=(32, 16)))
    res = sf.recover_latent_actions(net.to_sequential(torch.float64), flip, flip, data=x)
    t = res.table
    assert isinstance(t, pd.DataFrame) and not callable(pd.DataFrame(t))
    assert list(t.columns) == ["element", "layer", "error", "baseline", "bias_error", "data_error", "fixed",
                               "antisymmetric", "cycled", "cycles", "unmatched"]
    assert t["layer"].tolist() == [1, 2, 3] and t["unmatched"].isna().tolist() == [False, False, True]
    np.testing.assert_allclose(t["error"], res.errors)
    np.testing.assert_allclose(t["data_error"], res.data_errors)
    c = res.counts()
    assert isinstance(c, pd.DataFrame) and c["layer"].tolist() == [1, 2]
    assert (c["fixed"] + c["antisymmetric"] + c["cycled"]).tolist() == [24, 18]
    assert t.loc[:1, "fixed"].tolist() == c["fixed"].tolist()
    assert res.counts(level="data")["layer"].tolist() == [1, 2]
    text = res.report()
    assert str(res) == text and text.startswith("[g]") and "output" in text
    with pytest.warns(DeprecationWarning, match=r"table\(\).*report\(\)"):
        assert res.table() == text
    with pytest.warns(DeprecationWarning, match=r"counts\(\)\[0\].*DataFrame"):
        assert res.counts()[0] == {k: int(c.iloc[0][k]) for k in ["fixed", "antisymmetric", "cycled", "cycles",
                                                                  "unmatched"]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert type(t[t["layer"] == 1]) is pd.DataFrame and type(t.copy()) is pd.DataFrame  # derived: plain
        assert c["fixed"].tolist() == c.iloc[:, 2].tolist()  # column labels are not the old index
        pickle.loads(pickle.dumps(t))
        with pytest.raises(TypeError):
            pd.DataFrame(t)()

    group = sf.recover_latent_actions(net.to_sequential(torch.float64), d4_elements(), d4_elements())
    gt, gc = group.table, group.counts()
    assert isinstance(gt, pd.DataFrame) and set(gt["element"]) == set(group.names) and len(gt) == 3 * len(group.names)
    assert list(gc.columns) == list(c.columns) and len(gc) == 2 * len(group.names)
    assert str(group) == group.report() and "HomomorphismReport" in group.report()
    with pytest.warns(DeprecationWarning, match="report"):
        assert group.table() == group.report()
    with pytest.warns(DeprecationWarning, match="element"):
        assert group.counts()["e0"][0]["fixed"] == int(group["e0"].counts().iloc[0]["fixed"])
