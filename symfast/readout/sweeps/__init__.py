"""Sweeps: grids of neural-field trainings, batched, resumable, shardable, on Ray or locally."""
from symfast.readout.sweeps.run import finalize, load_results, run_sweep, train_batch
from symfast.readout.sweeps.spec import Batch, SweepSpec, load_spec
from symfast.readout.sweeps.store import SweepStore

__all__ = ["SweepSpec", "Batch", "load_spec", "SweepStore", "run_sweep", "train_batch", "finalize", "load_results"]
