"""On-disk store of a sweep: one atomically written file per finished batch.

Layout of a sweep directory:
    spec.json                the normalised spec and its fingerprint
    batches/<batch_id>.pt    trained weights + per-cell rows + per-model scores of one batch
    results.parquet/.csv     the tidy table (written by `finalize`)
    observed.csv             G_obs per (shape, configuration) over seeds
A batch file appears only once complete (write to a temporary name, fsync, rename),
so a crash, kill -9 or full disk loses at most the batches in flight and never
leaves a half-written result; rerunning skips finished batches.
"""
from __future__ import annotations

import glob
import io
import json
import os
import shutil

import torch

from symfast.readout.sweeps.spec import SweepSpec

__all__ = ["SweepStore", "atomic_write_bytes"]


def atomic_write_bytes(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class SweepStore:
    """A sweep directory bound to one spec (refuses a directory written for another spec)."""

    def __init__(self, root: str, spec: SweepSpec):
        self.root = os.fspath(root)
        self.spec = spec
        try:
            os.makedirs(os.path.join(self.root, "batches"), exist_ok=True)
        except OSError as e:
            raise ValueError(f"cannot create sweep directory {self.root!r}: {e.strerror}") from None
        meta = {"fingerprint": spec.fingerprint(), "spec": spec.to_dict()}
        path = os.path.join(self.root, "spec.json")
        if os.path.exists(path):
            with open(path) as f:
                old = json.load(f)
            if old["fingerprint"] != meta["fingerprint"]:
                raise ValueError(f"{self.root} holds a different sweep (spec fingerprint {old['fingerprint']}); "
                                 "use another --out directory")
        else:
            atomic_write_bytes(path, json.dumps(meta, indent=2, sort_keys=True).encode())
        for stale in glob.glob(os.path.join(self.root, "batches", "*.tmp-*")):
            os.remove(stale)  # leftovers of a process killed mid-write

    @staticmethod
    def open(root: str) -> "SweepStore":
        """Open an existing sweep directory with the spec stored in it."""
        path = os.path.join(os.fspath(root), "spec.json")
        if not os.path.exists(path):
            raise ValueError(f"{root} is not a sweep directory (no spec.json)")
        with open(path) as f:
            return SweepStore(root, SweepSpec(**json.load(f)["spec"]))

    def batch_path(self, batch_id: str) -> str:
        return os.path.join(self.root, "batches", f"{batch_id}.pt")

    def done(self) -> set[str]:
        return {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(self.root, "batches", "*.pt"))}

    def write_batch(self, batch_id: str, payload: dict) -> None:
        buf = io.BytesIO()
        torch.save(payload, buf)
        atomic_write_bytes(self.batch_path(batch_id), buf.getvalue())

    def read_batch(self, batch_id: str) -> dict:
        return torch.load(self.batch_path(batch_id), map_location="cpu", weights_only=False)

    def missing(self) -> list:
        done = self.done()
        return [b for b in self.spec.plan() if b.batch_id not in done]

    def merge_from(self, other: "SweepStore") -> int:
        """Copy finished batches of another directory of the same sweep; returns how many were new."""
        if other.spec.fingerprint() != self.spec.fingerprint():
            raise ValueError(f"cannot merge {other.root}: it holds a different sweep")
        new = 0
        for bid in sorted(other.done()):
            dst = self.batch_path(bid)
            if os.path.exists(dst):
                continue  # batches are deterministic: the same id means the same content
            shutil.copyfile(other.batch_path(bid), dst + ".tmp-merge")
            os.replace(dst + ".tmp-merge", dst)
            new += 1
        return new
