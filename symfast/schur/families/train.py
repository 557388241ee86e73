"""Building and training a model of any recurrent family on the study's tasks.

Families and their constructions (the matrix each ablates: `symfast.schur.families` docstring):
    "tanh"  h_t = tanh(W h_{t-1} + U x_t): CONSTRUCTIONS of `symfast.schur.rnn.TanhRNN`, trained by
            `symfast.schur.rnn.train_seeds` (its fused ensemble engine by default);
    "ssm"   linear state space, "dense" or "diagonal" A (`LinearSSM`);
    "gru", "lstm"  torch.nn.GRU / LSTM, "nobias" or "bias" (`GatedRNN`).
The other families train with the same batches per seed, masked MSE, Adam, optional clipping and
learning-rate schedule as the tanh RNN, with optional per-model checkpoints (resumed or reloaded).
cfg.engine "torch" trains one model after another in the plain
loop `symfast.schur.rnn.train.fit` (the reference); "fused" (the default) trains the GRU's and the
SSM's seeds together as one batched ensemble (`symfast.schur.families.ensemble`), equal to the
reference to float32 rounding. The LSTM keeps the plain loop under either engine: torch.nn.LSTM's own
C++ time loop measured faster than the batched Python loop (docs/results-log.md).
"""
from __future__ import annotations

import os

import torch

from symfast._progress import Progress
from symfast.schur.families.checkpoint import resume_family, save_family_checkpoint
from symfast.schur.families.ensemble import fit_ensemble
from symfast.schur.families.gated import GatedRNN
from symfast.schur.families.ssm import STRUCTURES, LinearSSM
from symfast.schur.rnn.config import TrainConfig
from symfast.schur.rnn.model import CONSTRUCTIONS as TANH_CONSTRUCTIONS
from symfast.schur.rnn.model import TanhRNN
from symfast.schur.rnn.tasks import Task
from symfast.schur.rnn.train import fit, train_seeds

__all__ = ["FAMILIES", "FAMILY_CONSTRUCTIONS", "ENSEMBLE_FAMILIES", "make_model", "train_family"]

FAMILIES = ("tanh", "ssm", "gru", "lstm")
FAMILY_CONSTRUCTIONS = {"tanh": TANH_CONSTRUCTIONS, "ssm": STRUCTURES, "gru": ("nobias", "bias"),
                        "lstm": ("nobias", "bias")}
ENSEMBLE_FAMILIES = ("gru", "ssm")  # trained as one batched ensemble under engine "fused"


def _check(family: str, construction: str) -> None:
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}; expected one of {FAMILIES}")
    if construction not in FAMILY_CONSTRUCTIONS[family]:
        raise ValueError(f"unknown {family} construction {construction!r}; "
                         f"expected one of {FAMILY_CONSTRUCTIONS[family]}")


def make_model(family: str, construction: str, n_in: int, n_hidden: int, n_out: int,
               generator: torch.Generator | None = None):
    """An untrained model of `family` with `construction` (see the module docstring), sizes I, H, O."""
    _check(family, construction)
    if family == "tanh":
        return TanhRNN(n_in, n_hidden, n_out, recurrent=construction, generator=generator)
    if family == "ssm":
        return LinearSSM(n_in, n_hidden, n_out, structure=construction, generator=generator)
    return GatedRNN(family, n_in, n_hidden, n_out, bias=construction == "bias", generator=generator)


def train_family(task: Task, family: str, construction: str, seeds, n_hidden: int = 64,
                 cfg: TrainConfig | None = None, progress: Progress = False, checkpoints=None) -> list:
    """One trained model per seed (init and batches from the seed), in the order of `seeds`.

    Args:
        task: a Task. family, construction: see the module docstring. seeds: list of ints.
        n_hidden: H. cfg: TrainConfig (budget, lr, schedule, clip, threads, engine: see the module docstring).
        progress: False (default), True (a tqdm bar per model) or a callable given progress lines.
        checkpoints: optional list of .pt paths, one per seed, rewritten after every epoch
            (`symfast.schur.families.checkpoint`): a finished checkpoint of the same settings is loaded
            instead of trained, a partly trained one resumes at its epoch (ending bit-identical to an
            uninterrupted run), any other is ignored and overwritten.

    Returns:
        list of models (TanhRNN, LinearSSM or GatedRNN).
    """
    _check(family, construction)
    cfg = cfg or TrainConfig()
    seeds = [int(s) for s in seeds]
    if cfg.epochs < 0 or cfg.batches_per_epoch < 1 or cfg.batch < 1 or not seeds:
        raise ValueError(f"bad training budget {cfg} or empty seeds {seeds}")
    if cfg.clip is not None and not cfg.clip > 0:
        raise ValueError(f"clip must be None or > 0, got {cfg.clip}")
    if checkpoints is not None:
        checkpoints = [os.fspath(c) for c in checkpoints]
        if len(checkpoints) != len(seeds):
            raise ValueError(f"need one checkpoint path per seed, got {len(checkpoints)} for {len(seeds)} seeds")
    if family == "tanh":
        return train_seeds(task, seeds, n_hidden, construction, cfg, checkpoints=checkpoints, progress=progress)
    prev = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    try:
        models = [make_model(family, construction, task.n_in, n_hidden, task.n_out,
                             generator=torch.Generator().manual_seed(s)) for s in seeds]
        opts = [torch.optim.Adam(m.parameters(), lr=cfg.lr) for m in models]
        losses = [[] for _ in models]
        starts = [resume_family(checkpoints[k], models[k], opts[k], task, cfg, seeds[k], losses[k]) if checkpoints
                  else 0 for k in range(len(models))]
        desc = f"{task.name} {family} {construction} H={n_hidden}"

        def saver(ks):
            def save(ep):
                for k in ks:
                    if starts[k] <= ep:
                        save_family_checkpoint(checkpoints[k], models[k], task, cfg, seeds[k], ep + 1, opts[k],
                                               losses[k])
            return save if checkpoints else None
        if cfg.engine == "fused" and family in ENSEMBLE_FAMILIES:
            if min(starts) < cfg.epochs:  # all models in one ensemble, those ahead frozen until the others reach them
                fit_ensemble(models, task, seeds, cfg, losses=losses, progress=progress, desc=f"{desc} seeds={seeds}",
                             opts=opts, start=starts, on_epoch=saver(range(len(models))))
        else:
            for k in range(len(models)):
                if starts[k] < cfg.epochs:
                    fit(models[k], task, seeds[k], cfg, opt=opts[k], losses=losses[k], start=starts[k],
                        on_epoch=saver([k]), progress=progress, desc=f"{desc} seed={seeds[k]}")
        return models
    finally:
        torch.set_num_threads(prev)
