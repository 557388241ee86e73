"""Exact resume under an interleaving of a kill and a Ctrl-C between per-seed checkpoint writes, for every
recurrent family and engine: the run is killed right after the first seed's epoch-2 checkpoint is written
(so the seeds' checkpoints stand at different epochs), rerun and interrupted by a real SIGINT while a
lagging seed trains, then rerun to the end. The models and per-batch losses must equal an uninterrupted
run's bit for bit."""
import importlib
import signal

import pytest
import torch

from symfast.schur import families as fam
from symfast.schur import rnn
from symfast.schur.families import ensemble as ens_mod
from symfast.schur.rnn import TrainConfig

train_mod = importlib.import_module("symfast.schur.rnn.train")  # the package exports a function `train`
fused_mod = importlib.import_module("symfast.schur.rnn.train_fused")
fam_train = importlib.import_module("symfast.schur.families.train")
TASK = rnn.FlipFlop(T=10)
SEEDS = [0, 5, 7]
CASES = [("tanh", "orthogonal", "fused"), ("tanh", "cayley", "torch"), ("gru", "bias", "fused"),
         ("gru", "nobias", "fused"), ("gru", "nobias", "torch"), ("lstm", "bias", "fused"),
         ("ssm", "dense", "fused"), ("ssm", "diagonal", "fused")]


class Killed(Exception):
    """Stands for kill -9: the process stops between two checkpoint writes, no handler runs."""


def _epoch(path) -> int | None:
    try:
        return int(torch.load(path, weights_only=True)["epoch"])
    except FileNotFoundError:
        return None


def _patch_saves(monkeypatch, wrap):
    """Route every per-seed checkpoint write (tanh engines and the other families) through `wrap`."""
    for mod, name in ((fam_train, "save_family_checkpoint"), (fused_mod, "save_checkpoint"),
                      (train_mod, "save_checkpoint")):
        monkeypatch.setattr(mod, name, wrap(getattr(mod, name)))


@pytest.mark.parametrize("family,construction,engine", CASES)
def test_kill_between_seed_writes_then_ctrl_c_resumes_bit_identically(tmp_path, monkeypatch, family, construction,
                                                                       engine):
    cfg = TrainConfig(epochs=5, batches_per_epoch=2, batch=4, lr=5e-3, clip=1.0, engine=engine)
    ref = fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg)
    paths = [str(tmp_path / f"{family}_s{s}.pt") for s in SEEDS]

    def kill_after_first_epoch_2_write(save):
        def saving(path, *a, **k):
            save(path, *a, **k)
            if torch.load(path, weights_only=True)["epoch"] == 2:
                raise Killed
        return saving
    with monkeypatch.context() as mp:
        _patch_saves(mp, kill_after_first_epoch_2_write)
        with pytest.raises(Killed):
            fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg, checkpoints=paths)
    first = [_epoch(p) for p in paths]
    assert first[0] == 2 and all(e in (1, None) for e in first[1:])  # the seeds stand at different epochs

    lagging = SEEDS[1]

    def ctrl_c_while_lagging_trains(batch_seed):
        def seeded(seed, ep, b):
            if (seed, ep, b) == (lagging, 2, 1):
                signal.raise_signal(signal.SIGINT)  # a real Ctrl-C: Python raises KeyboardInterrupt here
            return batch_seed(seed, ep, b)
        return seeded
    with monkeypatch.context() as mp:
        for mod in (ens_mod, train_mod, fused_mod):
            mp.setattr(mod, "batch_seed", ctrl_c_while_lagging_trains(mod.batch_seed))
        with pytest.raises(KeyboardInterrupt):
            fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg, checkpoints=paths)
    second = [_epoch(p) for p in paths]
    assert second[1] == 2 and second != [cfg.epochs] * len(SEEDS)

    resumed = fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg, checkpoints=paths)
    for k, (a, b) in enumerate(zip(ref, resumed)):
        sa, sb = a.state_dict(), b.state_dict()
        assert sa.keys() == sb.keys()
        diff = {n: float((sa[n] - sb[n]).abs().max()) for n in sa if not torch.equal(sa[n], sb[n])}
        assert not diff, f"seed {SEEDS[k]}: resumed weights differ from the uninterrupted run's: {diff}"
    # the losses of every epoch, also those trained before the interruptions, are the uninterrupted run's
    clean = [str(tmp_path / f"clean_s{s}.pt") for s in SEEDS]
    fam.train_family(TASK, family, construction, SEEDS, n_hidden=6, cfg=cfg, checkpoints=clean)
    for p, q in zip(paths, clean):
        lp, lq = (torch.load(f, weights_only=True)["losses"] for f in (p, q))
        assert len(lp) == cfg.epochs * cfg.batches_per_epoch and lp == lq
