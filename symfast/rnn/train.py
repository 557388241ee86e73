"""Training loop as in papers/003 (Adam 1e-3, batch 64, epochs x batches), with checkpoints.

Loss: masked mean squared error. Each batch has its own seed (derived from the run's
seed, epoch and batch index), so a run is reproducible; gradients are clipped to norm 1
(stabilises long tanh rollouts; set clip=None to disable).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from symfast.rnn.model import TanhRNN
from symfast.rnn.tasks import Task, fvu, make_task

__all__ = ["TrainConfig", "train", "save_checkpoint", "load_checkpoint", "evaluate"]


@dataclass
class TrainConfig:
    """Training budget; the paper used epochs=30, batches_per_epoch=128, batch=64, lr=1e-3."""

    epochs: int = 30
    batches_per_epoch: int = 128
    batch: int = 64
    lr: float = 1e-3
    clip: float | None = 1.0
    seed: int = 0


def evaluate(model: TanhRNN, task: Task, batch: int = 256, seed: int = 10**6) -> float:
    """Held-out FVU of the model on one batch from `seed`."""
    x, y, m = task.sample(batch, seed)
    with torch.no_grad():
        return float(fvu(model(x), y, m))


def train(task: Task, n_hidden: int = 64, recurrent: str = "orthogonal", cfg: TrainConfig | None = None,
          checkpoint: str | None = None, progress: bool = True) -> TanhRNN:
    """Train a TanhRNN on `task`; saves a checkpoint at the end of every epoch if a path is given.

    Args:
        task: a Task instance.
        n_hidden: H. recurrent: construction (see TanhRNN).
        cfg: TrainConfig (default: the paper's budget).
        checkpoint: path of a .pt file (model, task and training config).
        progress: show a tqdm bar.
    """
    cfg = cfg or TrainConfig()
    if cfg.epochs < 0 or cfg.batches_per_epoch < 1 or cfg.batch < 1:
        raise ValueError(f"bad training budget {cfg}")
    g = torch.Generator().manual_seed(cfg.seed)
    model = TanhRNN(task.n_in, n_hidden, task.n_out, recurrent=recurrent, generator=g)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    total = cfg.epochs * cfg.batches_per_epoch
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, desc=f"{task.name} {recurrent} H={n_hidden} seed={cfg.seed}", leave=False)
    for ep in range(cfg.epochs):
        for b in range(cfg.batches_per_epoch):
            x, y, m = task.sample(cfg.batch, seed=(cfg.seed * 1_000_003 + ep * 10_007 + b) % (2**62))
            yh = model(x)
            loss = (((yh - y) ** 2) * m).sum() / m.sum().clamp_min(1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip)
            opt.step()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss.item():.4f}", refresh=False)
        if checkpoint:
            save_checkpoint(checkpoint, model, task, cfg, epoch=ep + 1)
    if bar is not None:
        bar.close()
    return model


def save_checkpoint(path: str, model: TanhRNN, task: Task, cfg: TrainConfig, epoch: int) -> None:
    """Write model weights, model/task/training config to `path` (atomically)."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    tmp = path + ".tmp"
    torch.save({"model": model.config(), "state": model.state_dict(), "task": task.config(),
                "train": vars(cfg).copy(), "epoch": epoch}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str) -> tuple[TanhRNN, Task, dict]:
    """(model, task, info) from a checkpoint written by `train` / `save_checkpoint`."""
    ck = torch.load(path, map_location="cpu", weights_only=True)
    model = TanhRNN(**ck["model"])
    model.load_state_dict(ck["state"])
    tcfg = dict(ck["task"])
    task = make_task(tcfg.pop("name"), **tcfg)
    return model, task, {"train": ck["train"], "epoch": ck["epoch"]}
