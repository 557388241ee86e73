"""Training as in the paper (Adam 1e-3, batch 64, 30 epochs x 128 batches), with checkpoints.

Loss: masked mean squared error. Each batch has its own seed (derived from the run's
seed, epoch and batch index), so a run is reproducible. No gradient clipping by default
(the paper has none); `clip=c` clips each model's gradient norm to c. The learning rate is
constant (the paper's) unless `TrainConfig.schedule` sets a schedule (`config.lr_at`).

Engines (`TrainConfig.engine`): "fused" (default) trains all seeds at once through the fused
ensemble kernel `symfast.ops.rnn_train` (train_fused.py); "torch" trains them one after
another on torch.nn.RNN. Same init, batches, loss and Adam; float32 results differ by
rounding only, and checkpoints of either engine resume under the other.
"""
from __future__ import annotations

import dataclasses

import torch

from symfast._progress import Progress, reporter
from symfast.schur.rnn.checkpoint import load_checkpoint, resume, save_checkpoint
from symfast.schur.rnn.config import TrainConfig, batch_seed, cayley_options, lr_at, model_configs, task_at
from symfast.schur.rnn.model import TanhRNN
from symfast.schur.rnn.tasks import EVAL_SEED, Task, fvu

__all__ = ["TrainConfig", "train", "train_seeds", "train_many", "save_checkpoint", "load_checkpoint", "evaluate",
           "fit"]


def evaluate(model: TanhRNN, task: Task, batch: int = 256, seed: int = EVAL_SEED) -> float:
    """Held-out FVU of the model on one batch from `seed` (fused rollout kernel on CPU)."""
    from symfast.ops.rnn_rollout import rnn_rollout
    x, y, m = task.sample(batch, seed)
    with torch.no_grad():
        W = model.recurrent_weight(torch.float64).float()
        yh = rnn_rollout(W, model.input_weight.detach(), model.readout.detach(), x)
        return float(fvu(yh.double(), y.double(), m))


def train(task: Task, n_hidden: int = 64, recurrent: str = "orthogonal", cfg: TrainConfig | None = None,
          checkpoint: str | None = None, progress: Progress = False, seed: int | None = None) -> TanhRNN:
    """Train one TanhRNN on `task`; see `train_seeds` for several (seeds=, a count or a list).

    Args:
        task: a Task instance. n_hidden: H. recurrent: construction (see TanhRNN).
        cfg: TrainConfig (default: the paper's budget, 30 x 128 batches).
        checkpoint: path of a .pt file rewritten at the end of every epoch.
        progress: False (default), True (a tqdm bar) or a callable given progress lines.
        seed: the model's seed (default cfg.seed); given, it replaces cfg.seed.
    """
    cfg = cfg or TrainConfig()
    if seed is not None:
        cfg = dataclasses.replace(cfg, seed=seed)
    return train_seeds(task, [cfg.seed], n_hidden, recurrent, cfg,
                       checkpoints=None if checkpoint is None else [checkpoint], progress=progress)[0]


def train_seeds(task: Task, seeds, n_hidden: int = 64, recurrent: str = "orthogonal",
                cfg: TrainConfig | None = None, checkpoints=None, progress: Progress = False) -> list[TanhRNN]:
    """Train one model per seed; each gets exactly what `train` with that seed gives it.

    Every model has its own init, its own batches and its own optimiser. cfg.engine "fused"
    trains the seeds together through the fused kernel (its threads: cfg.threads); "torch"
    trains them one after another on torch.nn.RNN (its C++ time loop).

    Args:
        seeds: a count n (seeds 0..n-1) or a list of ints (cfg.seed is ignored).
        checkpoints: optional list of paths, one per seed, rewritten every epoch.
    """
    if isinstance(seeds, bool) or (isinstance(seeds, int) and seeds < 1):
        raise ValueError(f"seeds must be a positive count or a list of ints, got {seeds!r}")
    seeds = list(range(seeds)) if isinstance(seeds, int) else list(seeds)
    return train_many(task, seeds, [n_hidden] * len(seeds), [recurrent] * len(seeds), cfg, checkpoints, progress)


def train_many(task: Task, seeds, widths, recurrents, cfg=None, checkpoints=None,
               progress: Progress = False) -> list[TanhRNN]:
    """Train one model per entry on `task`: model k with seed seeds[k], width widths[k],
    construction recurrents[k] and settings cfg (one TrainConfig for all, or cfg[k]); each gets
    exactly what `train` with those settings gives it.

    The engine "fused" trains all of them together, whatever their settings: per step one call of
    the fused kernel for the models whose batches have the same shape (widths padded to the widest;
    see `symfast.schur.rnn.train_fused.train_models`), on `threads` threads; "torch" trains them one
    after another on torch.nn.RNN.

    Args:
        seeds, widths, recurrents: one entry per model (equal lengths).
        cfg: a TrainConfig (default: the paper's budget) or a sequence of one per model, which may
            differ in everything but engine and threads (`config.model_configs`).
        checkpoints: optional list of paths, one per model, rewritten every epoch; a partly trained
            checkpoint of the same run resumes at its epoch.
    """
    seeds, widths, recurrents = [int(s) for s in seeds], [int(h) for h in widths], list(recurrents)
    if not seeds:
        raise ValueError("empty seeds")
    if not len(seeds) == len(widths) == len(recurrents):
        raise ValueError(f"need one width and one construction per seed, got {len(seeds)} seeds, "
                         f"{len(widths)} widths, {len(recurrents)} constructions")
    cfgs = model_configs(cfg, len(seeds))
    if checkpoints is not None and len(checkpoints) != len(seeds):
        raise ValueError(f"need one checkpoint path per model, got {len(checkpoints)} for {len(seeds)}")
    prev_threads = torch.get_num_threads()
    if cfgs[0].threads:
        torch.set_num_threads(int(cfgs[0].threads))
    try:
        if cfgs[0].engine == "fused":
            from symfast.schur.rnn.train_fused import train_models
            return train_models(task, seeds, widths, recurrents, cfgs, checkpoints, progress)
        return [_train_one(task, s, h, r, cfgs[k], None if checkpoints is None else checkpoints[k], progress)
                for k, (s, h, r) in enumerate(zip(seeds, widths, recurrents))]
    finally:
        torch.set_num_threads(prev_threads)


def _train_one(task, seed, n_hidden, recurrent, cfg, checkpoint, progress):
    model = TanhRNN(task.n_in, n_hidden, task.n_out, recurrent=recurrent,
                    generator=torch.Generator().manual_seed(seed), **cayley_options(cfg, recurrent))
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    losses: list = []  # per batch, kept in the checkpoint for the loss-curve figure
    start = resume(checkpoint, model, opt, task, seed, cfg, losses) if checkpoint else 0

    def save(ep):
        save_checkpoint(checkpoint, model, task, TrainConfig(**{**vars(cfg), "seed": seed}), epoch=ep + 1,
                        optimizer=opt, losses=losses)
    return fit(model, task, seed, cfg, opt=opt, losses=losses, start=start, on_epoch=save if checkpoint else None,
               progress=progress, desc=f"{task.name} {recurrent} H={n_hidden} seed={seed}")


def fit(model, task: Task, seed: int, cfg: TrainConfig, opt=None, losses: list | None = None, start: int = 0,
        on_epoch=None, progress: Progress = False, desc: str = ""):
    """The plain training loop of every model of the study (one model, eager PyTorch).

    Masked MSE of `model(x)` against the targets, Adam on all of `model`'s parameters at the
    learning rate `lr_at(cfg, step)` (cfg.lr unless cfg.schedule says otherwise),
    batch b of epoch ep drawn from `batch_seed(seed, ep, b)` (so any model trained with the same seed
    sees the same batches), each model's gradient norm clipped to cfg.clip when set.

    Args:
        model: an nn.Module mapping x [B, T, I] to y [B, T, O].
        task, seed, cfg: the task, the run's seed and budget (cfg.seed is ignored).
        opt: the optimiser (default: a fresh Adam); losses: list the per-batch losses are appended to;
        start: first epoch (a resumed run); on_epoch(ep): called after each epoch (checkpoints).
        progress, desc: False, True (a tqdm bar) or a callable given progress lines; the bar's label.

    Returns:
        model, trained in place.
    """
    params = list(model.parameters())
    opt = torch.optim.Adam(params, lr=cfg.lr) if opt is None else opt
    losses = [] if losses is None else losses
    rep = reporter(progress, "symfast.schur")
    bar = rep.bar(cfg.epochs * cfg.batches_per_epoch, desc=desc, initial=start * cfg.batches_per_epoch)
    for ep in range(start, cfg.epochs):
        for b in range(cfg.batches_per_epoch):
            x, y, msk = task_at(task, cfg, ep).sample(cfg.batch, seed=batch_seed(seed, ep, b))
            loss = (((model(x) - y) ** 2) * msk).sum() / msk.sum().clamp_min(1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip:
                torch.nn.utils.clip_grad_norm_(params, cfg.clip)
            for group in opt.param_groups:
                group["lr"] = lr_at(cfg, ep * cfg.batches_per_epoch + b)
            opt.step()
            losses.append(loss.item())
            if rep:
                bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
            bar.update(1)
        if on_epoch is not None:
            on_epoch(ep)
    bar.close()
    return model
