"""Training through the fused ensemble kernel vs one model at a time on torch.nn.RNN."""
import pytest
import torch

from symfast import _ext
from symfast.schur import rnn
from symfast.schur.rnn import TrainConfig
from symfast.schur.rnn.train_fused import train_models

pytestmark = pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")


def _params(m):
    return dict(m.named_parameters())


@pytest.mark.parametrize("recurrent", ["orthogonal", "cayley"])
@pytest.mark.parametrize("clip", [None, 0.05], ids=["noclip", "clip"])
def test_fused_engine_matches_torch_engine(recurrent, clip):
    """Same init, batches, loss and Adam: after 6 steps the engines agree to float32 rounding."""
    task = rnn.Copy(length=3, replay=6, scored=6) if recurrent == "cayley" else rnn.FlipFlop(T=12)
    kw = dict(epochs=2, batches_per_epoch=3, batch=8, clip=clip)
    fused = rnn.train_seeds(task, [0, 3], 10, recurrent, TrainConfig(**kw), progress=False)
    torch_ = rnn.train_seeds(task, [0, 3], 10, recurrent, TrainConfig(**kw, engine="torch"), progress=False)
    for a, b in zip(fused, torch_):
        for name, p in _params(b).items():
            assert torch.allclose(_params(a)[name], p, atol=2e-5, rtol=1e-4), name
        init = rnn.TanhRNN(task.n_in, 10, task.n_out, recurrent, torch.Generator().manual_seed(0))
        assert not torch.allclose(list(init.parameters())[2], list(b.parameters())[2])  # training moved W


def test_mixed_widths_and_constructions_in_one_call():
    """Models of widths 7, 12, 9 (one Cayley) trained together equal each trained alone."""
    task = rnn.SineGeneration(T=10)
    cfg = TrainConfig(epochs=1, batches_per_epoch=4, batch=6)
    spec = ([1, 2, 5], [7, 12, 9], ["dense", "cayley", "normal"])
    together = train_models(task, *spec, cfg, progress=False)
    for k, m in enumerate(together):
        alone = train_models(task, [spec[0][k]], [spec[1][k]], [spec[2][k]], cfg, progress=False)[0]
        for name, p in _params(alone).items():
            assert torch.allclose(_params(m)[name], p, atol=1e-6, rtol=1e-5), (k, name)
            assert _params(m)[name].shape == p.shape


def test_checkpoints_resume_across_engines(tmp_path):
    """One epoch fused, then resumed on torch.nn.RNN (and the reverse) ends where two epochs of
    either engine end; checkpoints hold the per-model Adam state and losses."""
    task = rnn.FlipFlop(T=10)
    kw = dict(batches_per_epoch=3, batch=8)
    full = rnn.train_seeds(task, [0, 1], 8, "orthogonal", TrainConfig(epochs=2, **kw), progress=False)
    for first, second in (("fused", "torch"), ("torch", "fused")):
        paths = [str(tmp_path / f"{first}_s{s}.pt") for s in (0, 1)]
        rnn.train_seeds(task, [0, 1], 8, "orthogonal", TrainConfig(epochs=1, engine=first, **kw), checkpoints=paths,
                        progress=False)
        resumed = rnn.train_seeds(task, [0, 1], 8, "orthogonal", TrainConfig(epochs=2, engine=second, **kw),
                                  checkpoints=paths, progress=False)
        for a, b in zip(full, resumed):
            for name, p in _params(a).items():
                assert torch.allclose(_params(b)[name], p, atol=2e-5, rtol=1e-4), (first, name)
        _, _, info = rnn.load_checkpoint(paths[1])
        assert info["epoch"] == 2 and len(info["losses"]) == 6


def test_bad_engine():
    with pytest.raises(ValueError, match="engine must be"):
        rnn.train_seeds(rnn.FlipFlop(T=5), [0], 4, "dense", TrainConfig(epochs=1, engine="jax"), progress=False)


def test_cayley_gradient_formula_matches_autograd():
    """dL/dP through W = cayley(P), from W and dL/dW alone, equals autograd through the solve."""
    from symfast.schur.rnn.model import cayley
    from symfast.schur.rnn.train_fused import _cayley_grad
    g = torch.Generator().manual_seed(0)
    for H in (1, 5, 33):
        P = (0.3 * torch.randn(H, H, generator=g, dtype=torch.float64)).requires_grad_()
        G = torch.randn(H, H, generator=g, dtype=torch.float64)
        W = cayley(P)
        W.backward(G)
        assert torch.allclose(_cayley_grad(W.detach(), G), P.grad, atol=1e-12, rtol=1e-10)
    assert torch.allclose(cayley(torch.stack([P.detach(), 2 * P.detach()]))[1], cayley(2 * P.detach()),
                          atol=1e-13)  # a batch of generators


def test_a_model_trains_the_same_whatever_it_is_trained_with():
    """Bit for bit: a model trained alone, beside a wider one (other padding), or beside other
    constructions and seeds ends identical; so grouping the whole grid into one call changes nothing."""
    task = rnn.Copy(length=4, replay=9, scored=9)
    cfg = TrainConfig(epochs=1, batches_per_epoch=4, batch=8)
    for rec in ("orthogonal", "cayley"):
        alone = train_models(task, [0], [9], [rec], cfg, progress=False)[0]
        for spec in (([0, 1], [9, 14], [rec, rec]), ([2, 0, 0], [5, 9, 11], ["dense", rec, "cayley"])):
            beside = train_models(task, *spec, cfg, progress=False)[spec[0].index(0)]
            for name, p in _params(alone).items():
                assert torch.equal(_params(beside)[name], p), (rec, spec, name)


def test_resume_split_over_groups_is_exact(tmp_path):
    """A grid interrupted with its models at different epochs (one finished, two at epoch 1, one not
    started) resumes to exactly the weights, Adam states and losses of an uninterrupted run."""
    task = rnn.SineGeneration(T=9)
    cfg = TrainConfig(epochs=3, batches_per_epoch=2, batch=6)
    spec = ([0, 1, 0, 2], [6, 6, 10, 8], ["orthogonal", "cayley", "cayley", "normal"])
    full_dir, cut_dir = tmp_path / "full", tmp_path / "cut"
    full_paths = [str(full_dir / f"m{k}.pt") for k in range(4)]
    cut_paths = [str(cut_dir / f"m{k}.pt") for k in range(4)]
    full = train_models(task, *spec, cfg, checkpoints=full_paths, progress=False)
    one = TrainConfig(epochs=1, batches_per_epoch=2, batch=6)
    train_models(task, [spec[0][1], spec[0][2]], [spec[1][1], spec[1][2]], [spec[2][1], spec[2][2]], one,
                 checkpoints=cut_paths[1:3], progress=False)  # models 1, 2 at epoch 1
    train_models(task, [0], [6], ["orthogonal"], cfg, checkpoints=cut_paths[:1], progress=False)  # model 0 done
    resumed = train_models(task, *spec, cfg, checkpoints=cut_paths, progress=False)  # model 3 from scratch
    for k, (a, b) in enumerate(zip(full, resumed)):
        for name, p in _params(a).items():
            assert torch.equal(_params(b)[name], p), (k, name)
        ca, cb = torch.load(full_paths[k], weights_only=True), torch.load(cut_paths[k], weights_only=True)
        assert ca["losses"] == cb["losses"] and len(ca["losses"]) == 6 and ca["epoch"] == cb["epoch"] == 3
        for i, st in ca["optimizer"]["state"].items():
            for key, v in st.items():
                assert torch.equal(cb["optimizer"]["state"][i][key], v), (k, i, key)


def test_train_many_engines_agree_and_check_lengths():
    task = rnn.FlipFlop(T=8)
    cfg = dict(epochs=1, batches_per_epoch=3, batch=5)
    spec = ([0, 1], [7, 4], ["dense", "cayley"])
    fused = rnn.train_many(task, *spec, TrainConfig(**cfg), progress=False)
    torch_ = rnn.train_many(task, *spec, TrainConfig(**cfg, engine="torch"), progress=False)
    for a, b in zip(fused, torch_):
        assert a.n_hidden == b.n_hidden and a.recurrent == b.recurrent
        for name, p in _params(b).items():
            assert torch.allclose(_params(a)[name], p, atol=2e-5, rtol=1e-4), name
    with pytest.raises(ValueError, match="one width and one construction per seed"):
        rnn.train_many(task, [0, 1], [7], ["dense", "dense"], TrainConfig(**cfg), progress=False)


def _losses(paths):
    return [torch.load(p, weights_only=True)["losses"] for p in paths]


# two settings that differ in everything a model's training depends on: a curriculum (other sequence
# lengths), a warmed-up cosine rate, clipping and the Cayley init, against a constant rate without
# clipping for fewer epochs
_CURRICULUM = TrainConfig(epochs=2, batches_per_epoch=3, batch=6, lr=3e-3, schedule="cosine", warmup=2,
                          min_lr_ratio=0.1, clip=0.05, curriculum=1, cayley_init="spread")
_CONSTANT = TrainConfig(epochs=1, batches_per_epoch=3, batch=6, lr=2e-3)


def test_models_of_different_settings_in_one_call_equal_separate_calls(tmp_path):
    """Bit for bit (weights and loss histories): models of three settings (a curriculum with a cosine
    rate and clipping; a constant rate for fewer epochs; the same with clipping) trained in one call
    equal each setting's models trained in a call of their own."""
    task = rnn.Copy(length=3, replay=6, scored=6)
    clipped = TrainConfig(**{**vars(_CONSTANT), "clip": 0.05})
    spec = ([0, 1, 0, 2, 1], [8, 6, 8, 8, 7], ["dense", "cayley", "orthogonal", "normal", "dense"])
    cfgs = [_CURRICULUM, _CURRICULUM, _CONSTANT, clipped, _CONSTANT]
    mixed_paths = [str(tmp_path / f"mixed{k}.pt") for k in range(5)]
    mixed = train_models(task, *spec, cfgs, checkpoints=mixed_paths, progress=False)
    for c in (_CURRICULUM, _CONSTANT, clipped):
        ks = [k for k in range(5) if cfgs[k] is c]
        paths = [str(tmp_path / f"alone{k}.pt") for k in ks]
        alone = train_models(task, *([v[k] for k in ks] for v in spec), c, checkpoints=paths, progress=False)
        assert _losses(paths) == _losses([mixed_paths[k] for k in ks])
        assert [len(v) for v in _losses(paths)] == [c.epochs * 3] * len(ks)
        for k, a in zip(ks, alone):
            for name, p in _params(a).items():
                assert torch.equal(_params(mixed[k])[name], p), (k, name)
    assert not torch.equal(mixed[0].W, mixed[4].W)  # the settings made a difference


def test_mixed_settings_widths_and_batch_sizes_equal_each_model_alone():
    """Clipped Cayley and dense models of widths 5, 8 and 11 beside unclipped ones of another batch size
    (a kernel call of their own) end as each model trained alone: the clipping norm is summed over a
    model's own width, so the padding to the widest model does not change its rounding."""
    task = rnn.FlipFlop(T=9)
    small = TrainConfig(epochs=1, batches_per_epoch=2, batch=4)
    spec = ([0, 1, 2, 3, 0], [5, 11, 8, 11, 5], ["cayley", "dense", "cayley", "orthogonal", "normal"])
    cfgs = [_CURRICULUM, _CURRICULUM, _CURRICULUM, small, small]
    together = train_models(task, *spec, cfgs, progress=False)
    for k, m in enumerate(together):
        alone = train_models(task, [spec[0][k]], [spec[1][k]], [spec[2][k]], cfgs[k], progress=False)[0]
        assert m.n_hidden == alone.n_hidden
        for name, p in _params(alone).items():
            assert torch.equal(_params(m)[name], p), (k, name)


def test_resume_of_a_mixed_call_is_exact(tmp_path, monkeypatch):
    """A call of three settings interrupted with its models at different epochs (one at epoch 1 of 2,
    one not started, one finished, one at epoch 1 of 3) resumes, training only what is left, to exactly
    the weights, Adam states and losses of the uninterrupted call."""
    import shutil

    from symfast.schur.rnn import train_fused
    task = rnn.SineGeneration(T=8)
    spec = ([0, 1, 2, 3], [6, 8, 6, 7], ["orthogonal", "cayley", "dense", "normal"])
    longer = TrainConfig(**{**vars(_CONSTANT), "epochs": 3})
    cfgs = [_CURRICULUM, _CURRICULUM, _CONSTANT, longer]
    full_paths = [str(tmp_path / f"full{k}.pt") for k in range(4)]
    cut_paths = [str(tmp_path / f"cut{k}.pt") for k in range(4)]
    real_save, real_step = train_fused.save_checkpoint, train_fused.rnn_train_step
    model_steps = []

    def snapshot(path, *a, epoch, **kw):  # keep the checkpoints of models 0, 2 and 3 as after their first epoch
        real_save(path, *a, epoch=epoch, **kw)
        if epoch == 1 and path != full_paths[1]:
            shutil.copy(path, path.replace("full", "cut"))

    def counted(W, *a, **kw):
        model_steps.append(W.shape[0])
        return real_step(W, *a, **kw)
    monkeypatch.setattr(train_fused, "save_checkpoint", snapshot)
    monkeypatch.setattr(train_fused, "rnn_train_step", counted)
    full = train_models(task, *spec, cfgs, checkpoints=full_paths, progress=False)
    monkeypatch.setattr(train_fused, "save_checkpoint", real_save)
    assert sum(model_steps) == 3 * (2 + 2 + 1 + 3)
    model_steps.clear()
    resumed = train_models(task, *spec, cfgs, checkpoints=cut_paths, progress=False)
    assert sum(model_steps) == 3 * (1 + 2 + 0 + 2)  # only the epochs left
    for k, (a, b) in enumerate(zip(full, resumed)):
        for name, p in _params(a).items():
            assert torch.equal(_params(b)[name], p), (k, name)
        ca, cb = torch.load(full_paths[k], weights_only=True), torch.load(cut_paths[k], weights_only=True)
        assert ca["losses"] == cb["losses"] and ca["epoch"] == cb["epoch"] == cfgs[k].epochs
        for i, st in ca["optimizer"]["state"].items():
            for key, v in st.items():
                assert torch.equal(cb["optimizer"]["state"][i][key], v), (k, i, key)


def test_one_call_needs_one_engine_and_one_config_per_model():
    task = rnn.FlipFlop(T=5)
    with pytest.raises(ValueError, match="must share engine"):
        rnn.train_many(task, [0, 1], [4, 4], ["dense", "dense"], [_CONSTANT, TrainConfig(engine="torch")])
    with pytest.raises(ValueError, match="must share threads"):
        train_models(task, [0, 1], [4, 4], ["dense", "dense"], [_CONSTANT, TrainConfig(threads=2)])
    with pytest.raises(ValueError, match="one TrainConfig per model"):
        rnn.train_many(task, [0, 1], [4, 4], ["dense", "dense"], [_CONSTANT])
    with pytest.raises(ValueError, match="curriculum must be"):
        train_models(task, [0], [4], ["dense"], [TrainConfig(epochs=1, curriculum=2)])
