"""The training settings of the Schur study's RNNs, shared by both engines."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TrainConfig", "batch_seed"]


@dataclass
class TrainConfig:
    """Training budget; the paper used epochs=30, batches_per_epoch=128, batch=64, lr=1e-3."""

    epochs: int = 30
    batches_per_epoch: int = 128
    batch: int = 64
    lr: float = 1e-3
    clip: float | None = None
    seed: int = 0
    threads: int | None = 1  # torch threads while training (small per-step ops: 1 is fastest); None: keep
    engine: str = "fused"  # "fused": all seeds at once (symfast.ops.rnn_train); "torch": torch.nn.RNN, one by one


def batch_seed(seed: int, ep: int, b: int) -> int:
    """The seed of batch b of epoch ep of the run seeded by `seed` (the same under either engine)."""
    return (seed * 1_000_003 + ep * 10_007 + b) % (2**62)
