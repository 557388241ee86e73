"""Sweep specifications: a grid of neural-field training cells, and its batched plan.

A cell is one model: (shape, encoding, hidden widths, activation, steps, lr, points,
seed). The planner groups cells that can share one batched `fit_sdf` call (same
encoding and architecture and schedule) into batches of at most `max_batch` models;
batches are the unit of execution, storage, resumption and sharding.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from dataclasses import asdict, dataclass, field

from symfast.readout import shapes as shp
from symfast.readout.encodings import DyadicAxisPE, FourierPE, MultiAxisPE, RandomFourierPE, TriAxisPE

__all__ = ["SweepSpec", "Batch", "load_spec", "make_encoding"]

_ENCODINGS = {"dyadic": DyadicAxisPE, "triaxis": TriAxisPE, "multiaxis": MultiAxisPE, "rff": RandomFourierPE}


def make_encoding(enc: dict) -> FourierPE:
    """Build an encoding from {"name": "dyadic" | "triaxis" | "multiaxis" | "rff", **params}."""
    params = {k: v for k, v in enc.items() if k != "name"}
    if enc.get("name") not in _ENCODINGS:
        raise ValueError(f"unknown encoding {enc.get('name')!r}; choose from {sorted(_ENCODINGS)}")
    try:
        return _ENCODINGS[enc["name"]](**params)
    except TypeError as e:
        raise ValueError(f"bad parameters for encoding {enc['name']!r}: {e}") from None


def _norm_encoding(e) -> dict:
    return {"name": e} if isinstance(e, str) else dict(e)


@dataclass(frozen=True)
class Batch:
    """Cells trained together: all `shapes` x `seeds` under one configuration."""

    batch_id: str
    index: int
    encoding: dict
    hidden: tuple
    activation: str
    steps: int
    lr: float
    points: int
    shapes: tuple
    seeds: tuple

    @property
    def size(self) -> int:
        return len(self.shapes) * len(self.seeds)

    def config(self) -> dict:
        return {"encoding": self.encoding, "hidden": list(self.hidden), "activation": self.activation,
                "steps": self.steps, "lr": self.lr, "points": self.points}


@dataclass
class SweepSpec:
    """A grid over shapes, encodings, widths, activations, schedules and seeds.

    Attributes:
        shapes: shape names. encodings: names or {"name": ..., params}.
        hidden: list of hidden-width tuples. activation, steps, lr, points: lists of values.
        seeds: a count (seeds 0..n-1) or explicit list. observables: readout observables.
        max_batch: most models trained in one batched call (bounds the work lost on a crash).
    """

    shapes: list = field(default_factory=lambda: ["triangle", "square"])
    encodings: list = field(default_factory=lambda: ["dyadic", "triaxis", "rff"])
    hidden: list = field(default_factory=lambda: [[64, 64]])
    activation: list = field(default_factory=lambda: ["relu"])
    steps: list = field(default_factory=lambda: [1500])
    lr: list = field(default_factory=lambda: [2e-3])
    points: list = field(default_factory=lambda: [2048])
    seeds: object = 32
    observables: list = field(default_factory=lambda: ["gram"])
    max_batch: int = 256

    def __post_init__(self):
        self.encodings = [_norm_encoding(e) for e in self.encodings]
        self.hidden = [list(map(int, h)) for h in self.hidden]
        for key in ("shapes", "encodings", "hidden", "activation", "steps", "lr", "points", "observables"):
            val = getattr(self, key)
            if not isinstance(val, list) or not val:
                raise ValueError(f"sweep spec: {key} must be a non-empty list, got {val!r}")
        for s in self.shapes:
            shp.by_name(s)
        for e in self.encodings:
            make_encoding(e)
        if any(int(v) < 1 for v in self.steps + self.points) or any(not v > 0 for v in self.lr):
            raise ValueError("sweep spec: steps, points and lr must be positive")
        if any(not h or min(h) < 1 for h in self.hidden):
            raise ValueError(f"sweep spec: hidden widths must be positive, got {self.hidden}")
        seeds = self.seed_list
        if len(set(seeds)) != len(seeds) or not seeds:
            raise ValueError("sweep spec: seeds must be a positive count or a list of distinct integers")
        if int(self.max_batch) < 1:
            raise ValueError("sweep spec: max_batch must be positive")

    @property
    def seed_list(self) -> list[int]:
        return list(range(int(self.seeds))) if isinstance(self.seeds, int) else [int(s) for s in self.seeds]

    def to_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self) -> str:
        """Hash of everything that determines the cells and their results (not max_batch's effect on speed)."""
        return hashlib.sha1(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]

    @property
    def num_cells(self) -> int:
        return sum(b.size for b in self.plan())

    def plan(self) -> list[Batch]:
        """Deterministic list of batches covering every cell exactly once."""
        seeds = self.seed_list
        per = max(1, int(self.max_batch) // len(self.shapes))
        batches = []
        for enc, hid, act, st, lr, pts in itertools.product(self.encodings, self.hidden, self.activation,
                                                             self.steps, self.lr, self.points):
            for k in range(0, len(seeds), per):
                chunk = tuple(seeds[k:k + per])
                key = json.dumps([enc, hid, act, st, lr, pts, self.shapes, chunk], sort_keys=True)
                bid = hashlib.sha1(key.encode()).hexdigest()[:12]
                batches.append(Batch(bid, len(batches), enc, tuple(hid), act, int(st), float(lr), int(pts),
                                     tuple(self.shapes), chunk))
        return batches


def load_spec(path) -> SweepSpec:
    """Read a sweep spec from TOML (a [sweep] table or top-level keys), or YAML if PyYAML is installed."""
    path = str(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ValueError(f"cannot read sweep spec {path!r}: {e.strerror}") from None
    if path.endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:
            raise ValueError("YAML specs need PyYAML (pip install pyyaml); or use TOML") from None
        data = yaml.safe_load(raw)
    else:
        try:
            data = tomllib.loads(raw.decode())
        except tomllib.TOMLDecodeError as e:
            raise ValueError(f"{path}: invalid TOML: {e}") from None
    data = data.get("sweep", data) if isinstance(data, dict) else data
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table of sweep settings")
    known = set(SweepSpec.__dataclass_fields__)
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{path}: unknown sweep keys {sorted(unknown)}; known: {sorted(known)}")
    scalar_lists = ("activation", "steps", "lr", "points")
    data = {k: ([v] if k in scalar_lists and not isinstance(v, list) else v) for k, v in data.items()}
    return SweepSpec(**data)
