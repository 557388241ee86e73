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
