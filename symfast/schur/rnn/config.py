"""The training settings of the Schur study's RNNs, shared by both engines."""
from __future__ import annotations

import math
from dataclasses import dataclass

from symfast.schur.rnn.model import CAYLEY_INITS

__all__ = ["TrainConfig", "SCHEDULES", "RUN_SETTINGS", "model_configs", "batch_seed", "lr_at", "task_at",
           "cayley_options"]

SCHEDULES = ("constant", "cosine")
# settings of a training run rather than of a model: one value for all the models trained in one call
RUN_SETTINGS = ("engine", "threads")


@dataclass
class TrainConfig:
    """Training budget; the paper used epochs=30, batches_per_epoch=128, batch=64, lr=1e-3, a constant
    learning rate and no clipping.

    schedule: "constant" (lr at every step) or "cosine": a linear warmup over the first `warmup`
    steps to lr, then a cosine decay to lr * min_lr_ratio at the last step of `epochs` (see `lr_at`).
    curriculum: a number of first epochs trained on shortened sequences (`task_at`).
    cayley_neg: the number of -1 entries of D in the scaled Cayley map W = cayley(P) D of "cayley"
    models (see `TanhRNN`); 0 is the paper's plain map. Other constructions ignore it.
    cayley_init: the init of "cayley" models' generator P (see `TanhRNN`): "identity" (the paper's
    construction, W near I), "spread" (W's eigenvalue angles spread over the circle) or "lattice"
    (the same angles on the multiples of 2 pi / 8, the copy task's replay period). Other
    constructions ignore it.
    """

    epochs: int = 30
    batches_per_epoch: int = 128
    batch: int = 64
    lr: float = 1e-3
    clip: float | None = None
    seed: int = 0
    threads: int | None = 1  # torch threads while training (small per-step ops: 1 is fastest); None: keep
    engine: str = "fused"  # "fused": all seeds at once (symfast.ops.rnn_train); "torch": torch.nn.RNN, one by one
    schedule: str = "constant"
    warmup: int = 0  # steps of linear warmup ("cosine" only)
    min_lr_ratio: float = 0.0  # the cosine schedule's final learning rate, as a fraction of lr
    curriculum: int = 0  # epochs of shortened sequences before the full task (see `task_at`); 0: none
    cayley_neg: int = 0  # -1 entries of the scaled Cayley map's D (cayley models only); 0: the plain map
    cayley_init: str = "identity"  # init of the Cayley generator (cayley models only): see CAYLEY_INITS

    def check(self) -> None:
        """Raise ValueError on a budget no engine can train with."""
        if self.epochs < 0 or self.batches_per_epoch < 1 or self.batch < 1:
            raise ValueError(f"bad training budget {self}")
        if self.clip is not None and not self.clip > 0:
            raise ValueError(f"clip must be None or > 0, got {self.clip}")
        if self.engine not in ("fused", "torch"):
            raise ValueError(f"engine must be 'fused' or 'torch', got {self.engine!r}")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; expected one of {list(SCHEDULES)}")
        if self.warmup < 0 or not 0 <= self.min_lr_ratio <= 1:
            raise ValueError(f"warmup must be >= 0 and min_lr_ratio in [0, 1], got {self.warmup}, {self.min_lr_ratio}")
        if not 0 <= self.curriculum <= self.epochs:
            raise ValueError(f"curriculum must be in 0..epochs ({self.epochs}), got {self.curriculum}")
        if isinstance(self.cayley_neg, bool) or int(self.cayley_neg) != self.cayley_neg or self.cayley_neg < 0:
            raise ValueError(f"cayley_neg must be an integer >= 0, got {self.cayley_neg!r}")
        if self.cayley_init not in CAYLEY_INITS:
            raise ValueError(f"cayley_init must be one of {CAYLEY_INITS}, got {self.cayley_init!r}")
        if self.schedule == "constant" and (self.warmup or self.min_lr_ratio):
            raise ValueError("warmup and min_lr_ratio apply to schedule='cosine' only")


def model_configs(cfg, n: int) -> list[TrainConfig]:
    """One checked TrainConfig per model of a call training n models: `cfg` (a TrainConfig, or None for
    the default) for all of them, or a sequence of n TrainConfigs, one per model.

    Models of one call may differ in every setting but RUN_SETTINGS (engine and threads); their seed
    field is ignored (each model's seed is passed beside it).

    Raises:
        ValueError: a sequence of the wrong length or holding something else than TrainConfigs, a
            config failing `TrainConfig.check`, or configs that differ in a run setting.
    """
    if cfg is None or isinstance(cfg, TrainConfig):
        cfgs = [cfg or TrainConfig()] * n
    else:
        try:
            cfgs = list(cfg)
        except TypeError:
            raise ValueError(f"cfg must be a TrainConfig or one TrainConfig per model, got {cfg!r}") from None
        if len(cfgs) != n or not all(isinstance(c, TrainConfig) for c in cfgs):
            raise ValueError(f"need one TrainConfig per model ({n}), got {len(cfgs)} entries "
                             f"({sorted({type(c).__name__ for c in cfgs})})")
    for c in {id(c): c for c in cfgs}.values():
        c.check()
    for f in RUN_SETTINGS:
        if len({getattr(c, f) for c in cfgs}) > 1:
            raise ValueError(f"the models of one call must share {f}, got {sorted({str(getattr(c, f)) for c in cfgs})}")
    return cfgs


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Learning rate of training step `step` (0-based over all epochs: ep * batches_per_epoch + b).

    "constant": cfg.lr. "cosine": cfg.lr * (step + 1) / warmup while step < warmup, then
    cfg.lr * (r + (1 - r) * (1 + cos(pi * p)) / 2) with r = min_lr_ratio and
    p = (step - warmup) / (total - warmup - 1) going from 0 to 1 at the last step
    (total = epochs * batches_per_epoch). A pure function of the step, so a resumed run
    follows the same schedule as an uninterrupted one.
    """
    if cfg.schedule == "constant":
        return cfg.lr
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    span = cfg.epochs * cfg.batches_per_epoch - cfg.warmup - 1
    p = min(1.0, (step - cfg.warmup) / span) if span > 0 else 1.0
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))


def task_at(task, cfg: TrainConfig, ep: int):
    """The task trained on in epoch `ep`: during the first cfg.curriculum epochs,
    `task.shortened((ep + 1) / (cfg.curriculum + 1))` (sequences growing linearly towards the full
    length; see each task's `shortened`), then `task` itself. A pure function of the epoch, so a
    resumed run sees the same tasks as an uninterrupted one."""
    return task.shortened((ep + 1) / (cfg.curriculum + 1)) if ep < cfg.curriculum else task


def batch_seed(seed: int, ep: int, b: int) -> int:
    """The seed of batch b of epoch ep of the run seeded by `seed` (the same under either engine)."""
    return (seed * 1_000_003 + ep * 10_007 + b) % (2**62)


def cayley_options(cfg: TrainConfig, recurrent: str) -> dict:
    """The Cayley settings (TanhRNN's cayley_neg and cayley_init) that a model of construction
    `recurrent` gets under `cfg`: cfg's for cayley models, the defaults for the others."""
    if recurrent != "cayley":
        return {"cayley_neg": 0, "cayley_init": "identity"}
    return {"cayley_neg": cfg.cayley_neg, "cayley_init": cfg.cayley_init}
