import os
import signal

import pytest
import torch

import symfast as sf
from symfast.readout import training
from symfast.nn.fields import Ensemble
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


def test_more_steps_continue_a_finished_run_exactly(tmp_path):
    ck = tmp_path / "ck.pt"
    kw = dict(SMALL, steps=5)
    short = sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, **kw)
    longer = sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, **SMALL)
    full = sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, **SMALL)
    for wf, wl in zip(full.weights + full.biases, longer.weights + longer.biases):
        assert torch.equal(wf, wl)
    assert torch.equal(full.losses, longer.losses) and torch.equal(short.losses, full.losses[:5])
    assert longer.config["steps"] == SMALL["steps"]
    with pytest.raises(ValueError, match="more than steps=5"):
        sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, **kw)


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


class _Interrupt:
    """At the n-th call of `fn`: raise KeyboardInterrupt before (when="before") or after
    (when="after") running it, or send a real SIGINT to this process from inside it ("signal")."""

    def __init__(self, fn, at, when):
        self.fn, self.at, self.when, self.calls = fn, at, when, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.at and self.when == "before":
            raise KeyboardInterrupt
        out = self.fn(*args, **kwargs)
        if self.calls == self.at and self.when == "after":
            raise KeyboardInterrupt
        if self.calls == self.at and self.when == "signal":
            signal.raise_signal(signal.SIGINT)
        return out


@pytest.mark.parametrize("backend", ["reference", "cpu"])
def test_interrupt_anywhere_in_a_step_resumes_bit_identically(tmp_path, monkeypatch, backend):
    """Ctrl-C inside a step (after sampling, inside the loss, before, inside and after the optimiser
    step) is saved at a step boundary, so the resumed run equals an uninterrupted one bit for bit."""
    kw = dict(SMALL, backend=backend)
    full = sf.fit_sdf(["square", "triangle"], sf.DyadicAxisPE(3), seeds=2, **kw)
    points = [  # (object, attribute, call at which to interrupt, how)
        (training, "_sample", 6, "after"),     # the generators have drawn this step's points
        (training, "_sample", 1, "before"),    # before anything happened in the first step
        (training, "fourier_mlp_train_step", 3, "after"),  # every backend trains through the fused op
        (torch.optim.Adam, "step", 7, "before"),   # gradients ready, nothing updated
        (torch.optim.Adam, "step", 10, "after"),   # parameters and Adam state already updated
        (torch.optim.Adam, "step", 4, "signal"),   # a real Ctrl-C during the update
        (torch.optim.Adam, "step", 12, "after"),   # the last step
    ]
    ck = tmp_path / "ck.pt"
    for owner, name, at, when in points:
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, _Interrupt(real, at, when))
        with pytest.raises(KeyboardInterrupt, match="saved"):
            sf.fit_sdf(["square", "triangle"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck, checkpoint_every=5, **kw)
        monkeypatch.setattr(owner, name, real)
        step = torch.load(ck, weights_only=True)["step"]
        resumed = sf.fit_sdf(["square", "triangle"], sf.DyadicAxisPE(3), seeds=2, checkpoint=ck,
                             checkpoint_every=5, **kw)
        for l, (wf, wr) in enumerate(zip(full.weights + full.biases, resumed.weights + resumed.biases)):
            assert torch.equal(wf, wr), (name, at, when, step, l)
        assert torch.equal(full.losses, resumed.losses), (name, at, step)
        assert os.listdir(tmp_path) == ["ck.pt"]  # no temp files left
        os.remove(ck)


def test_checkpoint_every_must_be_positive():
    for bad in (0, -1, 2.5, float("inf"), True):
        with pytest.raises(ValueError, match="checkpoint_every"):
            sf.fit_sdf(["square"], sf.DyadicAxisPE(2), seeds=1, checkpoint_every=bad, **SMALL)


@pytest.mark.parametrize("damage,match", [
    (lambda ck: ck.update(step=10 ** 9), "step"),
    (lambda ck: ck.update(step=-4), "step"),
    (lambda ck: ck.update(step=3.0), "step"),
    (lambda ck: ck.update(params=ck["params"][:-1]), "parameter"),
    (lambda ck: ck["params"].__setitem__(0, ck["params"][0][:, :2]), "parameter 0"),
    (lambda ck: ck["params"][1].fill_(float("nan")), "NaN"),
    (lambda ck: ck.update(gens=ck["gens"][:1]), "generator"),
    (lambda ck: ck.update(losses=ck["losses"][:3]), "losses"),
    (lambda ck: ck.pop("opt"), "not a fit_sdf checkpoint"),
    (lambda ck: ck["opt"]["state"].clear(), "optimiser"),
])
def test_damaged_checkpoint_is_refused(tmp_path, damage, match):
    ck = tmp_path / "ck.pt"
    sf.fit_sdf(["square"], sf.DyadicAxisPE(2), seeds=2, checkpoint=ck, checkpoint_every=4, **SMALL)
    data = torch.load(ck, weights_only=True)
    assert data["step"] == SMALL["steps"]
    data["step"] = 8
    damage(data)
    torch.save(data, ck)
    with pytest.raises(ValueError, match=match):
        sf.fit_sdf(["square"], sf.DyadicAxisPE(2), seeds=2, checkpoint=ck, checkpoint_every=4, **SMALL)


def test_truncated_checkpoint_names_the_file(tmp_path):
    ck = tmp_path / "ck.pt"
    sf.fit_sdf(["square"], sf.DyadicAxisPE(2), seeds=2, checkpoint=ck, **SMALL)
    data = ck.read_bytes()
    ck.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="ck.pt"):
        sf.fit_sdf(["square"], sf.DyadicAxisPE(2), seeds=2, checkpoint=ck, **SMALL)


def test_checkpoint_of_another_shape_with_the_same_name_is_refused(tmp_path):
    ck = tmp_path / "ck.pt"
    sf.fit_sdf([sf.shapes.regular_polygon(3, name="t")], sf.DyadicAxisPE(2), seeds=1, checkpoint=ck, **SMALL)
    with pytest.raises(ValueError, match="other settings"):
        sf.fit_sdf([sf.shapes.regular_polygon(3, rotation=0.5, name="t")], sf.DyadicAxisPE(2), seeds=1,
                   checkpoint=ck, **SMALL)


def test_batch_mates_change_a_model_only_by_rounding():
    """A model's data, initialisation and loss are its own; batched products and the vectorised
    Adam update may round differently with the batch size, so agreement is to float rounding."""
    kw = dict(SMALL, steps=6)
    for backend, dtype, tol in (("reference", torch.float32, 1e-5), ("cpu", torch.float32, 1e-5),
                                ("cpu", torch.float64, 1e-13)):
        kw.update(backend=backend, dtype=dtype)
        big = sf.fit_sdf(["triangle", "square", "circle"], sf.DyadicAxisPE(3), seeds=[0, 1, 2], **kw)
        alone = sf.fit_sdf(["square"], sf.DyadicAxisPE(3), seeds=[1], **kw)
        for l, (wa, wb) in enumerate(zip(big.weights + big.biases, alone.weights + alone.biases)):
            assert_close(f"{backend} {dtype} param{l}", wa[4], wb[0], rtol=tol, atol=tol)


@pytest.mark.skipif(not sf.cpp_available(), reason="the width limit is the C++ kernel's")
def test_auto_falls_back_to_the_reference_above_the_kernel_width(monkeypatch):
    from symfast.ops import _dispatch
    from symfast.ops.fourier_mlp import MAX_WIDTH

    monkeypatch.setattr(_dispatch, "_warned", set())
    kw = dict(seeds=1, hidden=(MAX_WIDTH + 1,), steps=2, points=8, progress=False)
    pe = sf.DyadicAxisPE(2)
    with pytest.warns(RuntimeWarning, match=f"hidden widths up to {MAX_WIDTH}, got {MAX_WIDTH + 1}.*reference"):
        auto = sf.fit_sdf(["square"], pe, **kw)
    ref = sf.fit_sdf(["square"], pe, backend="reference", **kw)
    for a, b in zip(auto.weights + auto.biases, ref.weights + ref.biases):
        assert torch.equal(a, b)  # "auto" ran the reference itself
    with pytest.raises(ValueError, match=f"backend='cpu'.*hidden widths up to {MAX_WIDTH}.*backend='reference'"):
        sf.fit_sdf(["square"], pe, backend="cpu", **kw)
    assert training.check_backend("auto", "cpu", (MAX_WIDTH,)) == "cpu"
