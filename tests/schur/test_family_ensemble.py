"""The batched ensemble (all seeds of a GRU / LSTM / SSM construction at once) against the reference,
one model after another in `symfast.schur.rnn.train.fit`: same losses step by step, same weights."""
import pytest
import torch

from symfast.schur import families as fam
from symfast.schur import rnn
from symfast.schur.families.ensemble import ensemble_forward, fit_ensemble
from symfast.schur.rnn import TrainConfig
from symfast.schur.rnn.train import fit

TASK = rnn.FlipFlop(T=20)
SEEDS = [0, 3, 7]
CASES = [("gru", "nobias"), ("gru", "bias"), ("lstm", "nobias"), ("lstm", "bias"), ("ssm", "dense"),
         ("ssm", "diagonal")]


def _models(family, construction, seeds=SEEDS, H=12, task=TASK):
    return [fam.make_model(family, construction, task.n_in, H, task.n_out, generator=torch.Generator().manual_seed(s))
            for s in seeds]


@pytest.mark.parametrize("family,construction", CASES)
@pytest.mark.parametrize("clip", [None, 0.05])
def test_ensemble_equals_one_model_at_a_time(family, construction, clip):
    """Each model's per-step losses and final weights match `fit` on it alone (its own batches, its own
    Adam state, its own clipping: at clip 0.05 every step is clipped, by a different factor per model)."""
    cfg = TrainConfig(epochs=2, batches_per_epoch=3, batch=8, lr=3e-3, clip=clip, schedule="cosine", warmup=2,
                      min_lr_ratio=0.1)
    ref, ref_losses = _models(family, construction), []
    for m, s in zip(ref, SEEDS):
        ref_losses.append([])
        fit(m, TASK, s, cfg, losses=ref_losses[-1])
    ens, ens_losses = _models(family, construction), []
    fit_ensemble(ens, TASK, SEEDS, cfg, losses=ens_losses)
    assert len(ens_losses) == len(SEEDS) and all(len(v) == 6 for v in ens_losses)
    for k in range(len(SEEDS)):
        assert torch.allclose(torch.tensor(ens_losses[k]), torch.tensor(ref_losses[k]), rtol=1e-5, atol=1e-7)
        for (name, p), q in zip(ref[k].named_parameters(), ens[k].parameters()):
            assert torch.allclose(p, q, rtol=1e-4, atol=2e-6), (k, name, float((p - q).abs().max()))
    # the weights moved (the comparison is not of untouched inits), differently per seed
    init = _models(family, construction)
    assert all(float((p.detach() - q.detach()).abs().max()) > 1e-4 for m, i in zip(ens, init)
               for p, q in zip(m.parameters(), i.parameters()))
    assert ens_losses[0] != ens_losses[1]


@pytest.mark.parametrize("family,construction", CASES)
def test_ensemble_forward_is_each_models_forward(family, construction):
    models = _models(family, construction)
    P = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models]) for n, _ in
         models[0].named_parameters()}
    x = torch.stack([TASK.sample(5, s)[0] for s in SEEDS])
    y = ensemble_forward(models[0], P, x)
    for k, m in enumerate(models):
        assert torch.allclose(y[k], m(x[k]).detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("family", ["gru", "ssm"])
def test_train_family_engines_agree(family):
    """engine "fused" (the ensemble) and "torch" (one at a time) give the same models to float32 rounding."""
    cons = fam.FAMILY_CONSTRUCTIONS[family][0]
    cfg = TrainConfig(epochs=1, batches_per_epoch=4, batch=8, clip=1.0)
    a = fam.train_family(TASK, family, cons, [1, 2], n_hidden=10, cfg=cfg)
    b = fam.train_family(TASK, family, cons, [1, 2], n_hidden=10, cfg=TrainConfig(**{**vars(cfg), "engine": "torch"}))
    for ma, mb in zip(a, b):
        for p, q in zip(ma.parameters(), mb.parameters()):
            assert torch.allclose(p, q, rtol=1e-4, atol=2e-6)


def test_ensemble_bad_input_is_named():
    cfg = TrainConfig(epochs=1, batches_per_epoch=1, batch=4)
    with pytest.raises(ValueError, match="one seed per model"):
        fit_ensemble(_models("gru", "bias"), TASK, [0, 1], cfg)
    with pytest.raises(ValueError, match="one class and config"):
        fit_ensemble(_models("gru", "bias", [0]) + _models("gru", "nobias", [1]), TASK, [0, 1], cfg)
    with pytest.raises(ValueError, match="no batched ensemble"):
        ensemble_forward(rnn.TanhRNN(1, 4, 1), {}, torch.zeros(1, 2, 3, 1))
