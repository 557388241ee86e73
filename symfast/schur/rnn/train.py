"""Training loop as in arXiv 2606.18457 (Adam 1e-3, batch 64, epochs x batches), with checkpoints.

Loss: masked mean squared error. Each batch has its own seed (derived from the run's
seed, epoch and batch index), so a run is reproducible; gradients are clipped to norm 1
(stabilises long tanh rollouts; set clip=None to disable).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch

from symfast.schur.rnn.model import TanhRNN
from symfast.schur.rnn.tasks import Task, fvu, make_task

__all__ = ["TrainConfig", "train", "train_seeds", "save_checkpoint", "load_checkpoint", "evaluate"]


@dataclass
class TrainConfig:
    """Training budget; the paper used epochs=30, batches_per_epoch=128, batch=64, lr=1e-3."""

    epochs: int = 30
    batches_per_epoch: int = 128
    batch: int = 64
    lr: float = 1e-3
    clip: float | None = 1.0
    seed: int = 0
    threads: int | None = 1  # torch threads while training (small per-step ops: 1 is fastest); None: keep


def evaluate(model: TanhRNN, task: Task, batch: int = 256, seed: int = 10**6) -> float:
    """Held-out FVU of the model on one batch from `seed` (fused rollout kernel on CPU)."""
    from symfast.ops.rnn_rollout import rnn_rollout
    x, y, m = task.sample(batch, seed)
    with torch.no_grad():
        W = model.recurrent_weight(torch.float64).float()
        yh = rnn_rollout(W, model.input_weight.detach(), model.readout.detach(), x)
        return float(fvu(yh.double(), y.double(), m))


def _batch_seed(seed: int, ep: int, b: int) -> int:
    return (seed * 1_000_003 + ep * 10_007 + b) % (2**62)


def train(task: Task, n_hidden: int = 64, recurrent: str = "orthogonal", cfg: TrainConfig | None = None,
          checkpoint: str | None = None, progress: bool = True) -> TanhRNN:
    """Train one TanhRNN on `task` (seed cfg.seed); see `train_seeds`.

    Args:
        task: a Task instance. n_hidden: H. recurrent: construction (see TanhRNN).
        cfg: TrainConfig (default: the paper's budget, 30 x 128 batches).
        checkpoint: path of a .pt file rewritten at the end of every epoch.
        progress: show a tqdm bar.
    """
    cfg = cfg or TrainConfig()
    return train_seeds(task, [cfg.seed], n_hidden, recurrent, cfg,
                       checkpoints=None if checkpoint is None else [checkpoint], progress=progress)[0]


def train_seeds(task: Task, seeds, n_hidden: int = 64, recurrent: str = "orthogonal",
                cfg: TrainConfig | None = None, checkpoints=None, progress: bool = True) -> list[TanhRNN]:
    """Train one model per seed, all at once (stacked weights, batched matmuls).

    Each model gets exactly what `train` with that seed would give it (its own init, its own
    batches, its own gradient-norm clipping; Adam is elementwise, so stacking changes
    nothing but float rounding), at a fraction of the cost of a Python loop over seeds.

    Args:
        seeds: list of ints (cfg.seed is ignored).
        checkpoints: optional list of paths, one per seed, rewritten every epoch.
    """
    cfg = cfg or TrainConfig()
    seeds = [int(s) for s in seeds]
    if cfg.epochs < 0 or cfg.batches_per_epoch < 1 or cfg.batch < 1 or not seeds:
        raise ValueError(f"bad training budget {cfg} or empty seeds {seeds}")
    if checkpoints is not None and len(checkpoints) != len(seeds):
        raise ValueError(f"need one checkpoint path per seed, got {len(checkpoints)} for {len(seeds)}")
    prev_threads = torch.get_num_threads()
    if cfg.threads:
        torch.set_num_threads(int(cfg.threads))
    try:
        return _train_seeds(task, seeds, n_hidden, recurrent, cfg, checkpoints, progress)
    finally:
        torch.set_num_threads(prev_threads)


def _train_seeds(task, seeds, n_hidden, recurrent, cfg, checkpoints, progress):
    models = [TanhRNN(task.n_in, n_hidden, task.n_out, recurrent=recurrent,
                      generator=torch.Generator().manual_seed(s)) for s in seeds]
    S = len(seeds)
    rec = "P" if recurrent == "cayley" else "W"
    U = torch.stack([m.input_weight.detach() for m in models]).requires_grad_()
    V = torch.stack([m.readout.detach() for m in models]).requires_grad_()
    R = torch.stack([getattr(m, rec).detach() for m in models]).requires_grad_()
    params = [U, V, R]
    opt = torch.optim.Adam(params, lr=cfg.lr)
    eye = torch.eye(n_hidden)
    total = cfg.epochs * cfg.batches_per_epoch
    bar = None
    if progress:
        from tqdm.auto import tqdm
        bar = tqdm(total=total, desc=f"{task.name} {recurrent} H={n_hidden} seeds={seeds}", leave=False)

    def sync():
        with torch.no_grad():
            for k, m in enumerate(models):
                m.input_weight.copy_(U[k])
                m.readout.copy_(V[k])
                getattr(m, rec).copy_(R[k])

    for ep in range(cfg.epochs):
        for b in range(cfg.batches_per_epoch):
            data = [task.sample(cfg.batch, seed=_batch_seed(s, ep, b)) for s in seeds]
            x, y, msk = (torch.stack(d) for d in zip(*data))  # [S, B, T, *]
            if recurrent == "cayley":
                A = R - R.transpose(1, 2)
                W = torch.linalg.solve(eye + A, eye - A)
            else:
                W = R
            ux = x @ U.transpose(1, 2).unsqueeze(1)  # [S, B, T, H]
            h = torch.zeros(S, cfg.batch, n_hidden)
            hs = []
            Wt = W.transpose(1, 2)
            for t in range(x.shape[2]):
                h = torch.tanh(torch.bmm(h, Wt) + ux[:, :, t])
                hs.append(h)
            yh = torch.stack(hs, 2) @ V.transpose(1, 2).unsqueeze(1)
            per = (((yh - y) ** 2) * msk).sum((1, 2, 3)) / msk.sum((1, 2, 3)).clamp_min(1)  # [S]
            opt.zero_grad(set_to_none=True)
            per.sum().backward()
            if cfg.clip:
                with torch.no_grad():
                    norms = torch.sqrt(sum(p.grad.pow(2).flatten(1).sum(1) for p in params))  # [S]
                    scale = (cfg.clip / (norms + 1e-6)).clamp(max=1.0)
                    for p in params:
                        p.grad.mul_(scale.view(-1, *([1] * (p.ndim - 1))))
            opt.step()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{per.mean().item():.4f}", refresh=False)
        if checkpoints:
            sync()
            for k, m in enumerate(models):
                save_checkpoint(checkpoints[k], m, task, TrainConfig(**{**vars(cfg), "seed": seeds[k]}), epoch=ep + 1)
    if bar is not None:
        bar.close()
    sync()
    return models


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
