import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import symfast as sf
from symfast.groups import union
from symfast.ops.fourier_features import fourier_features, reference
from symfast.testing import assert_close

CANDIDATES = union([sf.dihedral(24), sf.dihedral(10)])  # contains D4, D6, D8, D10 and more

ENCODINGS = {
    "dyadic": (sf.DyadicAxisPE(), sf.dihedral(4)),
    "triaxis": (sf.TriAxisPE(), sf.dihedral(6)),
    "multiaxis3": (sf.MultiAxisPE(3, 8), sf.dihedral(6)),
    "multiaxis4": (sf.MultiAxisPE(4, 6), sf.dihedral(8)),
    "multiaxis5": (sf.MultiAxisPE(5, 4), sf.dihedral(10)),
    "rff": (sf.RandomFourierPE(), sf.Group([sf.identity(), sf.rotation(math.pi)])),
}


def test_dims():
    assert sf.DyadicAxisPE().dim == 48 and sf.TriAxisPE().dim == 48 and sf.RandomFourierPE().dim == 48
    assert sf.MultiAxisPE(3, 5).dim == 30


@pytest.mark.parametrize("name", list(ENCODINGS))
def test_liftable_subset(name):
    pe, expected = ENCODINGS[name]
    lifted = {g for g in CANDIDATES if pe.lift(g) is not None}
    assert lifted == set(expected), sorted(g.name for g in lifted)


@pytest.mark.parametrize("name", list(ENCODINGS))
@settings(max_examples=15, deadline=None)
@given(xy=st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1)), min_size=1, max_size=64))
def test_exact_lift_property(name, xy):
    """phi(g x) = rho(g) phi(x) to 1e-12 in float64 for every liftable element."""
    pe, expected = ENCODINGS[name]
    x = torch.tensor(xy, dtype=torch.float64)
    for g in expected:
        rho = torch.as_tensor(pe.lift(g))
        err = (pe(g(x)) - pe(x) @ rho.T).abs().max().item()
        assert err < 1e-12, (g.name, err)
        assert np.allclose(rho.T @ rho, np.eye(pe.dim), atol=1e-12)  # lifts are orthogonal


def test_lift_with_phases_and_lstsq():
    # a frequency set closed under r90 up to sign, with arbitrary phases: 2x2 blocks absorb them
    w = np.array([[1.0, 2.0], [-2.0, 1.0], [3.0, 0.5], [-0.5, 3.0]])
    pe = sf.FourierPE(w, phases=[0.3, -1.2, 2.0, 0.7])
    g = sf.rotation(math.pi / 2)
    rho = pe.lift(g)
    x = torch.rand(100, 2, dtype=torch.float64)
    assert (pe(g(x)) - pe(x) @ torch.as_tensor(rho).T).abs().max() < 1e-12
    assert pe.lift(sf.reflection(0.0)) is None
    rho_ls, res = pe.lift_lstsq(g)
    assert res < 1e-10 and np.allclose(rho_ls, rho, atol=1e-8)
    for orth in (False, True):
        _, res_bad = sf.DyadicAxisPE().lift_lstsq(sf.rotation(0.3), orthogonal=orth)
        assert res_bad > 0.5


def test_pe_devices_dtypes_and_errors():
    pe = sf.TriAxisPE()
    x = torch.rand(7, 3, 2)
    assert pe(x).shape == (7, 3, 48) and pe(x).dtype == torch.float32
    assert pe(x.double()).dtype == torch.float64
    with pytest.raises(ValueError, match=r"\[\.\.\., 2\]"):
        pe(torch.rand(4, 3))
    with pytest.raises(ValueError, match="frequencies"):
        sf.FourierPE(np.ones((3, 4)))
    with pytest.raises(ValueError, match="phases"):
        sf.FourierPE(np.ones((3, 2)), phases=[1.0])
    with pytest.raises(ValueError, match="finite"):
        sf.FourierPE([[np.nan, 1.0]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("n", [1, 63, 1000])
def test_fourier_features_cpp_vs_reference(dtype, n):
    pe = sf.RandomFourierPE(seed=3)
    x = torch.rand(n, 2, dtype=dtype) * 2 - 1
    w, b = pe.frequencies.to(dtype), pe.phases.to(dtype)
    fast = fourier_features(x, w, b, backend="cpu")
    assert_close("features", reference.fourier_features(x, w, b), fast)


def test_fourier_features_gradient_uses_reference():
    pe = sf.DyadicAxisPE(4)
    x = torch.rand(5, 2, dtype=torch.float64, requires_grad=True)
    out = fourier_features(x, pe.frequencies, pe.phases)
    out.sum().backward()
    ref_x = x.detach().clone().requires_grad_(True)
    reference.fourier_features(ref_x, pe.frequencies, pe.phases).sum().backward()
    assert_close("dx", ref_x.grad, x.grad)


def test_fourier_features_large_arguments_fall_back_exactly():
    """Beyond the vectorised sin/cos range (|u| > 8000) the C++ kernel uses libm."""
    w = torch.tensor([[4096.0 * math.pi, 0.0]])
    x = torch.tensor([[1.5, 0.0], [0.01, 0.0]])
    fast = fourier_features(x, w, torch.zeros(1), backend="cpu")
    assert_close("features", reference.fourier_features(x, w, torch.zeros(1)), fast, atol=1e-6, rtol=0)


CASTS = {"float": lambda m: m.float(), "half": lambda m: m.half(), "to_float32": lambda m: m.to(torch.float32),
         "to_bfloat16": lambda m: m.to(dtype=torch.bfloat16), "double": lambda m: m.double(),
         "to_cpu": lambda m: m.to("cpu")}


@pytest.mark.parametrize("cast", list(CASTS))
@pytest.mark.parametrize("name", ["dyadic", "multiaxis5", "rff"])
@settings(max_examples=5, deadline=None)
@given(xy=st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1)), min_size=1, max_size=32))
def test_module_casts_keep_frequencies_exact(cast, name, xy):
    """After .float()/.half()/.to(dtype) on a module holding the encoding, frequencies and phases
    are the same float64 values and every exact lift still satisfies phi(gx) = rho(g) phi(x)."""
    pe0, expected = ENCODINGS[name]
    pe = sf.FourierPE(pe0.frequencies, pe0.phases, name=pe0.name)
    holder = CASTS[cast](torch.nn.Sequential(pe, torch.nn.Linear(pe.dim, 3, dtype=torch.float64)))
    assert pe.frequencies.dtype == torch.float64 and pe.phases.dtype == torch.float64
    assert torch.equal(pe.frequencies, pe0.frequencies) and torch.equal(pe.phases, pe0.phases)
    assert holder.state_dict()["0.frequencies"].dtype == torch.float64
    x = torch.tensor(xy, dtype=torch.float64)
    for g in expected:
        rho = pe.lift(g)
        assert rho is not None, g.name
        err = (pe(g(x)) - pe(x) @ torch.as_tensor(rho).T).abs().max().item()
        assert err < 1e-12, (g.name, err)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_move_keeps_frequencies_exact():
    pe = sf.MultiAxisPE(5, 4)
    holder = torch.nn.Sequential(pe, torch.nn.Linear(pe.dim, 2)).cuda().half()
    assert pe.frequencies.is_cuda and pe.frequencies.dtype == torch.float64
    assert torch.equal(pe.frequencies.cpu(), sf.MultiAxisPE(5, 4).frequencies)
    x = torch.rand(64, 2, dtype=torch.float64, device="cuda")
    for g in sf.dihedral(10):
        rho = torch.as_tensor(pe.lift(g), device="cuda")
        assert (pe(g(x)) - pe(x) @ rho.T).abs().max().item() < 1e-12, g.name
    assert holder[1].weight.dtype == torch.float16
