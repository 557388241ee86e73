"""Checkpoints of the GRU, LSTM and SSM families: an interrupted run resumes to the same models as an
uninterrupted one, a finished run is reloaded instead of retrained, other runs' files are ignored."""
import os

import pytest
import torch

from symfast.schur import families as fam
from symfast.schur import rnn
from symfast.schur.families import checkpoint as ckmod
from symfast.schur.rnn import TrainConfig

TASK = rnn.FlipFlop(T=12)
SEEDS = [0, 5]
CFG = TrainConfig(epochs=3, batches_per_epoch=2, batch=4, lr=5e-3, clip=1.0, schedule="cosine", warmup=2,
                  min_lr_ratio=0.1)


class Interrupt(Exception):
    pass


def _paths(tmp_path, tag):
    return [str(tmp_path / f"{tag}_s{s}.pt") for s in SEEDS]


def _state(models):
    return [{k: v.clone() for k, v in m.state_dict().items()} for m in models]


@pytest.mark.parametrize("family,construction,engine", [("gru", "bias", "fused"), ("ssm", "diagonal", "fused"),
                                                        ("lstm", "nobias", "torch")])
def test_interrupted_run_resumes_to_the_uninterrupted_models(tmp_path, monkeypatch, family, construction, engine):
    """Train 3 epochs straight; train again with checkpoints, stopped by an exception right after the
    first epoch's checkpoints are written (as a killed run would be), then re-run: the resumed models
    equal the uninterrupted ones bit for bit, and a third run loads them without training a step."""
    cfg = TrainConfig(**{**vars(CFG), "engine": engine})
    ref = _state(fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg))
    paths = _paths(tmp_path, family)
    real_save = ckmod.save_family_checkpoint

    def stop_at_epoch_2(path, model, task, cfg, seed, epoch, *a, **k):
        if epoch == 2:  # the "kill": before the first epoch-2 file is written
            raise Interrupt
        real_save(path, model, task, cfg, seed, epoch, *a, **k)
    monkeypatch.setattr(fam.train, "save_family_checkpoint", stop_at_epoch_2)
    with pytest.raises(Interrupt):
        fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg, checkpoints=paths)
    # the ensemble stops with every model at epoch 1; one after another, with the second model not started
    assert torch.load(paths[0], weights_only=True)["epoch"] == 1
    assert (torch.load(paths[1], weights_only=True)["epoch"] == 1) if engine == "fused" else not os.path.exists(paths[1])
    monkeypatch.setattr(fam.train, "save_family_checkpoint", real_save)
    resumed = fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg, checkpoints=paths)
    for a, b in zip(ref, _state(resumed)):
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ck = torch.load(paths[0], weights_only=True)
    assert ck["epoch"] == 3 and len(ck["losses"]) == 6
    model, task, info = ckmod.load_family_checkpoint(paths[0])  # what a user reads back
    assert task == TASK and info["epoch"] == 3 and all(torch.equal(v, ref[0][k]) for k, v in model.state_dict().items())
    # the weights moved from the init (the comparison is not of untouched models)
    init = fam.make_model(family, construction, TASK.n_in, 6, TASK.n_out, torch.Generator().manual_seed(SEEDS[0]))
    assert any(not torch.equal(v, ref[0][k]) for k, v in init.state_dict().items())

    def no_training(*a, **k):
        raise AssertionError("a finished checkpoint was trained again")
    monkeypatch.setattr(fam.train, "fit", no_training)
    monkeypatch.setattr(fam.train, "fit_ensemble", no_training)
    loaded = fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg, checkpoints=paths)
    for a, b in zip(ref, _state(loaded)):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_checkpoints_of_other_settings_or_damaged_files_are_retrained(tmp_path, monkeypatch):
    """A checkpoint of another learning rate, another seed or a truncated file is not loaded: the model is
    trained from its seed and the file rewritten; threads and engine do not make a run another."""
    paths = _paths(tmp_path, "ssm")
    fam.train_family(TASK, "ssm", "dense", SEEDS, n_hidden=4, cfg=CFG, checkpoints=paths)
    ref = _state(fam.train_family(TASK, "ssm", "dense", SEEDS, n_hidden=4, cfg=TrainConfig(**{**vars(CFG), "lr": 1e-2})))
    with open(paths[1], "wb") as f:
        f.write(b"not a checkpoint")
    other = fam.train_family(TASK, "ssm", "dense", SEEDS, n_hidden=4, cfg=TrainConfig(**{**vars(CFG), "lr": 1e-2}),
                             checkpoints=paths)
    for a, b in zip(ref, _state(other)):
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert all(torch.load(p, weights_only=True)["train"]["lr"] == 1e-2 for p in paths)
    # the seed is part of the run: seed 5's file does not stand in for seed 0
    os.replace(paths[1], paths[0])
    m, opt, losses = fam.make_model("ssm", "dense", TASK.n_in, 4, TASK.n_out), None, []
    opt = torch.optim.Adam(m.parameters())
    assert ckmod.resume_family(paths[0], m, opt, TASK, TrainConfig(**{**vars(CFG), "lr": 1e-2}), 0, losses) == 0
    assert losses == [] and not opt.state
    assert ckmod.resume_family(paths[0], m, opt, TASK, TrainConfig(**{**vars(CFG), "lr": 1e-2, "threads": 2,
                                                                        "engine": "torch"}), 5, losses) == 3
    assert len(losses) == 6 and opt.state
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt: cannot read family checkpoint"):
        ckmod.load_family_checkpoint(junk)
    torch.save({"family": "gru"}, junk)
    with pytest.raises(ValueError, match="junk.pt: damaged family checkpoint"):
        ckmod.load_family_checkpoint(junk)


def test_train_family_rejects_a_wrong_number_of_checkpoints(tmp_path):
    with pytest.raises(ValueError, match="one checkpoint path per seed, got 1 for 2 seeds"):
        fam.train_family(TASK, "gru", "bias", SEEDS, n_hidden=4, cfg=CFG, checkpoints=[str(tmp_path / "a.pt")])


@pytest.mark.parametrize("family,construction", [("gru", "bias"), ("ssm", "dense")])
def test_a_checkpoint_with_damaged_adam_moments_is_one_error_naming_it(tmp_path, family, construction):
    """NaN in a partly trained checkpoint's Adam moments: resuming raises CheckpointError naming the file
    before anything loads (it used to load and train the model into NaN weights)."""
    from symfast.schur.rnn.checkpoint import CheckpointError

    paths = _paths(tmp_path, family)
    fam.train_family(TASK, family, construction, SEEDS, n_hidden=4, cfg=CFG, checkpoints=paths)
    ck = torch.load(paths[0], weights_only=True)
    first = next(iter(ck["optimizer"]["state"].values()))
    first["exp_avg_sq"].view(-1)[0] = float("nan")
    torch.save(ck, paths[0])
    m = fam.make_model(family, construction, TASK.n_in, 4, TASK.n_out)
    opt, before = torch.optim.Adam(m.parameters()), {k: v.clone() for k, v in m.state_dict().items()}
    longer = TrainConfig(**{**vars(CFG), "epochs": CFG.epochs})
    with pytest.raises(CheckpointError, match=rf"checkpoint {paths[0]}: optimiser exp_avg_sq of parameter 0 holds NaN"):
        ckmod.resume_family(paths[0], m, opt, TASK, longer, SEEDS[0], [])
    assert not opt.state and all(torch.equal(before[k], v) for k, v in m.state_dict().items())  # nothing loaded
