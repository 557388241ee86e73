"""The readout on 3D fields: exact lifts of O(3) elements through the 3D encodings, 3D training,
readout of planted and trained solids, the CLI's --dim 3."""
import math

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import symfast as sf
from symfast.cli import main
from symfast.groups import o3
from symfast.readout.claims import group_label, readout3d_claims
from symfast.nn.encodings import MultiAxisPE, cube_axes, encoding_by_name, icosahedron_axes
from symfast.nn.fields import Ensemble
from symfast.readout.readout import default_candidates, readout

CANDIDATES = default_candidates(3)
OH, IH, TD = o3.octahedral(), o3.icosahedral(), o3.tetrahedral()
TH = [g for g in OH if g in IH]

# each 3D encoding and the subgroup of O_h ∪ I_h it lifts exactly (what the axes' lines allow)
LIFTS = {"dyadic3": OH, "cube4": OH, "ico6": IH, "rff3": [o3.identity(), o3.inversion()]}
PES = {name: encoding_by_name(name) for name in LIFTS}


def names(elements):
    return {g.name for g in elements}


def test_candidates_are_oh_union_ih():
    assert len(CANDIDATES) == 144 and len(names(CANDIDATES)) == 144  # names are unique
    assert len(TH) == 24 and group_label([g.name for g in TH]) == "Th"
    assert {group_label(names(g)) for g in (OH, IH, TD)} == {"Oh", "Ih", "Td"}


@pytest.mark.parametrize("name", list(LIFTS))
def test_liftable_subgroup(name):
    pe = PES[name]
    assert pe.input_dim == 3 and pe.dim == 48
    lifted = [g for g in CANDIDATES if pe.lift(g) is not None]
    assert names(lifted) == names(LIFTS[name])


def test_multiaxis_lifts_are_the_stabiliser_of_the_axis_lines():
    # the 3 four-fold axes plus the 4 three-fold axes: still exactly O_h; one tilted axis: only what fixes it
    pe = MultiAxisPE(axes=np.concatenate([np.eye(3), cube_axes()]), K=2)
    assert names(g for g in CANDIDATES if pe.lift(g) is not None) == names(OH)
    assert np.allclose(np.linalg.norm(icosahedron_axes(), axis=1), 1.0)
    tilted = MultiAxisPE([[0.3, 0.1, 1.0]], K=3)
    assert names(g for g in CANDIDATES if tilted.lift(g) is not None) == {"e", "i"}
    assert MultiAxisPE(3, K=8).input_dim == 2 and MultiAxisPE(num_axes=3).name == "multiaxis3"  # 2D form kept


@pytest.mark.parametrize("name", list(LIFTS))
@settings(max_examples=8, deadline=None)
@given(xyz=st.lists(st.tuples(*[st.floats(-1, 1)] * 3), min_size=1, max_size=32))
def test_exact_lift_property(name, xyz):
    """phi(g x) = rho(g) phi(x) to 1e-12 in float64 for every liftable element; rho orthogonal."""
    pe = PES[name]
    x = torch.tensor(xyz, dtype=torch.float64)
    phi = pe(x)
    for g in LIFTS[name]:
        rho = pe.lift(g)
        err = (pe(g(x)) - phi @ torch.as_tensor(rho).T).abs().max().item()
        assert err < 1e-12, (g.name, err)
        assert np.abs(rho.T @ rho - np.eye(pe.dim)).max() < 1e-12


@pytest.mark.parametrize("name", ["ico6", "rff3"])
def test_lifts_compose_like_the_group(name):
    """rho(g h) = rho(g) rho(h): the features are linearly independent, so the lift is a homomorphism."""
    pe = PES[name]
    elems = list(LIFTS[name])[:12]
    for g in elems:
        for h in elems:
            np.testing.assert_allclose(pe.lift(g * h), pe.lift(g) @ pe.lift(h), atol=1e-12, rtol=0)


def test_lift_with_phases_and_procrustes_in_3d():
    w = np.array([[1.0, 2.0, 0.5], [2.0, 0.5, 1.0], [0.5, 1.0, 2.0]])  # one orbit of the 3-fold rotation
    pe = sf.FourierPE(w, phases=[0.3, -1.2, 2.0])
    g = o3.rotation((1, 1, 1), 2 * math.pi / 3)
    rho = pe.lift(g)
    x = torch.rand(64, 3, dtype=torch.float64)
    assert (pe(g(x)) - pe(x) @ torch.as_tensor(rho).T).abs().max() < 1e-12
    assert pe.lift(o3.rotation((0, 0, 1), math.pi / 2)) is None
    rho_ls, res = pe.lift_lstsq(g, orthogonal=True)
    assert res < 1e-10 and np.allclose(rho_ls, rho, atol=1e-8)
    five = o3.rotation((0, 1, (1 + math.sqrt(5)) / 2), 2 * math.pi / 5)  # I_h, not O_h
    _, res_bad = PES["dyadic3"].lift_lstsq(five, orthogonal=True)
    assert res_bad > 0.5


def test_dimension_errors():
    with pytest.raises(ValueError, match="R\\^3"):
        PES["dyadic3"].lift(sf.rotation(math.pi / 2))  # a 2D element on a 3D encoding
    with pytest.raises(ValueError, match="R\\^2"):
        sf.DyadicAxisPE().lift(o3.inversion())
    with pytest.raises(ValueError, match="dim"):
        sf.DyadicAxisPE(dim=4)
    with pytest.raises(ValueError, match="non-zero"):
        MultiAxisPE([[0.0, 0.0, 0.0]])
    with pytest.raises(ValueError, match="unknown encoding"):
        encoding_by_name("dyadic4")


def test_config_round_trip():
    for pe in PES.values():
        back = sf.FourierPE.from_config(pe.config())
        assert back.input_dim == 3 and torch.equal(back.frequencies, pe.frequencies) and back.name == pe.name


def planted_ensemble(pe, group, shape, seeds=6, H=None, seed=0):
    """First layers whose rows form orbits under rho(group): W1^T W1 is exactly invariant under it."""
    g = torch.Generator().manual_seed(seed)
    rhos = [torch.as_tensor(pe.lift(e)) for e in group]
    common = torch.randn(2, pe.dim, generator=g, dtype=torch.float64)
    w0 = []
    for _ in range(seeds):  # a common part (the signal) plus seed noise
        base = common + 0.1 * torch.randn(common.shape, generator=g, dtype=torch.float64)
        w0.append(torch.cat([base @ r for r in rhos]).T)  # [d, H]
    H = w0[0].shape[1]
    weights = [torch.stack(w0), torch.randn(seeds, H, 1, generator=g, dtype=torch.float64)]
    biases = [torch.zeros(seeds, H, dtype=torch.float64), torch.zeros(seeds, 1, dtype=torch.float64)]
    return Ensemble(pe, weights, biases, "relu", [shape] * seeds, list(range(seeds)))


def test_planted_tetrahedral_weights_read_out_through_cube_axes():
    """cube4 lifts O_h; weights planted with T_d symmetry, labelled tetrahedron (truth from its Shape):
    exactly T_d observed, the liftable non-symmetries of O_h (the inversion among them) rejected."""
    pe = PES["cube4"]
    r = readout(planted_ensemble(pe, TD, sf.shapes.by_name("tetrahedron")), sweep=0)
    assert names(r.observed("tetrahedron")) == names(TD)
    t = r.table.set_index("element")
    assert t.loc["i", "liftable"] and not t.loc["i", "true_symmetry"] and not t.loc["i", "observed"]
    assert not t["implied"].any() and r.violations.empty
    c = r.counts().iloc[0]
    assert (c["candidates"], c["G_true"], c["G_lift"], c["G_lift_and_true"], c["G_obs"]) == (144, 24, 48, 24, 24)
    assert c["match"] and c["liftable_false_rejected"] == 24 and c["true_not_liftable"] == 0
    assert "24 elements" in r.report()


def test_dyadic_gram_cannot_tell_td_from_oh():
    """Every Gram invariant under the dyadic lifts of T_d is invariant under all of O_h: the 24 other
    elements of O_h are implied, observed, and counted as explained violations, not hidden errors."""
    pe = PES["dyadic3"]
    r = readout(planted_ensemble(pe, TD, sf.shapes.by_name("tetrahedron")), sweep=0)
    t = r.table
    assert names(r.observed("tetrahedron")) == names(OH)
    assert set(t.loc[t["implied"], "element"]) == names(OH) - names(TD)
    c = r.counts().iloc[0]
    assert not c["match"] and c["match_with_implied"] and c["implied"] == 24
    claims = readout3d_claims(t.assign(n_models=8))  # the row's logic; 6 planted seeds are below the calibrated
    assert any("cannot separate" in cl.claim and cl.verdict == "held" for cl in claims)  # budget (tests/test_report.py)
    assert not any(cl.tested for cl in readout3d_claims(t))


def test_planted_icosahedral_weights_hidden_from_dyadic():
    """Weights planted with I_h under ico6 read as I_h; the dyadic encoding of the icosahedron
    lifts only T_h, so its five-fold rotations are structurally hidden."""
    ico = sf.shapes.by_name("icosahedron")
    r = readout([planted_ensemble(PES["ico6"], IH, ico), planted_ensemble(PES["dyadic3"], TH, ico)], sweep=6)
    assert names(r.observed("icosahedron", pe="ico6")) == names(IH)
    assert names(r.observed("icosahedron", pe="dyadic3")) == names(TH)
    c = r.counts().set_index("pe")
    assert c.loc["dyadic3", "true_not_liftable"] == 96 and c.loc["ico6", "match"]
    assert r.violations.empty
    sw = r.sweep[r.sweep["pe"] == "ico6"]
    assert len(sw) == 6 and sw["angle_deg"].tolist() == [0.0, 60.0, 120.0, 180.0, 240.0, 300.0]
    held = {cl.claim: cl.verdict for cl in readout3d_claims(r.table)}
    assert held["dyadic3 hides the icosahedron's five-fold rotations"] == "by construction"  # no exact lift


# -- training on solids ----------------------------------------------------------------------------
def test_fit_sdf_3d_samplers_save_load(tmp_path):
    pe = sf.DyadicAxisPE(K=2, dim=3)
    kw = dict(seeds=2, hidden=(8,), steps=3, points=32, progress=False)
    ens = sf.fit_sdf(["cube", "tetrahedron"], pe, **kw)
    assert len(ens) == 4 and ens.config["sampler"] == "ball" and torch.isfinite(ens.losses).all()
    assert [t.dim for t in ens.targets] == [3] * 4 and ens(torch.rand(5, 3)).shape == (4, 5)
    for sampler in ("box", "near_surface"):
        other = sf.fit_sdf(["octahedron"], pe, sampler=sampler, **kw)
        assert other.config["sampler"] == sampler and torch.isfinite(other.losses).all()
    path = tmp_path / "solids.pt"
    ens.save(path)
    back = Ensemble.load(path)
    assert back.pe.input_dim == 3 and torch.equal(back.pe.frequencies, pe.frequencies)
    assert [t.group.name for t in back.targets] == ["Oh", "Oh", "Td", "Td"]
    x = torch.rand(7, 3, dtype=torch.float64) - 0.5
    assert torch.equal(back.targets[2].sdf(x), ens.targets[2].sdf(x))
    assert torch.equal(back(x.float()), ens(x.float()))


def test_fit_sdf_3d_input_errors():
    kw = dict(seeds=1, hidden=(4,), steps=1, points=8, progress=False)
    with pytest.raises(ValueError, match="2D but the encoding"):
        sf.fit_sdf(["square"], PES["dyadic3"], **kw)
    with pytest.raises(ValueError, match="3D but the encoding"):
        sf.fit_sdf(["cube"], sf.DyadicAxisPE(), **kw)
    with pytest.raises(ValueError, match="sampler must be one of"):
        sf.fit_sdf(["cube"], PES["dyadic3"], sampler="disk", **kw)


def test_trained_tetrahedron_cube_axes_recovers_td_and_rejects_inversion():
    """A small real fit (6 seeds x 120 steps): through the cube's three-fold axes the tetrahedron's T_d
    is observed and the liftable non-symmetries of O_h (the inversion among them) are rejected.
    Measured margins: true elements p_adjusted >= 0.4, false ones z >= 14."""
    ens = sf.fit_sdf(["tetrahedron"], PES["cube4"], seeds=6, steps=120, points=512, hidden=(32, 32), progress=False)
    r = readout(ens, candidates=OH, sweep=0)
    assert names(r.observed("tetrahedron")) == names(TD)
    t = r.table.set_index("element")
    assert not t.loc["i", "observed"] and t.loc["i", "z"] > 5
    assert r.violations.empty


# -- CLI --------------------------------------------------------------------------------------------
def test_cli_readout_dim3(tmp_path, capsys):
    out = tmp_path / "solids"
    args = ["readout", "--dim", "3", "--shapes", "tetrahedron", "--pe", "cube4,rff3", "--seeds", "4", "--steps", "3",
            "--points", "32", "--hidden", "8", "--sweep", "4", "--sweep-axis", "1,1,1", "--out", str(out), "--quiet"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "G_lift_and_true" in printed and "wall time" in printed
    for f in ("readout.csv", "summary.csv", "sweep.csv", "heatmap3d.png", "sdf_slices.png",
              "ensemble_cube4.pt", "ensemble_rff3.pt"):
        assert (out / f).exists(), f
    from symfast.readout import plots3d  # the zero-level figure needs scikit-image; never a stand-in without it
    assert (out / "level_sets.png").exists() == plots3d.HAVE_SKIMAGE
    table = pd.read_csv(out / "readout.csv")
    assert len(table) == 2 * 144 and set(table["pe"]) == {"cube4", "rff3"}
    sweep = pd.read_csv(out / "sweep.csv")
    assert sweep["element"].iloc[1] == "r90[1,1,1]"  # about the chosen axis


@pytest.mark.parametrize("bad,message", [
    (["--dim", "3", "--shapes", "square"], "2D shape"),
    (["--shapes", "cube", "--pe", "dyadic3"], "3D shape"),
    (["--dim", "3", "--pe", "dyadic"], "encodes 2D points"),
    (["--dim", "3", "--pe", "dyadic9"], "unknown encoding"),
    (["--dim", "3", "--sampler", "disk"], "--sampler"),
    (["--dim", "3", "--sweep-axis", "0,0"], "--sweep-axis"),
    (["--dim", "3", "--sweep-axis", "0,0,0"], "--sweep-axis"),
])
def test_cli_dim3_bad_input(bad, message, capsys, tmp_path):
    assert main(["readout", "--out", str(tmp_path / "x"), *bad]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_cli_dim_must_be_2_or_3(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["readout", "--dim", "4", "--out", str(tmp_path / "x")])
    assert e.value.code == 2 and "--dim" in capsys.readouterr().err


def test_gram_scores_take_the_144_candidate_lifts():
    """The CPU kernels score all of O_h ∪ I_h at once (exact block permutations and dense Procrustes
    lifts in one call), matching the reference by name."""
    from symfast import _ext
    from symfast.ops.gram_scores import gram_scores, reference
    from symfast.readout.readout import element_lifts
    from symfast.testing import assert_close

    if not _ext.cpp_available():
        pytest.skip("C++ extension not built")
    rho = torch.stack([r for _, r, _, _ in element_lifts(PES["ico6"], list(CANDIDATES), "gram")])
    a = torch.randn(3, 48, 48, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    phi = a @ a.transpose(1, 2)
    assert_close("scores", reference.gram_scores(phi, rho), gram_scores(phi, rho, backend="cpu"))


def test_plots3d_figures_and_fallback_without_scikit_image(tmp_path, monkeypatch):
    import matplotlib

    from symfast.readout import plots3d

    backend = matplotlib.get_backend()
    ens = sf.fit_sdf(["cube"], sf.DyadicAxisPE(K=2, dim=3), seeds=2, hidden=(8,), steps=2, points=32, progress=False)
    fig = plots3d.plot_sdf_slices(ens, z=(0.0, 0.3), resolution=16)
    assert len(fig.axes) == 2 * 3 * 2  # 2 slices x (true, fitted, difference), each with a colour bar
    if plots3d.HAVE_SKIMAGE:
        assert len(plots3d.plot_level_sets(ens, resolution=12).axes) == 2
    monkeypatch.setattr(plots3d, "HAVE_SKIMAGE", False)
    with pytest.warns(UserWarning, match="scikit-image"):  # no substitute figure under the level sets' name
        assert plots3d.plot_level_sets(ens, resolution=12, path=tmp_path / "fallback.png") is None
    assert not (tmp_path / "fallback.png").exists()
    with pytest.raises(ValueError, match="3D fields"):
        plots3d.plot_level_sets(sf.fit_sdf(["square"], sf.DyadicAxisPE(K=2), seeds=1, hidden=(4,), steps=1, points=8,
                                      progress=False))
    assert matplotlib.get_backend() == backend
    matplotlib.pyplot.close("all")
