"""The one PE+MLP data type: shapes carried by the ensemble, truth from the Shape, conversions, files."""
import math
import os
import warnings

import pytest
import torch

import symfast as sf
from symfast import shapes
from symfast.nn.fields import Ensemble
from symfast.groups import Group, union
from symfast.readout.readout import default_candidates
from symfast.testing import assert_close

TINY = dict(hidden=(8,), steps=2, points=16, backend="reference", progress=False)


def planted(pe, group, shape, seeds=6, H=None, seed=0):
    """Ensemble whose first-layer rows form orbits under rho(group), so its Gram is exactly
    invariant under `group` (observed) and, with seed noise, under nothing else."""
    g = torch.Generator().manual_seed(seed)
    rhos = [torch.as_tensor(pe.lift(e)) for e in group]
    k = 4
    common = torch.randn(k, pe.dim, generator=g, dtype=torch.float64)
    w0 = []
    for _ in range(seeds):
        base = common + 0.1 * torch.randn(common.shape, generator=g, dtype=torch.float64)
        w0.append(torch.cat([base @ r for r in rhos]).T)
    H = k * len(rhos)
    out = torch.randn(seeds, k, 1, dtype=torch.float64, generator=g).repeat(1, len(rhos), 1)
    biases = [torch.zeros(seeds, H, dtype=torch.float64), torch.zeros(seeds, 1, dtype=torch.float64)]
    return Ensemble(pe, [torch.stack(w0), out], biases, "relu", [shape] * seeds, list(range(seeds)))


def true_set(t):
    """Elements (index of t) whose true_symmetry is True (not False, not NaN)."""
    return {e for e, v in t["true_symmetry"].items() if v == True}  # noqa: E712 (numpy bools, NaN)


def names(group, among):
    return {sf.groups.as_element(g).name for g in among if g in group}


CASES = {
    # shape, encoding, candidates, planted (observed) group
    "pentagon_5gon": (shapes.regular_polygon(5), sf.MultiAxisPE(5, 2), union([sf.dihedral(10), sf.dihedral(4)]),
                      sf.dihedral(5)),
    "rotated_triangle": (shapes.regular_polygon(3, rotation=0.3, name="triangle"), sf.TriAxisPE(2), None,
                         sf.cyclic(3)),
    "kite_polygon": (shapes.polygon([[0.6, 0.0], [0.0, 0.4], [-0.3, 0.0], [0.0, -0.4]], name="kite"),
                     sf.DyadicAxisPE(2), None, Group([sf.identity(), sf.reflection(0.0)])),
}


@pytest.mark.parametrize("case", list(CASES))
def test_truth_comes_from_the_shape_object(case):
    shape, pe, cands, plant = CASES[case]
    cands_list = list(cands if cands is not None else default_candidates())
    r = sf.readout(planted(pe, plant, shape), candidates=cands, sweep=0)
    t = r.table.set_index("element")
    truth = names(shape.group, cands_list)
    assert true_set(t) == truth
    assert {g.name for g in r.observed(shape.name)} == names(plant, cands_list)
    assert r.violations.empty, r.violations[["element", "score", "threshold"]]
    lift_and_true = {g.name for g in cands_list if pe.lift(g) is not None and g in shape.group}
    assert set(r.summary().loc[0, "G_lift_and_true"].split()) == lift_and_true
    assert int(r.summary().loc[0, "violations"]) == 0


def test_fit_sdf_members_carry_their_shapes():
    pent, rot = shapes.regular_polygon(5), shapes.regular_polygon(3, rotation=0.3, name="tri_rot")
    ens = sf.fit_sdf([pent, rot], sf.MultiAxisPE(5, 2), seeds=2, **TINY)
    assert ens.targets == [pent, pent, rot, rot] and ens.shapes == ["5-gon", "5-gon", "tri_rot", "tri_rot"]
    cands = union([sf.dihedral(10), sf.dihedral(6)])
    r = sf.readout(ens, candidates=cands, sweep=0)
    for shape in (pent, rot):
        t = r.table[r.table["shape"] == shape.name].set_index("element")
        assert true_set(t) == names(shape.group, cands)
        assert not t["true_symmetry"].isna().any()


def test_custom_shape_without_group_uses_its_symmetries():
    sq = shapes.square(0.4)
    blob = shapes.Shape("blob", sq.sdf, None)  # same field as a square, no declared group
    r = sf.readout(planted(sf.DyadicAxisPE(2), sf.dihedral(4), blob), sweep=8)
    t = r.table.set_index("element")
    assert true_set(t) == names(sf.dihedral(4), t.index)
    assert r.violations.empty
    sw = r.sweep.set_index("element")
    assert bool(sw.loc["r90", "true_symmetry"]) and not bool(sw.loc["r45", "true_symmetry"])


def test_members_sharing_a_name_must_share_a_group():
    a, b = shapes.regular_polygon(3, name="tri"), shapes.regular_polygon(3, rotation=0.2, name="tri")
    ens = planted(sf.TriAxisPE(2), sf.cyclic(3), a)
    ens2 = Ensemble(ens.pe, ens.weights, ens.biases, "relu", [a] * 3 + [b] * 3, ens.seeds)
    with pytest.raises(ValueError, match="distinct names"):
        sf.readout(ens2, sweep=0)


def test_save_load_keeps_shapes_as_data(tmp_path):
    kite = CASES["kite_polygon"][0]
    custom = shapes.Shape("custom", shapes.circle(0.3).sdf, sf.orthogonal_group())
    ens = sf.fit_sdf([shapes.regular_polygon(5, rotation=0.1), kite, "ellipse"], sf.DyadicAxisPE(2), seeds=1, **TINY)
    path = tmp_path / "e.pt"
    ens.save(path)
    raw = torch.load(path, weights_only=True)  # data only: no arbitrary objects to unpickle
    assert raw["shapes"][1]["params"]["kind"] == "polygon"
    loaded = Ensemble.load(path)
    x = torch.rand(200, 2, dtype=torch.float64) * 2 - 1
    for a, b in zip(ens.targets, loaded.targets):
        assert a.name == b.name and set(a.group) == set(b.group) and a.group.name == b.group.name
        assert torch.equal(a.sdf(x), b.sdf(x))
    for l, (wa, wb) in enumerate(zip(ens.weights + ens.biases, loaded.weights + loaded.biases)):
        assert torch.equal(wa, wb), l
    # a shape from an arbitrary callable keeps name and group, not its field
    ens2 = Ensemble(ens.pe, [w[:1] for w in ens.weights], [b[:1] for b in ens.biases], "relu", [custom], [0])
    ens2.save(path)
    back = Ensemble.load(path).targets[0]
    assert back.name == "custom" and back.group.continuous
    with pytest.raises(ValueError, match="without its field"):
        back.sdf(x)


def test_old_files_with_names_fall_back_with_a_warning(tmp_path):
    ens = planted(sf.DyadicAxisPE(2), sf.dihedral(4), "square", seeds=2)
    path = tmp_path / "old.pt"
    torch.save({"format": "symfast.Ensemble/1", "pe": ens.pe.config(), "weights": ens.weights, "biases": ens.biases,
                "activation": "relu", "shapes": ens.shapes, "seeds": ens.seeds, "losses": ens.losses,
                "config": {}}, path)
    with pytest.warns(UserWarning, match="by_name"):
        old = Ensemble.load(path)
    assert old.targets[0].name == "square" and set(old.targets[0].group) == set(sf.dihedral(4))


def _truncate(path, keep):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:keep])


@pytest.mark.parametrize("keep", [0, 10, 200, -50])
def test_truncated_ensemble_file_names_the_file(tmp_path, keep):
    path = tmp_path / "ens.pt"
    planted(sf.DyadicAxisPE(2), sf.dihedral(4), "square", seeds=2).save(path)
    _truncate(path, keep if keep >= 0 else os.path.getsize(path) + keep)
    with pytest.raises(ValueError, match="ens.pt"):
        Ensemble.load(path)


def test_malformed_ensemble_fields_name_the_file(tmp_path):
    path = tmp_path / "bad.pt"
    ens = planted(sf.DyadicAxisPE(2), sf.dihedral(4), "square", seeds=2)
    ens.save(path)
    d = torch.load(path, weights_only=True)
    d["weights"] = d["weights"][:1]  # a truncated layer list
    torch.save(d, path)
    with pytest.raises(ValueError, match="bad.pt"):
        Ensemble.load(path)


def test_interrupted_save_keeps_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "ens.pt"
    ens = planted(sf.DyadicAxisPE(2), sf.dihedral(4), "square", seeds=2)
    ens.save(path)
    real_save = torch.save

    def interrupted(obj, f, *a, **k):
        f.write(b"partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ens.save(path)
    monkeypatch.setattr(torch, "save", real_save)
    assert os.listdir(tmp_path) == ["ens.pt"]
    assert torch.equal(Ensemble.load(path).weights[0], ens.weights[0])


def test_module_roundtrip_is_exact_and_readout_accepts_modules():
    ens = sf.fit_sdf(["triangle", "square"], sf.TriAxisPE(2), seeds=3, activation="sine", **TINY)
    mod = ens.to_module()
    assert isinstance(mod, sf.nn.FourierMLPEnsemble) and mod.activation == "sine"
    back = mod.to_ensemble()
    for l, (a, b) in enumerate(zip(ens.weights + ens.biases, back.weights + back.biases)):
        assert torch.equal(a, b), l
    assert back.shapes == ens.shapes and back.seeds == ens.seeds and back.targets == ens.targets
    x = torch.rand(40, 2) * 2 - 1
    assert_close("module vs ensemble", ens(x), mod(x).detach())
    seq = ens.to_sequential(4)  # a sine result exports
    assert isinstance(seq[2], sf.nn.Sine)
    assert_close("sequential member 4", ens(x)[4], seq(x)[:, 0].detach())
    one = sf.nn.FourierMLP.from_sequential(seq)
    assert_close("FourierMLP from sequential", ens(x)[4], one(x).detach())
    r_mod = sf.readout(mod, sweep=0)
    r_ens = sf.readout(ens, sweep=0)
    assert r_mod.table.equals(r_ens.table)
    with pytest.raises(ValueError, match="shapes="):
        sf.readout(sf.nn.FourierMLPEnsemble(sf.TriAxisPE(2), (8,), 2), sweep=0)
    fresh = sf.nn.FourierMLPEnsemble(sf.TriAxisPE(2), (8,), 2, shapes=[shapes.hexagon()] * 2)
    assert sf.readout(fresh, sweep=0).table["true_symmetry"].sum() == 12


def test_sequentials_roundtrip_through_ensemble():
    pe = sf.DyadicAxisPE(2)
    torch.manual_seed(0)
    seqs = [torch.nn.Sequential(pe, torch.nn.Linear(8, 6), sf.nn.Sine(), torch.nn.Linear(6, 1)) for _ in range(2)]
    ens = Ensemble.from_sequentials(seqs, [shapes.circle()] * 2)
    assert ens.activation == "sine"
    mod = sf.nn.FourierMLPEnsemble.from_sequentials(seqs)
    x = torch.rand(30, 2) * 2 - 1
    for i in range(2):
        assert_close(f"ensemble member {i}", seqs[i](x)[:, 0].detach(), ens(x)[i])
        assert_close(f"module member {i}", seqs[i](x)[:, 0].detach(), mod(x)[i].detach())
        assert torch.equal(ens.to_sequential(i)[1].weight, seqs[i][1].weight)


def test_activation_tables_agree():
    from symfast.ops.fourier_mlp.reference import ACTIVATIONS

    x = torch.linspace(-3, 3, 101)
    for name, fn in ACTIVATIONS.items():
        assert_close(f"module {name}", fn(x), sf.nn.ACTIVATION_MODULES[name]()(x))


def test_shape_dict_rejects_unknown_recipes():
    with pytest.raises(ValueError, match="recipe"):
        shapes.Shape.from_dict({"name": "x", "params": {"kind": "os.system", "cmd": "echo"}, "group": None})
    with pytest.raises(ValueError, match="group"):
        shapes.Shape.from_dict({"name": "x", "params": None, "group": {"elements": [["spin", 1.0]]}})
    assert math.isclose(shapes.Shape.from_dict(shapes.circle(0.25).to_dict()).params["radius"], 0.25)
