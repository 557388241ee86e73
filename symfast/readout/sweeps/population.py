"""Population sweeps: train and read out neural fields of a seeded shape population, streaming.

A population sweep trains, for each encoding, `seeds` models of every member of the population
(seed, size) (`symfast.shapes.population`), in batches of whole members (all seeds of a member in
one batch, so each batch holds complete seed ensembles): one fused `fit_sdf` call per batch, then
`readout` of that batch's ensembles, then the weights are dropped (kept only with `keep_weights`).
A batch file holds the readout rows of its members (every candidate the encoding lifts exactly,
with the truth of each element) and the models' final losses, so memory stays flat in the size of
the population and the finished table is the concatenation of the batch files.

It runs on the sweep machinery (`symfast.readout.sweeps.run.execute`, `SweepStore`): atomic batch
files, resume after any interruption (a batch's training and readout are deterministic, so a
resumed run gives the identical table), shards (`shard="i/n"`) merged by `symfast merge`, and
the Ray executor.

Budget: "fixed" trains every model `steps` steps; "auto" runs the adaptive rule
(`symfast.readout.budget.adaptive_readout`) on each batch: it starts at min(8, seeds) seeds x steps / 3,
and a member whose decisions are not settled gets more steps, then more seeds, up to `seeds` x `steps`.
Each row records the seeds and steps its member was read at, and each element's resolution (the
asymmetry the budget rejects with probability 1 - alpha). With a `tolerance`, the rule trains until
every observed element is resolved to it, and an element still above it at the caps is unresolved:
the rates count it as neither a false positive nor a true symmetry found.

Solids: with `dim=3` the members are the population's prisms (`symfast.shapes.population_solids`: each
planar member extruded along z, with its O(3) group) and the encodings are 3D ones.

Candidates: in 2D the elements of D4, D6, D8, D10 and D12 (every rotation by a multiple of 30, 36 or 45
degrees and every mirror at a multiple of 15, 18 or 22.5 degrees), in 3D those of O_h and I_h, that the
encoding lifts exactly; the decision is made over exactly these (`readout`'s `observed`), so the others
are not scored.
"""
from __future__ import annotations

import functools
import json
import math
import os
import time
import warnings
from dataclasses import asdict, dataclass, field

import pandas as pd

from symfast._io import atomic_write_bytes, read_bounded
from symfast._progress import Progress
from symfast.groups import Group, dihedral, o3, union
from symfast.readout.budget import adaptive_readout, resolved
from symfast.readout.readout import MIN_MODELS_PER_SHAPE, readout
from symfast.readout.sweeps.run import check_run, execute, write_table
from symfast.readout.sweeps.spec import (MAX_CELLS, MAX_POINTS, MAX_STEPS, MAX_WIDTH, Fingerprinted,
                                         check_observable, digest, make_encoding)
from symfast.readout.sweeps.store import ROW_BYTES, SLACK, SPEC_BYTES, BatchError, SweepStore
from symfast.readout.training import check_backend, fit_sdf
from symfast.shapes import population as pop
from symfast.shapes import population_solids

__all__ = ["PopulationSpec", "PopulationBatch", "PopulationStore", "parse_population", "candidates",
           "train_population_batch", "run_population", "finalize_population", "load_population", "open_store"]

KIND = "population"  # spec.json's "kind": how `symfast merge` tells a population directory from a sweep
BUDGETS = ("fixed", "auto")
MAX_FILTERED_SIZE = 100_000
AUTO_START_SEEDS = 8  # the adaptive rule's first round (its default)


def parse_population(text: str) -> tuple[int, int]:
    """"SEED:N" -> (seed, N), e.g. "0:625"."""
    parts = str(text).split(":")
    try:
        seed, size = (int(p) for p in parts)
    except ValueError:
        raise ValueError(f"a population is SEED:N (e.g. 0:625), got {text!r}") from None
    pop.describe(seed, 1)  # validates the seed
    if not 1 <= size <= pop.MAX_SIZE:
        raise ValueError(f"population size N must be in 1..{pop.MAX_SIZE}, got {size}")
    return seed, size


@functools.lru_cache(maxsize=None)
def candidates(encoding_json: str) -> Group:
    """The candidate elements of an encoding (given as JSON of its spec dict): those of
    D4 ∪ D6 ∪ D8 ∪ D10 ∪ D12 (2D) or O_h ∪ I_h (3D) it lifts exactly."""
    pe = make_encoding(json.loads(encoding_json))
    grid = (union([dihedral(4), dihedral(6), dihedral(8), dihedral(10), dihedral(12)]) if pe.input_dim == 2 else
            union([o3.octahedral(), o3.icosahedral()]))
    return Group([g for g in grid if pe.lift(g) is not None], name=f"liftable({pe.name})")


@dataclass(frozen=True)
class PopulationBatch:
    """Members `members` of the population, each with every seed of the spec, under one encoding."""

    batch_id: str
    index: int
    encoding: dict
    members: tuple
    seeds: tuple

    @property
    def size(self) -> int:
        return len(self.members) * len(self.seeds)


@dataclass
class PopulationSpec(Fingerprinted):
    """What a population sweep trains and reads.

    Attributes:
        seed, size: the population (`symfast.shapes.population`). seeds: models per member (>= 3).
        encodings: names or {"name": ..., params} (as in a sweep spec). hidden, activation, steps, points,
        lr: the training (`fit_sdf`). observable, alpha: the readout. max_batch: most models per batch
        (rounded down to whole members). keep_weights: store each batch's trained weights too.
        budget: "fixed" or "auto" (the adaptive rule; `seeds` and `steps` are then its caps).
        families: None (every member) or the families to keep of the first `size` members (dihedral,
            cyclic, near, asymmetric; e.g. ["near"] for the near-symmetric members only).
        tolerance: None, or the asymmetry (relative to the observable, like the score) an observed
            element must be resolved to (`symfast.readout.budget`): under "auto" the rule trains
            until it is, and a row still above it at the caps is unresolved (`resolved` False).
        dim: 2 (the planar members) or 3 (the members extruded into prisms; 3D encodings).
    """

    seed: int = 0
    size: int = 64
    seeds: int = 16
    encodings: list = field(default_factory=lambda: ["triaxis"])
    hidden: list = field(default_factory=lambda: [64, 64])
    activation: str = "relu"
    steps: int = 300
    points: int = 1024
    lr: float = 2e-3
    observable: str = "gram"
    alpha: float = 0.05
    max_batch: int = 256
    keep_weights: bool = False
    kind: str = KIND
    budget: str = "fixed"
    families: list | None = None
    tolerance: float | None = None
    dim: int = 2

    def __post_init__(self):
        pop.describe(self.seed, 1)
        for name, v, lo, hi in (("size", self.size, 1, pop.MAX_SIZE), ("seeds", self.seeds, MIN_MODELS_PER_SHAPE,
                                                                          MAX_CELLS),
                                ("steps", self.steps, 1, MAX_STEPS), ("points", self.points, 1, MAX_POINTS),
                                ("max_batch", self.max_batch, 1, MAX_CELLS)):
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                extra = " (the readout needs the noise between seeds)" if name == "seeds" else ""
                raise ValueError(f"population spec: {name} must be an integer in {lo}..{hi}{extra}, got {v!r}")
        if not isinstance(self.encodings, list) or not self.encodings:
            raise ValueError(f"population spec: encodings must be a non-empty list, got {self.encodings!r}")
        self.encodings = [{"name": e} if isinstance(e, str) else dict(e) for e in self.encodings]
        if isinstance(self.dim, bool) or not isinstance(self.dim, int) or self.dim not in (2, 3):
            raise ValueError(f"population spec: dim must be 2 (planar members) or 3 (prisms), got {self.dim!r}")
        for e in self.encodings:
            if make_encoding(e).input_dim != self.dim:
                raise ValueError(f"population spec: the members are {self.dim}D; {e['name']!r} is not a "
                                 f"{self.dim}D encoding")
        self.hidden = list(self.hidden)
        if not self.hidden or not all(isinstance(w, int) and not isinstance(w, bool) and 1 <= w <= MAX_WIDTH
                                      for w in self.hidden):
            raise ValueError(f"population spec: hidden must be widths in 1..{MAX_WIDTH}, got {self.hidden!r}")
        if not (isinstance(self.lr, (int, float)) and math.isfinite(self.lr) and 0 < self.lr <= 10):
            raise ValueError(f"population spec: lr must be a number in (0, 10], got {self.lr!r}")
        if not isinstance(self.observable, str):
            raise ValueError(f"population spec: observable must be a name, got {self.observable!r}")
        check_observable(self.observable, [self.hidden])
        if not 0 < self.alpha < 1:
            raise ValueError(f"population spec: alpha must be in (0, 1), got {self.alpha!r}")
        if self.tolerance is not None and (isinstance(self.tolerance, bool) or not isinstance(self.tolerance, (int, float))
                                           or not 0 < self.tolerance < math.inf):
            raise ValueError(f"population spec: tolerance must be a positive number, got {self.tolerance!r}")
        if self.budget not in BUDGETS:
            raise ValueError(f"population spec: budget must be one of {', '.join(BUDGETS)}, got {self.budget!r}")
        if self.families is not None:
            self.families = list(self.families)
            if not self.families or not set(self.families) <= set(pop.KINDS):
                raise ValueError(f"population spec: families must be a non-empty subset of {', '.join(pop.KINDS)}, "
                                 f"got {self.families!r}")
            if self.size > MAX_FILTERED_SIZE:  # each member is drawn to learn its family (about 0.1 ms)
                raise ValueError(f"population spec: with families, size must be at most {MAX_FILTERED_SIZE}, "
                                 f"got {self.size}")
        # a prism keeps its cross-section's family, so the planar draw decides in 2D and 3D
        self._members = (range(self.size) if self.families is None else
                         [i for i in range(self.size) if pop.draw(self.seed, i).kind in self.families])
        if not self._members:
            raise ValueError(f"population spec: none of the first {self.size} members is {' or '.join(self.families)}")
        if self.kind != KIND:
            raise ValueError(f"population spec: kind must be {KIND!r}, got {self.kind!r}")
        if len(self._members) * self.seeds * len(self.encodings) > MAX_CELLS:
            raise ValueError(f"population spec: {len(self._members)} members x {self.seeds} seeds x {len(self.encodings)} "
                             f"encodings is more than the {MAX_CELLS} models a sweep may hold")

    def check_backend(self, backend: str = "auto", device="cpu") -> None:
        """Raise ValueError unless `backend` on `device` trains every encoding's architecture."""
        for e in self.encodings:
            check_backend(backend, device, self.hidden, make_encoding(e).dim)

    @property
    def observables(self) -> list:
        return [self.observable]

    def auto_start(self) -> tuple[int, int]:
        """The adaptive budget's first round per member: (seeds, steps)."""
        return min(AUTO_START_SEEDS, self.seeds), max(1, self.steps // 3)

    def to_dict(self) -> dict:
        d = asdict(self)
        for key, default in (("budget", "fixed"), ("families", None), ("tolerance", None), ("dim", 2)):
            if d[key] == default:  # populations written before these options keep their content id
                del d[key]
        return d

    def draw(self, index: int):
        """Member `index` as drawn: a `population.Draw` (2D) or a `population_solids.SolidDraw` (3D)."""
        return pop.draw(self.seed, index) if self.dim == 2 else population_solids.draw_solid(self.seed, index)

    def shape(self, index: int):
        """Member `index` as the Shape that is trained."""
        return (pop.population_shape(self.seed, index) if self.dim == 2 else
                population_solids.solid_shape(self.seed, index))

    def members(self):
        """Indices of the members trained: the first `size`, of `families` when given."""
        return self._members

    @property
    def num_cells(self) -> int:
        return len(self._members) * self.seeds * len(self.encodings)

    def plan(self) -> list[PopulationBatch]:
        """Encoding-major batches of whole members (at least one member per batch)."""
        per = max(1, self.max_batch // self.seeds)
        seeds = tuple(range(self.seeds))
        out = []
        for enc in self.encodings:
            for start in range(0, len(self._members), per):
                members = tuple(self._members[start:start + per])
                bid = digest([self.fingerprint(), enc, members[0], members[-1]], 12)
                out.append(PopulationBatch(bid, len(out), enc, members, seeds))
        return out


_ROW_KEYS = {"shape", "index", "element", "observed", "true_symmetry", "near", "score"}


class PopulationStore(SweepStore):
    """A population sweep's directory: `SweepStore` with population batches."""

    def validate(self, payload, batch) -> None:
        if not isinstance(payload, dict) or not {"batch", "rows", "models"} <= set(payload):
            raise BatchError("not a population batch (missing keys)")
        if json.dumps(payload["batch"], sort_keys=True, default=str) != json.dumps(asdict(batch), sort_keys=True):
            raise BatchError(f"does not hold the planned batch {batch.batch_id!r}")
        models = payload["models"]
        fewest = batch.size if self.spec.budget == "fixed" else len(batch.members) * self.spec.auto_start()[0]
        if not isinstance(models, list) or not fewest <= len(models) <= batch.size or not all(
                isinstance(m, dict) and isinstance(m.get("final_loss"), float) and math.isfinite(m["final_loss"])
                for m in models):
            raise BatchError(f"expected {fewest}..{batch.size} models with finite final losses")
        rows = payload["rows"]
        names = {self.spec.draw(i).name for i in batch.members}
        if not isinstance(rows, list) or not all(isinstance(r, dict) and _ROW_KEYS <= set(r) for r in rows):
            raise BatchError("readout rows are missing or malformed")
        per = {}
        for r in rows:
            if r["shape"] not in names or not isinstance(r["score"], float) or not math.isfinite(r["score"]):
                raise BatchError(f"bad readout row {r!r}")
            per[r["shape"]] = per.get(r["shape"], 0) + 1
        if set(per) != names or len(set(per.values())) != 1:
            raise BatchError("readout rows do not cover every member equally")
        if self.spec.keep_weights != ("ensemble" in payload):
            raise BatchError("weights stored contrary to keep_weights")

    def bytes_bound(self, batch_id: str) -> int:
        batch = self._plan[batch_id]
        d = make_encoding(batch.encoding).dim
        widths = [d, *self.spec.hidden, 1]
        params = sum((a + 1) * b for a, b in zip(widths, widths[1:])) if self.spec.keep_weights else 0
        return (8 * batch.size * (params + self.spec.steps) + ROW_BYTES * (batch.size + len(batch.members) * 64)
                + SLACK)

    @staticmethod
    def open(root: str) -> "PopulationStore":
        return PopulationStore(root, PopulationSpec(**_spec_json(root)["spec"]))


def _spec_json(root: str) -> dict:
    """spec.json of a sweep directory (bounded read; ValueError naming the file when absent or corrupt)."""
    path = os.path.join(os.fspath(root), "spec.json")
    if not os.path.exists(path):
        raise ValueError(f"{root} is not a sweep directory (no spec.json)")
    try:
        meta = json.loads(read_bounded(path, SPEC_BYTES, inside=os.path.dirname(path)))
    except (ValueError, UnicodeDecodeError) as e:
        meta = e
    if not isinstance(meta, dict) or not isinstance(meta.get("spec"), dict):
        raise ValueError(f"{path} is corrupt; restore it or use another directory")
    return meta


def open_store(root: str) -> SweepStore:
    """The store of an existing directory: a `PopulationStore` or a `SweepStore`, by its spec.json."""
    if _spec_json(root)["spec"].get("kind") == KIND:
        try:
            return PopulationStore.open(root)
        except TypeError as e:
            raise ValueError(f"{root}/spec.json is not a valid population spec ({e})") from None
    return SweepStore.open(root)


def train_population_batch(batch: PopulationBatch, spec: PopulationSpec, device: str = "cpu",
                           backend: str = "auto") -> dict:
    """Train one batch, read it out and return its payload (rows with truth, per-model losses)."""
    shapes = [spec.shape(i) for i in batch.members]
    draws = {s.name: spec.draw(i) for s, i in zip(shapes, batch.members)}
    pe = make_encoding(batch.encoding)
    cands = candidates(json.dumps(batch.encoding, sort_keys=True))
    fit = dict(hidden=spec.hidden, activation=spec.activation, lr=spec.lr, device=device, backend=backend)
    t0 = time.perf_counter()
    if spec.budget == "auto":
        with warnings.catch_warnings():  # a small budget's warning is the user's choice; the rates measure it
            warnings.simplefilter("ignore")
            start_seeds, start_steps = spec.auto_start()
            res = adaptive_readout(shapes, pe, alpha=spec.alpha, start_seeds=start_seeds, start_steps=start_steps,
                                   max_seeds=len(batch.seeds), steps=spec.steps, first_seed=batch.seeds[0],
                                   points=spec.points, candidates=cands, observable=spec.observable,
                                   tolerance=spec.tolerance, **fit)
        ens, table = res.ensemble, res.readout.table
        last = res.history.groupby("shape", sort=False).last()
        used = {s: (int(last.at[s, "seeds"]), int(last.at[s, "steps"])) for s in last.index}
        t1 = t2 = time.perf_counter()  # the rule's readouts between rounds count as training time
    else:
        ens = fit_sdf(shapes, pe, seeds=list(batch.seeds), steps=spec.steps, points=spec.points, **fit)
        t1 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = readout(ens, candidates=cands, observable=spec.observable, sweep=0, alpha=spec.alpha).table
        t2 = time.perf_counter()
        used = {s.name: (len(batch.seeds), spec.steps) for s in shapes}
    losses = ens.losses[-1]
    table = table.assign(resolved=resolved(table, spec.tolerance))
    rows = []
    for r in table.itertuples(index=False):
        d = draws[r.shape]
        if pd.isna(r.true_symmetry):  # every member carries its group: a missing truth is a bug, not a verdict
            raise RuntimeError(f"{r.shape}: the readout lost the shape's symmetry group")
        truth = bool(r.true_symmetry)
        rows.append(dict(shape=r.shape, index=d.index, kind=d.kind, n=d.n, epsilon=d.epsilon, group=d.group.name,
                         encoding=pe.name, observable=r.observable, element=r.element, element_kind=r.kind,
                         angle_deg=float(r.angle_deg), true_symmetry=truth,
                         near=(not truth) and r.element in {g.name for g in d.base_group},
                         score=float(r.score), p_adjusted=float(r.p_adjusted), observed=bool(r.observed),
                         resolution=float(r.resolution), resolved=bool(r.resolved),
                         n_models=int(r.n_models), seeds_used=used[r.shape][0], steps_used=used[r.shape][1]))
    models = [dict(shape=s, seed=int(sd), final_loss=float(losses[i])) for i, (s, sd) in
              enumerate(zip(ens.shapes, ens.seeds))]
    payload = {"batch": asdict(batch), "rows": rows, "models": models,
               "seconds": {"train": t1 - t0, "readout": t2 - t1}}  # timing.csv; not part of the results
    if spec.keep_weights:
        payload["ensemble"] = {"weights": ens.weights, "biases": ens.biases, "seeds": ens.seeds,
                               "shapes": ens.shapes, "pe": pe.config()}
    return payload


def run_population(spec: PopulationSpec, out: str, shard: str | None = None, executor: str = "local",
                   address: str | None = None, device: str = "cpu", backend: str = "auto",
                   progress: Progress = False, finalize_when_complete: bool = True) -> PopulationStore:
    """Run (or resume) this shard's batches of a population sweep; finalize when every batch is done.

    progress: False, True (a tqdm bar over the models) or a callable given progress lines."""
    i, n = check_run(spec, shard, executor, address, device, backend)
    store = PopulationStore(out, spec)

    def describe(b, payload):
        loss = sum(m["final_loss"] for m in payload["models"]) / len(payload["models"])
        return (f"batch {b.batch_id}: members {b.members[0]}..{b.members[-1]} x {len(b.seeds)} seeds "
                f"({b.encoding['name']}) mean loss {loss:.2e}")

    work = functools.partial(train_population_batch, spec=spec, device=device, backend=backend)
    execute(store, work, shard=(i, n), executor=executor, address=address, device=device, progress=progress,
            describe=describe, unit="model")
    if finalize_when_complete and not store.missing():
        finalize_population(store)
    return store


def finalize_population(store: PopulationStore) -> pd.DataFrame:
    """Write results.csv/.parquet (one row per member x encoding x liftable candidate), models.csv,
    timing.csv (seconds of training and readout per batch) and calibration.csv
    (`symfast.readout.sweeps.rates.calibration`); returns the results table."""
    from symfast.readout.sweeps.rates import calibration

    missing = store.missing()
    if missing:
        raise ValueError(f"population sweep in {store.root} is incomplete: {len(missing)} batches missing "
                         f"(e.g. {missing[0].batch_id}); run the remaining shards or `symfast merge`")
    rows, models, timing = [], [], []
    for b in store.spec.plan():  # one batch at a time: only the rows are kept
        p = store.read_batch(b.batch_id)
        rows += p["rows"]
        models += [dict(m, encoding=b.encoding["name"]) for m in p["models"]]
        sec = p.get("seconds") if isinstance(p.get("seconds"), dict) else {}
        timing.append(dict(batch_id=b.batch_id, encoding=b.encoding["name"], models=len(p["models"]),
                           train_seconds=sec.get("train"), readout_seconds=sec.get("readout")))
    table = pd.DataFrame(rows)
    table.insert(0, "population_seed", store.spec.seed)
    write_table(table, store.root, "results")
    atomic_write_bytes(os.path.join(store.root, "models.csv"), pd.DataFrame(models).to_csv(index=False).encode())
    atomic_write_bytes(os.path.join(store.root, "timing.csv"), pd.DataFrame(timing).to_csv(index=False).encode())
    calib = calibration(table)
    atomic_write_bytes(os.path.join(store.root, "calibration.csv"), calib.to_csv(index=False).encode())
    return table


def load_population(root: str) -> pd.DataFrame:
    """The results table of a finished population sweep."""
    path = os.path.join(os.fspath(root), "results.csv")
    if not os.path.exists(path):
        raise ValueError(f"{root} has no results.csv; is the population sweep finished? "
                         "(`symfast merge` completes shards)")
    try:
        return pd.read_csv(path)
    except Exception as e:  # truncated or garbage file: pandas raises many kinds
        raise ValueError(f"{path} is unreadable ({type(e).__name__}); rerun the sweep or `symfast merge`") from None
