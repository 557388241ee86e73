import pytest
import torch

import symfast as sf
from symfast.readout import training
from symfast.readout.ensemble import Ensemble
from symfast.testing import assert_close

SMALL = dict(hidden=(16, 16), steps=12, points=64, backend="reference", progress=False)


def test_deterministic_and_batch_independent():
    a = sf.fit_sdf(["triangle", "square"], sf.DyadicAxisPE(4), seeds=[0, 1], **SMALL)
    b = sf.fit_sdf(["triangle", "square"], sf.DyadicAxisPE(4), seeds=[0, 1], **SMALL)
    for wa, wb in zip(a.weights + a.biases, b.weights + b.biases):
        assert torch.equal(wa, wb)
    assert a.shapes == ["triangle", "triangle", "square", "square"] and a.seeds == [0, 1, 0, 1]
    alone = sf.fit_sdf(["square"], sf.DyadicAxisPE(4), seeds=[1], **SMALL)
    for l, (wa, wb) in enumerate(zip(a.weights, alone.weights)):
        assert_close(f"W{l}", wa[3], wb[0], rtol=1e-5, atol=1e-6)
    assert a.losses.shape == (12, 4) and (a.losses[-1] < a.losses[0]).all()


def test_training_reduces_loss_float64():
    ens = sf.fit_sdf("circle", sf.TriAxisPE(3), seeds=2, hidden=(32,), steps=60, points=256,
                     dtype=torch.float64, backend="reference", progress=False)
    assert ens.weights[0].dtype == torch.float64
    assert ens.losses[-1].max() < 0.5 * ens.losses[0].min()


def test_checkpoint_resume_after_interrupt(tmp_path, monkeypatch):
    ck = tmp_path / "ck.pt"
    full = sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, **SMALL)
    real_sample, calls = training._sample, {"n": 0}

    def flaky(*args):
        calls["n"] += 1
        if calls["n"] == 9:
            raise KeyboardInterrupt
        return real_sample(*args)

    monkeypatch.setattr(training, "_sample", flaky)
    with pytest.raises(KeyboardInterrupt, match="saved"):
        sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, checkpoint_every=4, **SMALL)
    monkeypatch.setattr(training, "_sample", real_sample)
    assert torch.load(ck, weights_only=True)["step"] == 8
    resumed = sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, checkpoint_every=4, **SMALL)
    for wf, wr in zip(full.weights + full.biases, resumed.weights + resumed.biases):
        assert torch.equal(wf, wr)
    assert torch.equal(full.losses, resumed.losses)
    with pytest.raises(ValueError, match="other settings"):
        sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=3, checkpoint=ck, **SMALL)


def test_sequential_interop_and_save_load(tmp_path):
    ens = sf.fit_sdf(["triangle"], sf.RandomFourierPE(8), seeds=3, activation="tanh", **SMALL)
    x = torch.rand(50, 2) * 2 - 1
    out = ens(x)
    for i in range(3):
        seq = ens.to_sequential(i)
        assert_close(f"member{i}", out[i], seq(x)[:, 0])
    back = Ensemble.from_sequentials([ens.to_sequential(i) for i in range(3)], ["triangle"] * 3)
    assert_close("roundtrip", out, back(x))
    path = tmp_path / "e.pt"
    ens.save(path)
    loaded = Ensemble.load(path)
    assert_close("loaded", out, loaded(x))
    assert loaded.config == ens.config and loaded.shapes == ens.shapes
    ens.weights[1][0, 0, 0] = float("nan")
    ens.save(path)
    with pytest.raises(ValueError, match=r"weights\[1\] contains NaN"):
        Ensemble.load(path)


def test_bad_arguments():
    pe = sf.DyadicAxisPE(2)
    with pytest.raises(ValueError, match="unknown shape"):
        sf.fit_sdf(["blob"], pe)
    with pytest.raises(ValueError, match="steps"):
        sf.fit_sdf(["square"], pe, steps=0)
    with pytest.raises(ValueError, match="activation"):
        sf.fit_sdf(["square"], pe, activation="gelu")
    with pytest.raises(ValueError, match="seeds"):
        sf.fit_sdf(["square"], pe, seeds=[1, 1])
    with pytest.raises(ValueError, match="backend"):
        sf.fit_sdf(["square"], pe, backend="cuda")
    with pytest.raises(ValueError, match="FourierPE"):
        sf.fit_sdf(["square"], "dyadic")


def test_fused_cpu_backend_agrees_with_reference():
    kw = dict(seeds=[0, 1], hidden=(16, 16), steps=15, points=96, dtype=torch.float64, progress=False)
    ref = sf.fit_sdf(["triangle", "circle"], sf.TriAxisPE(3), backend="reference", **kw)
    for backend in ("cpu", "auto"):
        fast = sf.fit_sdf(["triangle", "circle"], sf.TriAxisPE(3), backend=backend, **kw)
        for l, (a, b) in enumerate(zip(ref.weights + ref.biases, fast.weights + fast.biases)):
            assert_close(f"{backend} param{l}", a, b, rtol=1e-7, atol=1e-9)
        assert_close(f"{backend} losses", ref.losses, fast.losses, rtol=1e-7, atol=1e-12)


def test_fused_triton_backend_agrees_with_reference_under_interpreter(run_interpreted):
    """fit_sdf(backend="triton") on CPU through TRITON_INTERPRET=1."""
    run_interpreted(
        "import torch, symfast as sf\n"
        "kw = dict(seeds=[0], hidden=(16,), activation='tanh', steps=3, points=16, progress=False)\n"
        "r = sf.fit_sdf(['square'], sf.DyadicAxisPE(2), backend='reference', **kw)\n"
        "t = sf.fit_sdf(['square'], sf.DyadicAxisPE(2), backend='triton', **kw)\n"
        "err = (r.losses - t.losses).abs().max().item() / r.losses.abs().max().item()\n"
        "assert err < 1e-4, err\n"
        "print('ok', err)\n")
