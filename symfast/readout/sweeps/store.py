"""On-disk store of a sweep: one atomically written, validated file per finished batch.

Layout of a sweep directory:
    spec.json                the normalised spec and its fingerprint
    batches/<batch_id>.pt    trained weights + per-cell rows + per-model scores of one batch
    results.parquet/.csv     the tidy table (written by `finalize`)
    observed.csv             G_obs per (shape, configuration) over seeds
A batch file appears only once complete (write to a temporary name, fsync, rename,
fsync the directory), so a crash, kill -9 or full disk loses at most the batches in
flight and never leaves a half-written result; rerunning skips finished batches.

Batch files are data, never code: they are read with `torch.load(weights_only=True)`,
which refuses pickled objects, and a batch counts as done only when its content
matches the plan (its id, configuration, cells, scores and finite weights). A file
that fails is not done: `run_sweep` moves it aside and trains the batch again, and
`merge` never copies it. A store reads only the files its plan names, each at most
`batch_bytes_bound(batch, observables)` bytes, and refuses (without reading) one that
resolves outside the sweep directory or is not a regular file (a symbolic link to
/dev/zero, a FIFO): a directory written by someone else cannot make it read without bound.

Several processes may write one directory at once (shards of a sweep). Writes and loads
are `symfast._io`'s: temporary files are named by host and PID, and only those of dead
local processes are cleaned up.
"""
from __future__ import annotations

import glob
import io
import json
import math
import os

import torch

from symfast._io import HOST_TAG, atomic_write_bytes, read_bounded, remove_stale_temps, safe_load
from symfast.readout.sweeps.spec import Batch, SweepSpec, make_encoding

__all__ = ["SweepStore", "BatchError", "batch_bytes_bound", "SPEC_BYTES"]


class BatchError(ValueError):
    """A batch file that is unreadable or does not hold the batch its name says."""


# What a batch file may hold, from its plan (see batch_bytes_bound). Rows: a pickled cell or score
# row takes a few hundred bytes; at most ELEMENTS candidate elements are scored per observable
# (16 in 2D, 144 in 3D); SLACK covers the zip container and the batch's description.
ROW_BYTES = 1024
ELEMENTS = 256
SLACK = 1 << 20
SPEC_BYTES = 64 << 20  # spec.json: a list of 10^6 seeds takes about 8 MB


def batch_bytes_bound(batch: Batch, observables: list, features: int | None = None) -> int:
    """Most bytes the file of `batch` may take; a larger file is refused unread.

    Twice the tensors the batch stores (8 bytes per float32 value: the weights and biases of
    `batch.size` MLPs of widths [features, *hidden, 1] and `steps` losses per model), ROW_BYTES per
    cell and per (cell, observable, element) score row for up to ELEMENTS elements, 64 bytes per
    encoding feature, plus SLACK. `features`: the encoding's dimension (built from the plan if None).
    """
    d = make_encoding(batch.encoding).dim if features is None else int(features)
    widths = [d, *batch.hidden, 1]
    params = sum((a + 1) * b for a, b in zip(widths, widths[1:]))
    return (8 * batch.size * (params + batch.steps) + 64 * d
            + ROW_BYTES * batch.size * (1 + len(observables) * ELEMENTS) + SLACK)


def _load(path: str, data: bytes | None = None):
    """The payload of a batch file (`symfast._io.safe_load`: never runs code); errors become BatchError."""
    try:
        return safe_load(path, "sweep batch", data=data)
    except (ValueError, OSError) as e:  # truncated zip, pickle payload refused, bad magic, ...: not a batch
        if isinstance(e, FileNotFoundError):
            raise
        raise BatchError(f"unreadable: {e}") from None


def _jsonable(x):
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    return x


def validate_batch(payload, batch: Batch, observables: list) -> None:
    """Raise BatchError unless `payload` is the complete result of `batch` (cheap structural checks)."""
    if not isinstance(payload, dict) or not {"batch", "cells", "scores", "ensemble"} <= set(payload):
        raise BatchError("not a sweep batch (missing keys)")
    if json.dumps(_jsonable(payload["batch"]), sort_keys=True) != json.dumps(_jsonable(batch.__dict__),
                                                                              sort_keys=True):
        got = payload["batch"].get("batch_id") if isinstance(payload["batch"], dict) else None
        raise BatchError(f"holds batch {got!r}, not the planned batch {batch.batch_id!r}")
    cells = payload["cells"]
    want = [(s, seed) for s in batch.shapes for seed in batch.seeds]
    if len(cells) != batch.size or sorted((c["shape"], c["seed"]) for c in cells) != sorted(want):
        raise BatchError(f"has {len(cells)} cells, expected the {batch.size} (shape, seed) pairs of the batch")
    ids = [f"{batch.batch_id}:{i}" for i in range(batch.size)]
    if [c["cell_id"] for c in cells] != ids or any(c["batch_id"] != batch.batch_id for c in cells):
        raise BatchError("cell ids do not match the batch id")
    if not all(isinstance(c["final_loss"], float) and math.isfinite(c["final_loss"]) for c in cells):
        raise BatchError("a final loss is missing or not finite")
    per: dict = {}
    for r in payload["scores"]:
        if r["cell_id"] not in ids or r["observable"] not in observables or not math.isfinite(r["score"]):
            raise BatchError(f"bad score row {r!r}")
        per[(r["cell_id"], r["observable"])] = per.get((r["cell_id"], r["observable"]), 0) + 1
    counts = set(per.values())
    if len(per) != len(ids) * len(observables) or len(counts) != 1:
        raise BatchError("scores do not cover every cell and observable equally")
    ens = payload["ensemble"]
    for kind in ("weights", "biases"):
        for t in ens[kind]:
            if not isinstance(t, torch.Tensor) or t.shape[0] != batch.size or not torch.isfinite(t).all():
                raise BatchError(f"ensemble {kind} are not [{batch.size}, ...] finite tensors")
    if list(ens["shapes"]) != [c["shape"] for c in cells] or list(ens["seeds"]) != [c["seed"] for c in cells]:
        raise BatchError("ensemble members do not match the cells")


class SweepStore:
    """A sweep directory bound to one spec (refuses a directory written for another spec)."""

    def __init__(self, root: str, spec: SweepSpec):
        self.root = os.fspath(root)
        self.spec = spec
        self._plan = {b.batch_id: b for b in spec.plan()}
        self._valid: dict = {}  # path -> (mtime_ns, size) of files that validated
        self._features: dict = {}  # encoding (as JSON) -> its feature dimension
        try:
            os.makedirs(os.path.join(self.root, "batches"), exist_ok=True)
        except OSError as e:
            raise ValueError(f"cannot create sweep directory {self.root!r}: {e.strerror}") from None
        meta = {"fingerprint": spec.fingerprint(), "spec": spec.to_dict()}
        path = os.path.join(self.root, "spec.json")
        if os.path.exists(path):
            old = _read_spec_json(path)
            if old["fingerprint"] != meta["fingerprint"]:
                raise ValueError(f"{self.root} holds a different sweep (spec fingerprint {old['fingerprint']}); "
                                 "use another --out directory")
        else:
            atomic_write_bytes(path, json.dumps(meta, indent=2, sort_keys=True).encode())
        remove_stale_temps(os.path.join(self.root, "batches"))  # leftovers of processes killed mid-write

    @staticmethod
    def open(root: str) -> "SweepStore":
        """Open an existing sweep directory with the spec stored in it."""
        path = os.path.join(os.fspath(root), "spec.json")
        if not os.path.exists(path):
            raise ValueError(f"{root} is not a sweep directory (no spec.json)")
        try:
            spec = SweepSpec(**_read_spec_json(path)["spec"])
        except (TypeError, KeyError) as e:
            raise ValueError(f"{path} is not a valid sweep spec ({e})") from None
        return SweepStore(root, spec)

    def validate(self, payload, batch) -> None:
        """Raise BatchError unless `payload` is the complete result of planned `batch` (a store of
        another kind of batch overrides this and `bytes_bound`)."""
        validate_batch(payload, batch, self.spec.observables)

    def batch_path(self, batch_id: str) -> str:
        return os.path.join(self.root, "batches", f"{batch_id}.pt")

    def bytes_bound(self, batch_id: str) -> int:
        """The size bound of a planned batch's file (`batch_bytes_bound`)."""
        batch = self._plan[batch_id]
        key = json.dumps(batch.encoding, sort_keys=True)
        if key not in self._features:
            self._features[key] = make_encoding(batch.encoding).dim
        return batch_bytes_bound(batch, self.spec.observables, self._features[key])

    def _read(self, batch_id: str, path: str | None = None) -> bytes:
        """The bytes of a planned batch's file (of this store, or `path` of another copy of the sweep)."""
        if batch_id not in self._plan:
            raise BatchError(f"{batch_id!r} is not a batch of this sweep")
        path = path or self.batch_path(batch_id)
        try:
            return read_bounded(path, self.bytes_bound(batch_id), inside=os.path.dirname(os.path.dirname(path)))
        except FileNotFoundError:
            raise
        except (ValueError, OSError) as e:
            raise BatchError(str(e) if isinstance(e, ValueError) else f"unreadable: {e}") from None

    def _files(self) -> set[str]:
        return {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(self.root, "batches", "*.pt"))}

    def check(self, batch_id: str) -> None:
        """Raise BatchError unless the stored file of `batch_id` is a valid result of that planned batch."""
        path = self.batch_path(batch_id)
        st = os.stat(path)
        if self._valid.get(path) == (st.st_mtime_ns, st.st_size):
            return
        if batch_id not in self._plan:
            raise BatchError(f"{batch_id!r} is not a batch of this sweep")
        self.validate(_load(path, self._read(batch_id)), self._plan[batch_id])
        self._valid[path] = (st.st_mtime_ns, st.st_size)

    def done(self) -> set[str]:
        """Ids of planned batches whose files exist and validate."""
        ok = set()
        for bid in self._files() & set(self._plan):
            try:
                self.check(bid)
                ok.add(bid)
            except (BatchError, FileNotFoundError):
                pass
        return ok

    def invalid(self) -> dict[str, str]:
        """{batch id: reason} for files under batches/ that are not valid results of this sweep."""
        bad = {}
        for bid in sorted(self._files()):
            try:
                self.check(bid)
            except BatchError as e:
                bad[bid] = str(e)
            except FileNotFoundError:
                pass
        return bad

    def quarantine(self, batch_id: str) -> str:
        """Move an invalid batch file aside (kept for inspection, no longer counted as done)."""
        dst = f"{self.batch_path(batch_id)}.invalid-{HOST_TAG}-{os.getpid()}"
        os.replace(self.batch_path(batch_id), dst)
        return dst

    def write_batch(self, batch_id: str, payload: dict) -> None:
        buf = io.BytesIO()
        torch.save(payload, buf)
        atomic_write_bytes(self.batch_path(batch_id), buf.getvalue())

    def read_batch(self, batch_id: str) -> dict:
        """The validated payload of a finished batch (never unpickles code)."""
        if batch_id not in self._plan:
            raise BatchError(f"{batch_id!r} is not a batch of this sweep")
        payload = _load(self.batch_path(batch_id), self._read(batch_id))
        try:
            self.validate(payload, self._plan[batch_id])
        except BatchError as e:
            raise BatchError(f"{self.batch_path(batch_id)}: {e}") from None
        return payload

    def missing(self) -> list:
        done = self.done()
        return [b for b in self._plan.values() if b.batch_id not in done]

    def merge_from(self, other: "SweepStore") -> tuple[int, dict]:
        """Copy valid batches of another directory of the same sweep that are absent or invalid here.

        Returns (number copied, {batch id: reason} of the source's files that were refused). Each
        copy is validated from the bytes it writes and written atomically with fsync.
        """
        if other.spec.fingerprint() != self.spec.fingerprint():
            raise ValueError(f"cannot merge {other.root}: it holds a different sweep")
        new, refused = 0, {}
        mine = self.done()
        for bid in sorted(other._files()):
            if bid in mine:
                continue
            try:
                data = self._read(bid, other.batch_path(bid))  # refuses unplanned, oversized, linked-out files
                self.validate(_load(other.batch_path(bid), data), self._plan[bid])
            except BatchError as e:
                refused[bid] = str(e)
                continue
            except FileNotFoundError:  # removed since listed, or a link to nothing
                refused[bid] = f"{other.batch_path(bid)}: no such file"
                continue
            atomic_write_bytes(self.batch_path(bid), data)
            new += 1
        return new, refused


def _read_spec_json(path: str) -> dict:
    data = read_bounded(path, SPEC_BYTES, inside=os.path.dirname(path))  # ValueError naming path, if refused
    try:
        meta = json.loads(data)
        if not isinstance(meta, dict) or "fingerprint" not in meta or "spec" not in meta:
            raise ValueError("missing fingerprint or spec")
        return meta
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is corrupt ({e}); restore it or use another --out directory") from None
