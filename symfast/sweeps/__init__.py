"""Sweeps: grids of neural-field trainings, batched, resumable, shardable, on Ray or locally."""
from symfast.sweeps.run import finalize, load_results, run_sweep, train_batch
from symfast.sweeps.spec import Batch, SweepSpec, load_spec
from symfast.sweeps.store import SweepStore

__all__ = ["SweepSpec", "Batch", "load_spec", "SweepStore", "run_sweep", "train_batch", "finalize", "load_results"]
