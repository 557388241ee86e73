"""symfast.nn modules: input conversion and their exact bridge to symfast.Ensemble."""
import numpy as np
import pytest
import torch

import symfast as sf
from symfast.ops.fourier_mlp import reference
from symfast.testing import assert_close


def test_numpy_and_list_inputs_are_accepted():
    torch.manual_seed(0)
    one = sf.nn.FourierMLP(sf.DyadicAxisPE(2), hidden=(8,), backend="reference")
    ens = sf.nn.FourierMLPEnsemble(sf.DyadicAxisPE(2), hidden=(8,), num_models=3, backend="reference")
    x = np.random.default_rng(0).uniform(-1, 1, size=(20, 2))  # float64 numpy for a float32 model
    assert_close("FourierMLP numpy", one(torch.as_tensor(x, dtype=torch.float32)), one(x))
    assert_close("FourierMLP list", one(torch.as_tensor(x, dtype=torch.float32)), one(x.tolist()))
    assert_close("ensemble numpy", ens(torch.as_tensor(x, dtype=torch.float32)), ens(x))
    t = np.zeros((3, 20))
    assert_close("train_step numpy", ens.train_step(torch.as_tensor(x, dtype=torch.float32), torch.zeros(3, 20)),
                 ens.train_step(x, t))
    with pytest.raises(TypeError, match="x must be a tensor or numeric array"):
        one("not points")


def test_module_float_keeps_the_encoding_exact():
    m = sf.nn.FourierMLP(sf.DyadicAxisPE(4), hidden=(8,), dtype=torch.float64, backend="reference")
    m.float()
    assert m.weights[0].dtype == torch.float32 and m.pe.frequencies.dtype == torch.float64
    assert m.pe.lift(sf.rotation(np.pi / 2)) is not None


def test_fused_gradients_match_reference_by_name():
    """The module's fused train_step against the autograd reference, every tensor by name."""
    torch.manual_seed(1)
    ens = sf.nn.FourierMLPEnsemble(sf.TriAxisPE(2), hidden=(16, 8), num_models=2, activation="tanh",
                                   dtype=torch.float64)
    x, t = torch.rand(2, 30, 2, dtype=torch.float64), torch.rand(2, 30, dtype=torch.float64)
    loss = ens.train_step(x, t)
    ref_loss, ref_dw, ref_db = reference.fourier_mlp_train_step(x, t, ens.pe.frequencies, ens.pe.phases,
                                                                list(ens.weights), list(ens.biases), "tanh")
    assert_close("loss", ref_loss, loss)
    for l, (w, b) in enumerate(zip(ens.weights, ens.biases)):
        assert_close(f"dW{l}", ref_dw[l], w.grad)
        assert_close(f"db{l}", ref_db[l], b.grad)


@pytest.mark.filterwarnings("ignore:symfast.nn")
def test_casts_keep_a_learned_frequency_parameter_float64():
    m = sf.nn.FourierMLP(sf.DyadicAxisPE(3), hidden=(8,), dtype=torch.float64, backend="reference")
    m.pe.frequencies = torch.nn.Parameter(m.pe.frequencies.clone())
    p = m.pe.frequencies
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    m(torch.rand(5, 2, dtype=torch.float64)).sum().backward()
    m.float()
    assert m.pe.frequencies is p and isinstance(p, torch.nn.Parameter) and p.requires_grad
    assert p.dtype == torch.float64 and p.grad.dtype == torch.float64 and m.weights[0].dtype == torch.float32
    m.to(torch.float64).to(torch.float32)
    assert p.dtype == torch.float64 and any(q is p for q in opt.param_groups[0]["params"])
    assert m.pe.lift(sf.rotation(np.pi / 2)) is not None
