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
import math
import re
import tomllib
from dataclasses import asdict, dataclass, field

from symfast import shapes as shp
from symfast.ops.fourier_mlp.reference import ACTIVATIONS
from symfast.nn.encodings import (ENCODINGS, DyadicAxisPE, FourierPE, MultiAxisPE, RandomFourierPE, TriAxisPE,
                                  encoding_by_name)
from symfast.readout.observables import OBSERVABLES
from symfast.readout.training import MAX_SEED, check_backend

__all__ = ["SweepSpec", "Batch", "load_spec", "make_encoding", "check_observable", "digest", "Fingerprinted"]

_ENCODINGS = {"dyadic": DyadicAxisPE, "triaxis": TriAxisPE, "multiaxis": MultiAxisPE, "rff": RandomFourierPE}
_PRESETS_3D = tuple(n for n in ENCODINGS if n not in _ENCODINGS)  # `encoding_by_name`'s 3D encodings


def make_encoding(enc: dict) -> FourierPE:
    """Build an encoding from {"name": "dyadic" | "triaxis" | "multiaxis" | "rff", **params}, or a 3D one
    with its default settings by name ({"name": "dyadic3" | "cube4" | "ico6" | "rff3"}, `encoding_by_name`)."""
    params = {k: v for k, v in enc.items() if k != "name"}
    if enc.get("name") in _PRESETS_3D:
        if params:
            raise ValueError(f"encoding {enc['name']!r} takes no parameters (it is a preset); got {sorted(params)}")
        return encoding_by_name(enc["name"])
    if enc.get("name") not in _ENCODINGS:
        raise ValueError(f"unknown encoding {enc.get('name')!r}; choose from {sorted(_ENCODINGS) + list(_PRESETS_3D)}")
    try:
        return _ENCODINGS[enc["name"]](**params)
    except TypeError as e:
        raise ValueError(f"bad parameters for encoding {enc['name']!r}: {e}") from None


# Guards against absurd sizes (a typo such as seeds = 1e8 would otherwise plan for minutes).
MAX_CELLS = 1_000_000
MAX_WIDTH = 65_536
MAX_STEPS = 10_000_000
MAX_POINTS = 1 << 24
MAX_LR = 10.0
MAX_DEPTH = 8  # nesting of lists/tables in a spec file (hidden = [[64, 64]] is 2 deep)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _int(key: str, v, lo: int, hi: int, expected: str = "") -> int:
    """v as an int in [lo, hi]; bools, floats (2.7, inf) and strings are errors naming the key."""
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"sweep spec: {key} must be {expected or 'an integer'}, got {type(v).__name__} {v!r}")
    if not lo <= v <= hi:
        raise ValueError(f"sweep spec: {key} must be in {lo}..{hi}, got {v}")
    return v


def check_observable(kind: str, hidden: list) -> None:
    """Validate an observable name up front, before any batch trains."""
    m = re.fullmatch(r"prefix(\d+)", kind)
    if kind in ("gram", "gram_bias"):
        return
    if m and all(1 <= int(m.group(1)) <= len(h) + 1 for h in hidden):
        return
    raise ValueError(f"sweep spec: unknown observable {kind!r} for these networks; choose from "
                     f"{', '.join(OBSERVABLES)} (K at most the number of layers)")


def _norm_encoding(e) -> dict:
    if isinstance(e, str):
        return {"name": e}
    if not isinstance(e, dict):
        raise ValueError(f"sweep spec: an encoding must be a name or a table with a name, got {e!r}")
    return dict(e)



def digest(obj, length: int) -> str:
    """The content id of a spec or a batch: the first `length` hex digits of the SHA-1 of its sorted
    JSON (stores name their files and check their specs with it, so it must never change)."""
    return hashlib.sha1(json.dumps(obj, sort_keys=True).encode()).hexdigest()[:length]


class Fingerprinted:
    """A dataclass spec's dict and content id (its store checks a resumed or merged run against it)."""

    def to_dict(self) -> dict:
        return asdict(self)

    def fingerprint(self) -> str:
        """Hash of every field: everything that determines the cells and their results."""
        return digest(self.to_dict(), 16)


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


# settings where a single value means a one-element list (`steps = 1500` as `steps = [1500]`)
SCALAR_AS_LIST = ("activation", "steps", "lr", "points")


@dataclass
class SweepSpec(Fingerprinted):
    """A grid over shapes, encodings, widths, activations, schedules and seeds.

    Attributes:
        shapes: shape names. encodings: names or {"name": ..., params}.
        hidden: list of hidden-width tuples. activation, steps, lr, points: lists of values, or one
            value for a one-element list (as in a TOML spec).
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
        for key in SCALAR_AS_LIST:  # one value stands for a one-element list, in Python as in TOML
            val = getattr(self, key)
            if not isinstance(val, (list, tuple)) and val is not None:
                setattr(self, key, [val])
            elif isinstance(val, tuple):
                setattr(self, key, list(val))
        for key in ("shapes", "encodings", "hidden", "activation", "steps", "lr", "points", "observables"):
            val = getattr(self, key)
            if not isinstance(val, list) or not val:
                raise ValueError(f"sweep spec: {key} must be a non-empty list, got {val!r}")
        self.encodings = [_norm_encoding(e) for e in self.encodings]
        for h in self.hidden:
            if not isinstance(h, (list, tuple)) or not h:
                raise ValueError(f"sweep spec: hidden must be a list of width lists (e.g. [[64, 64]]), got {h!r}")
            for w in h:
                _int("hidden", w, 1, MAX_WIDTH)
        self.hidden = [list(h) for h in self.hidden]
        for key, hi in (("steps", MAX_STEPS), ("points", MAX_POINTS)):
            for v in getattr(self, key):
                _int(key, v, 1, hi)
        for v in self.lr:
            if not _is_number(v) or not 0 < v <= MAX_LR:
                raise ValueError(f"sweep spec: lr must be a number in (0, {MAX_LR:g}], got {v!r}")
        for key in ("shapes", "activation", "observables"):
            for v in getattr(self, key):
                if not isinstance(v, str):
                    raise ValueError(f"sweep spec: {key} must be a list of strings, got {v!r}")
        dims = {getattr(shp.by_name(s), "dim", 2) for s in self.shapes}
        if len(dims) > 1:
            raise ValueError(f"sweep spec: shapes mixes 2D and 3D shapes ({', '.join(self.shapes)}); one sweep "
                             "trains one dimension")
        for e in self.encodings:
            dim = make_encoding(e).input_dim
            if dim not in dims:
                raise ValueError(f"sweep spec: encoding {e.get('name')!r} encodes {dim}D points but the shapes are "
                                 f"{next(iter(dims))}D")
        for a in self.activation:
            if a not in ACTIVATIONS:
                raise ValueError(f"sweep spec: unknown activation {a!r}; choose from {sorted(ACTIVATIONS)}")
        for o in self.observables:
            check_observable(o, self.hidden)
        if isinstance(self.seeds, list):
            for v in self.seeds:
                _int("seeds", v, 0, MAX_SEED)
            if len(set(self.seeds)) != len(self.seeds) or not self.seeds:
                raise ValueError("sweep spec: seeds must be a positive count or a list of distinct integers")
            n_seeds = len(self.seeds)
        else:
            n_seeds = _int("seeds", self.seeds, 1, MAX_CELLS, "a positive integer count or a list of integers")
        _int("max_batch", self.max_batch, 1, MAX_CELLS)
        cells = n_seeds * len(self.shapes) * len(self.encodings) * len(self.hidden) * len(self.activation) * \
            len(self.steps) * len(self.lr) * len(self.points)
        if cells > MAX_CELLS:
            raise ValueError(f"sweep spec: the grid has {cells:.3g} cells, more than the {MAX_CELLS:g} a sweep "
                             "may hold; split it into several specs")

    def check_backend(self, backend: str = "auto", device="cpu") -> None:
        """Raise ValueError (naming the spec's field) unless `backend` on `device` can train every
        architecture of the grid; call before any batch trains."""
        for enc in self.encodings:
            pe_dim = make_encoding(enc).dim
            for h in self.hidden:
                try:
                    check_backend(backend, device, h, pe_dim)
                except ValueError as e:
                    raise ValueError(f"sweep spec: hidden = {h}, encoding {enc.get('name')!r}: {e}") from None

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

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
                bid = digest([enc, hid, act, st, lr, pts, self.shapes, chunk], 12)
                batches.append(Batch(bid, len(batches), enc, tuple(hid), act, int(st), float(lr), int(pts),
                                     tuple(self.shapes), chunk))
        return batches


def _check_depth(data, path: str) -> None:
    """Refuse lists/tables nested more than MAX_DEPTH deep (iteratively: no recursion to exhaust)."""
    stack = [(data, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, (list, dict)):
            if depth >= MAX_DEPTH:
                raise ValueError(f"{path}: lists or tables nested too deeply (at most {MAX_DEPTH} levels)")
            stack.extend((v, depth + 1) for v in (node.values() if isinstance(node, dict) else node))


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
        try:
            data = yaml.safe_load(raw)
        except RecursionError:
            raise ValueError(f"{path}: lists or tables nested too deeply (at most {MAX_DEPTH} levels)") from None
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: invalid YAML: {' '.join(str(e).split())}") from None
    else:
        try:
            data = tomllib.loads(raw.decode())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ValueError(f"{path}: invalid TOML: {e}") from None
        except RecursionError:
            raise ValueError(f"{path}: lists or tables nested too deeply (at most {MAX_DEPTH} levels)") from None
    _check_depth(data, path)
    data = data.get("sweep", data) if isinstance(data, dict) else data
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a table of sweep settings")
    if not data:
        raise ValueError(f"{path}: the spec is empty; set at least shapes, encodings and seeds (an empty spec "
                         "would silently run the whole default grid)")
    known = set(SweepSpec.__dataclass_fields__)
    unknown = set(data) - known
    if unknown:
        raise ValueError(f"{path}: unknown sweep keys {sorted(unknown)}; known: {sorted(known)}")
    return SweepSpec(**data)
