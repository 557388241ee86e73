"""The structural Phi-dependence prediction (`symfast.readout.phi_dependence`) against planted weights,
and the verdict row built from it (`symfast.readout.claims.phi_dependence_claim`)."""
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

import symfast as sf
from symfast.readout import phi_dependence as pd_
from symfast.readout.claims import phi_dependence_claim
from symfast.readout.observables import extend_lift, observable, scores

KINDS = ("gram", "gram_bias", "prefix2")


class _SignPE:
    """A 4-feature encoding that is not Fourier: r180 lifts to -I, the mirrors to +-1 on feature pairs."""

    name, input_dim, dim = "sign", 2, 4
    _lifts = {"r0": np.eye(4), "r180": -np.eye(4), "m0": np.diag([1.0, 1, -1, -1]), "m90": np.diag([-1.0, -1, 1, 1])}

    def lift(self, g):
        return self._lifts.get(g.name)


def _planted_scores(pe, elements, group, kind, seed=0, hidden=12):
    """Scores of the seed-mean observable of an orbit ensemble: generic weights W, b, and their images
    rho(h) W, b for h in `group`, so the mean is exactly invariant under the group and nothing more
    than what that forces."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(pe.dim, hidden, generator=g, dtype=torch.float64)
    b = torch.randn(hidden, generator=g, dtype=torch.float64)
    w2 = torch.randn(hidden, 5, generator=g, dtype=torch.float64)
    w1 = torch.stack([torch.as_tensor(pe.lift(h)) @ w for h in group])
    n = len(group)
    phi = observable([w1, w2.expand(n, -1, -1)], [b.expand(n, -1)], kind).mean(0, keepdim=True)
    rho = torch.stack([torch.as_tensor(extend_lift(pe.lift(e), kind)) for e in elements])
    return scores(phi, rho)[0].numpy()


def _check_prediction(pe, shape, candidates):
    pred = pd_.predict(pe, shape, candidates, KINDS)
    lifted = [e for e in candidates if pe.lift(e) is not None]
    group = [e for e in lifted if e in shape.group]
    for kind in KINDS:
        s = _planted_scores(pe, lifted, group, kind)
        planted = {e.name for e, v in zip(lifted, s) if v < 1e-9}
        assert planted == set(pred[(pred.observable == kind) & pred.visible].element), kind
        assert s[[v >= 1e-9 for v in s]].min(initial=1.0) > 1e-3  # the others are clearly broken
    return pred


def test_a_lift_of_minus_identity_is_seen_by_every_gram_but_not_the_bias_gram():
    d2 = list(sf.dihedral(2))
    r0 = next(e for e in d2 if e.name == "r0")
    blob = SimpleNamespace(name="blob", group=[r0])
    pred = _check_prediction(_SignPE(), blob, d2)
    diff = pd_.differing(pred)
    assert list(diff.element) == ["r180"]
    assert diff[["gram", "gram_bias", "prefix2"]].values.tolist() == [[True, False, True]]


@pytest.mark.parametrize("shape,pe", [("triangle", sf.DyadicAxisPE()), ("square", sf.TriAxisPE()),
                                      ("hexagon", sf.MultiAxisPE(4, K=3))])
def test_fourier_encodings_predict_the_same_group_for_every_observable(shape, pe):
    pred = _check_prediction(pe, sf.shapes.by_name(shape), list(sf.dihedral(4)) + list(sf.dihedral(6)))
    assert pd_.differing(pred).empty


def test_implied_elements_agree_with_planted_weights_in_3d():
    """The dyadic 3D encoding and the tetrahedron: every T_d-invariant Gram is O_h-invariant, so 24
    non-symmetries are implied, for the bias-augmented Gram as well."""
    from symfast.groups import o3

    pred = _check_prediction(sf.DyadicAxisPE(K=2, dim=3), sf.shapes.by_name("tetrahedron"), list(o3.octahedral()))
    assert pred[pred.observable == "gram_bias"].implied.sum() == 24
    assert pd_.differing(pred).empty


def _table(implied_bias, observed_bias):
    """Two observables of one (shape, encoding): m0 is true, r180 a liftable non-symmetry."""
    rows = []
    for kind, imp, obs in (("gram", True, True), ("gram_bias", implied_bias, observed_bias)):
        rows += [dict(shape="blob", pe="sign", observable=kind, element="m0", liftable=True, true_symmetry=True,
                      implied=False, observed=True, n_models=16),
                 dict(shape="blob", pe="sign", observable=kind, element="r180", liftable=True, true_symmetry=False,
                      implied=imp, observed=obs, n_models=16)]
    return pd.DataFrame(rows)


def test_the_row_holds_misses_or_says_there_is_no_case():
    assert phi_dependence_claim(_table(False, False)).verdict == "held"
    missed = phi_dependence_claim(_table(False, True))
    assert missed.verdict == "missed" and "gram_bias:r180" in missed.measured
    none = phi_dependence_claim(_table(True, False))
    assert none.verdict == "not comparable" and "1 of 1 cells" in none.note
    assert none.reason.startswith("no case")
    # a tested row from a budget below the calibrated range is not evidence
    assert phi_dependence_claim(_table(False, False).assign(n_models=4)).verdict == "not comparable"
