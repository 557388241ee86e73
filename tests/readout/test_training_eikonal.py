"""fit_sdf with the second-order terms (eikonal=, normals=): the fused step against the reference,
exact resume, and the property the term is for (|grad f| closer to 1 than the plain fit gives)."""
import pytest
import torch

import symfast as sf
from symfast import _ext
from symfast.ops.fourier_mlp import fourier_mlp_jet
from symfast.readout import training
from symfast.testing import assert_close

needs_cpp = pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
SMALL = dict(hidden=(16, 16), steps=12, points=64, progress=False)


@needs_cpp
def test_fused_second_order_training_matches_the_reference():
    kw = dict(SMALL, dtype=torch.float64, eikonal=0.2, normals=0.1)
    ref = sf.fit_sdf(["square", "star"], sf.DyadicAxisPE(3), seeds=2, backend="reference", **kw)
    fast = sf.fit_sdf(["square", "star"], sf.DyadicAxisPE(3), seeds=2, backend="cpu", **kw)
    assert_close("losses", ref.losses, fast.losses, rtol=1e-9, atol=1e-12)
    for l, (a, b) in enumerate(zip(ref.weights + ref.biases, fast.weights + fast.biases)):
        assert_close(f"param {l}", a, b, rtol=1e-9, atol=1e-12)
    assert ref.config["eikonal"] == 0.2 and ref.config["normals"] == 0.1


@needs_cpp
def test_interrupted_eikonal_run_resumes_bit_identically(tmp_path, monkeypatch):
    kw = dict(SMALL, backend="cpu", eikonal=0.1)
    full = sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, **kw)
    real, calls = training.fourier_mlp_eikonal_step, {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    ck = tmp_path / "ck.pt"
    monkeypatch.setattr(training, "fourier_mlp_eikonal_step", flaky)
    with pytest.raises(KeyboardInterrupt, match="saved"):
        sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, checkpoint_every=4, **kw)
    monkeypatch.setattr(training, "fourier_mlp_eikonal_step", real)
    resumed = sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, checkpoint_every=4, **kw)
    for wf, wr in zip(full.weights + full.biases, resumed.weights + resumed.biases):
        assert torch.equal(wf, wr)
    assert torch.equal(full.losses, resumed.losses)
    with pytest.raises(ValueError, match="other settings"):  # a plain run does not resume an eikonal one
        sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, **dict(kw, eikonal=0.0))


def test_the_eikonal_term_brings_the_gradient_norm_towards_one():
    """Expected before running: on the same budget, the eikonal fit's mean (|grad f| - 1)^2 over the
    domain is lower than the plain fit's (the plain MSE fit does not constrain |grad f| between
    its sample points). Fails if the term is ignored or its sign is wrong."""
    pe = sf.DyadicAxisPE(5)
    kw = dict(hidden=(32, 32), steps=150, points=512, progress=False, backend="auto")
    x = torch.rand(1000, 2, generator=torch.Generator().manual_seed(9)) * 2 - 1
    err = {}
    for lam in (0.0, 1.0):
        ens = sf.fit_sdf(["square"], pe, seeds=2, eikonal=lam, **kw)
        g = fourier_mlp_jet(x, pe.frequencies, pe.phases, ens.weights, ens.biases, "relu")[1]
        err[lam] = (g.norm(dim=-1) - 1).pow(2).mean().item()
    assert err[1.0] < 0.5 * err[0.0], err


@pytest.mark.parametrize("kw, match", [(dict(eikonal=-1.0), "eikonal must be a finite weight >= 0"),
                                       (dict(normals=float("nan")), "normals must be a finite weight >= 0"),
                                       (dict(eikonal=True), "eikonal must be a finite weight >= 0")])
def test_bad_weights_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=1, **dict(SMALL, **kw))


@needs_cpp
def test_module_train_step_with_eikonal_and_normals_matches_the_reference():
    pe = sf.RandomFourierPE(6, scale=2.0, seed=1)
    gen = torch.Generator().manual_seed(0)
    model = sf.nn.FourierMLPEnsemble(pe, hidden=(16, 16), num_models=3, dtype=torch.float64, generator=gen)
    x = torch.rand(3, 80, 2, generator=gen, dtype=torch.float64) * 2 - 1
    targets, normals = x.norm(dim=-1) - 0.5, torch.nn.functional.normalize(x, dim=-1)
    grads = {}
    for backend in ("reference", "cpu"):
        model.backend = backend
        loss = model.train_step(x, targets, eikonal=0.1, normals=normals, normal=0.3)
        grads[backend] = [p.grad.clone() for p in model.parameters()]
        assert all(p.grad.is_contiguous() for p in model.parameters())
    for (name, _), a, b in zip(model.named_parameters(), grads["reference"], grads["cpu"]):
        assert_close(f"train_step {name}", a, b)
    assert loss.shape == (3,)
