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
from symfast.readout import o3
from symfast.readout.claims import group_label, readout3d_claims
from symfast.readout.encodings import MultiAxisPE, cube_axes, encoding_by_name, icosahedron_axes
from symfast.readout.ensemble import Ensemble
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
    pe = MultiAxisPE(np.concatenate([np.eye(3), cube_axes()]), K=2)
    assert names(g for g in CANDIDATES if pe.lift(g) is not None) == names(OH)
    assert np.allclose(np.linalg.norm(icosahedron_axes(), axis=1), 1.0)
    tilted = MultiAxisPE([[0.3, 0.1, 1.0]], K=3)
    assert names(g for g in CANDIDATES if tilted.lift(g) is not None) == {"e", "i"}
    assert MultiAxisPE(3, K=8).input_dim == 2 and MultiAxisPE(3, K=8).name == "multiaxis3"  # 2D form kept


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
