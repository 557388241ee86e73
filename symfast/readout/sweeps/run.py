"""Executing a sweep: train batches (locally or on Ray), store them, build the tidy table."""
from __future__ import annotations

import functools
import json
import logging
import socket
import time
import warnings
from urllib.parse import urlparse

import pandas as pd
import torch

from symfast._io import atomic_write_bytes
from symfast._progress import Progress, reporter
from symfast.nn.ensemble import Ensemble
from symfast.readout.observables import observable, scores
from symfast.readout.readout import element_lifts, default_candidates, readout
from symfast.readout.sweeps.spec import Batch, SweepSpec, make_encoding
from symfast.readout.sweeps.store import SweepStore
from symfast.readout.training import fit_sdf

__all__ = ["run_sweep", "check_run", "train_batch", "finalize", "parse_shard", "execute", "run_on_ray", "check_ray_address",
           "write_table"]

log = logging.getLogger("symfast.sweep")
RAY_CONNECT_TIMEOUT_S = 10.0


def parse_shard(text: str | None) -> tuple[int, int]:
    """"i/n" -> (i, n) with 0 <= i < n; None -> (0, 1)."""
    if not text:
        return 0, 1
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like i/n (e.g. 0/4), got {text!r}") from None
    if not (n >= 1 and 0 <= i < n):
        raise ValueError(f"--shard i/n needs 0 <= i < n, got {text!r}")
    return i, n


def check_run(spec, shard: str | None, executor: str, address: str | None, device: str,
              backend: str) -> tuple[int, int]:
    """Everything a sweep (or population) run checks before anything trains -> the shard (i, n):
    the shard, the executor, the backend on the device (a width the kernel cannot run fails here)
    and, for Ray, the cluster's address."""
    i, n = parse_shard(shard)
    if executor not in ("local", "ray"):
        raise ValueError(f"executor must be 'local' or 'ray', got {executor!r}")
    spec.check_backend(backend, device)
    if executor == "ray":
        check_ray_address(address)
    return i, n


def train_batch(batch: Batch, observables: list, device: str = "cpu", backend: str = "auto") -> dict:
    """Train one batch and score every model; returns the payload stored for it."""
    t = time.perf_counter()
    pe = make_encoding(batch.encoding)
    ens = fit_sdf(list(batch.shapes), pe, seeds=list(batch.seeds), hidden=batch.hidden,
                  activation=batch.activation, steps=batch.steps, points=batch.points, lr=batch.lr,
                  device=device, backend=backend, progress=False)
    seconds = time.perf_counter() - t
    enc_label = pe.name if len(batch.encoding) == 1 else f"{pe.name}{sorted(batch.encoding.items())[1:]}"
    cells = []
    for i, (shape, seed) in enumerate(zip(ens.shapes, ens.seeds)):
        cells.append(dict(cell_id=f"{batch.batch_id}:{i}", batch_id=batch.batch_id, shape=shape,
                          encoding=enc_label, hidden="x".join(map(str, batch.hidden)), depth=len(batch.hidden),
                          activation=batch.activation, steps=batch.steps, lr=batch.lr, points=batch.points,
                          seed=seed, final_loss=float(ens.losses[-1, i]), train_seconds=seconds / len(ens)))
    score_rows = []
    for obs in observables:
        lifts = element_lifts(pe, list(default_candidates()), obs)
        s = scores(observable(ens.weights, ens.biases, obs), torch.stack([r for _, r, _, _ in lifts]))
        for i in range(len(ens)):
            for e, (g, _, exact, _) in enumerate(lifts):
                score_rows.append(dict(cell_id=cells[i]["cell_id"], observable=obs, element=g.name,
                                       liftable=exact, score=float(s[i, e])))
    return {"batch": batch.__dict__, "cells": cells, "scores": score_rows, "ensemble": _ens_dict(ens)}


def _ens_dict(ens: Ensemble) -> dict:
    return {"pe": ens.pe.config(), "weights": ens.weights, "biases": ens.biases, "activation": ens.activation,
            "shapes": ens.shapes, "seeds": ens.seeds, "losses": ens.losses, "config": ens.config}


def _ens_from(d: dict) -> Ensemble:
    from symfast.nn.encodings import FourierPE

    return Ensemble(FourierPE.from_config(d["pe"]), d["weights"], d["biases"], d["activation"], d["shapes"],
                    d["seeds"], d["losses"], d["config"])


def run_sweep(spec: SweepSpec, out: str, shard: str | None = None, executor: str = "local",
              address: str | None = None, device: str = "cpu", backend: str = "auto",
              quiet: bool | None = None, finalize_when_complete: bool = True,
              progress: Progress = False) -> SweepStore:
    """Run (or resume) the batches of `spec` that belong to this shard and are not done yet.

    progress: False (default), True (a tqdm bar over the cells) or a callable given progress lines;
    each batch is also logged at INFO on the `symfast.sweep` logger. `quiet=` is the earlier form
    (quiet=True is progress=False; DeprecationWarning)."""
    if quiet is not None:
        warnings.warn("run_sweep(quiet=...) is deprecated; use progress=False/True", DeprecationWarning, stacklevel=2)
        progress = not quiet
    i, n = check_run(spec, shard, executor, address, device, backend)
    store = SweepStore(out, spec)

    def describe(b, payload):
        loss = sum(c["final_loss"] for c in payload["cells"]) / len(payload["cells"])
        return (f"batch {b.batch_id}: {b.size} cells ({payload['cells'][0]['encoding']}, "
                f"{'x'.join(map(str, b.hidden))}, seeds {b.seeds[0]}..{b.seeds[-1]}) mean loss {loss:.2e}")

    work = functools.partial(train_batch, observables=spec.observables, device=device, backend=backend)
    execute(store, work, shard=(i, n), executor=executor, address=address, device=device, progress=progress,
            describe=describe, unit="cell")
    if finalize_when_complete and not store.missing():
        finalize(store)
    return store


def execute(store: SweepStore, work, shard=(0, 1), executor: str = "local", address: str | None = None,
            device: str = "cpu", progress: Progress = False, describe=None, unit: str = "cell") -> None:
    """Run `work(batch) -> payload` for the planned batches of `store` in shard (i, n) that are not done,
    writing each payload atomically as it arrives (locally in order, or on Ray as tasks finish).

    Invalid batch files are moved aside and their batches run again. `describe(batch, payload)` gives the
    INFO log line of a finished batch; the progress bar counts `batch.size` units. The one loop of every
    batched study (sweeps, population sweeps): resumption, sharding and the executor live here."""
    rep = reporter(progress, "symfast.sweep")
    i, n = shard
    plan = store.spec.plan()
    for bid, reason in store.invalid().items():
        if bid in {b.batch_id for b in plan}:
            moved = store.quarantine(bid)  # retrained below; kept aside for inspection
            log.warning(f"batch {bid}: {reason}; moved to {moved} and training it again")
    mine = [b for b in plan if b.index % n == i]
    done = store.done()
    todo = [b for b in mine if b.batch_id not in done]
    desc = type(store).__name__.replace("Store", "").lower()  # "sweep", "population"
    log.info(f"{desc}: {sum(b.size for b in plan)} {unit}s in {len(plan)} batches; shard {i}/{n}: {len(mine)} "
             f"batches, {len(mine) - len(todo)} already done")
    bar = rep.bar(sum(b.size for b in mine), desc=desc, initial=sum(b.size for b in mine if b.batch_id in done),
                  unit=unit)
    try:
        results = run_on_ray(todo, work, address, device) if executor == "ray" else ((b, work(b)) for b in todo)
        for b, payload in results:
            store.write_batch(b.batch_id, payload)
            bar.update(b.size)
            if describe is not None:
                log.info(describe(b, payload))
    finally:
        bar.close()


def run_on_ray(todo, work, address, device):
    """(batch, work(batch)) for each batch, as Ray tasks finish (one task per batch, one core each)."""
    try:
        import ray
    except ImportError:
        raise ValueError("--executor ray needs Ray: pip install 'ray>=2.9'") from None
    if not ray.is_initialized():
        try:
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        except ConnectionError as e:
            raise ValueError(f"cannot connect to the Ray cluster at {address!r}: {e}") from None
    gpus = 1 if str(device).startswith("cuda") else 0

    @ray.remote(num_cpus=1, num_gpus=gpus)
    def task(batch):
        torch.set_num_threads(1)  # one core per task; Ray schedules tasks across the cluster's cores
        return work(batch)

    pending = {task.remote(b): b for b in todo}
    while pending:
        ready, _ = ray.wait(list(pending), num_returns=1)
        for ref in ready:
            yield pending.pop(ref), ray.get(ref)


def check_ray_address(address: str | None) -> None:
    """Fail fast (one line) when --address names a host:port that does not accept connections.

    Ray itself retries an unreachable head node for minutes; a plain TCP connect with a
    timeout tells the user at once. "auto", "local" and None are left to Ray.
    """
    if not address or address in ("auto", "local"):
        return
    url = urlparse(address if "://" in address else f"ray://{address}")
    try:
        host, port = url.hostname, url.port
    except ValueError:
        host = port = None
    if not host or not port:
        raise ValueError(f"--address must be host:port, ray://host:port or auto, got {address!r}")
    try:
        socket.create_connection((host, port), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as e:
        raise ValueError(f"cannot reach the Ray cluster at {address!r} within {RAY_CONNECT_TIMEOUT_S:.0f} s "
                         f"({e.strerror or e}); is `ray start --head` running there, and listening on an "
                         "address this machine can reach (not only 127.0.0.1)?") from None


def finalize(store: SweepStore, num_null: int = 64) -> pd.DataFrame:
    """Build results (tidy: one row per cell x observable x element) and observed sets; write them."""
    missing = store.missing()
    if missing:
        raise ValueError(f"sweep in {store.root} is incomplete: {len(missing)} batches missing "
                         f"(e.g. {missing[0].batch_id}); run the remaining shards or `symfast merge`")
    cells, score_rows, observed = [], [], []
    groups: dict = {}
    for b in store.spec.plan():
        p = store.read_batch(b.batch_id)
        cells += p["cells"]
        score_rows += p["scores"]
        key = json.dumps(b.config(), sort_keys=True)  # one ensemble readout per configuration
        groups.setdefault(key, []).append((p, b))
    for key, members in groups.items():
        enss = [_ens_from(p["ensemble"]) for p, _ in members]
        ens = enss[0] if len(enss) == 1 else _concat(enss)
        label = members[0][0]["cells"][0]
        for obs in store.spec.observables:
            t = readout(ens, observable=obs, sweep=0, num_null=num_null).table
            for col, val in (("encoding", label["encoding"]), ("hidden", label["hidden"]),
                             ("activation", label["activation"]), ("steps", label["steps"]),
                             ("lr", label["lr"]), ("points", label["points"])):
                t[col] = val
            observed.append(t)
    cells_df, scores_df = pd.DataFrame(cells), pd.DataFrame(score_rows)
    obs_df = pd.concat(observed, ignore_index=True)
    table = scores_df.merge(cells_df, on="cell_id")
    keys = ["shape", "encoding", "hidden", "activation", "steps", "lr", "points", "observable", "element"]
    table = table.merge(obs_df[keys + ["true_symmetry", "observed"]], on=keys, how="left")
    table = table.sort_values(["cell_id", "observable", "element"]).reset_index(drop=True)
    write_table(table, store.root, "results")
    atomic_write_bytes(f"{store.root}/observed.csv", obs_df.to_csv(index=False).encode())
    return table


def _concat(enss: list) -> Ensemble:
    first = enss[0]
    return Ensemble(first.pe, [torch.cat([e.weights[l] for e in enss]) for l in range(len(first.weights))],
                    [torch.cat([e.biases[l] for e in enss]) for l in range(len(first.biases))],
                    first.activation, sum((e.shapes for e in enss), []), sum((e.seeds for e in enss), []),
                    torch.cat([e.losses for e in enss], dim=1), first.config)


def write_table(df: pd.DataFrame, root: str, name: str) -> str:
    try:
        import io

        buf = io.BytesIO()
        df.to_parquet(buf, index=False)
        atomic_write_bytes(f"{root}/{name}.parquet", buf.getvalue())
    except ImportError:
        pass
    atomic_write_bytes(f"{root}/{name}.csv", df.to_csv(index=False).encode())
    return f"{root}/{name}.csv"


_RESULT_COLUMNS = {"cell_id": "str", "shape": "str", "encoding": "str", "hidden": None, "activation": "str",
                   "steps": "int", "lr": "num", "points": "int", "seed": "int", "final_loss": "num",
                   "observable": "str", "element": "str", "liftable": "bool", "score": "num"}


def _check_results(table: pd.DataFrame, path: str) -> None:
    """The columns the report and readers use, with the kinds of value `finalize` writes."""
    missing = sorted(set(_RESULT_COLUMNS) - set(table.columns))
    if missing:
        raise ValueError(f"{path}: missing columns {missing}; rerun `symfast merge` or the sweep to rebuild it")
    api = pd.api.types
    for col, kind in _RESULT_COLUMNS.items():
        c = table[col]
        ok = (kind is None or (kind == "str" and (api.is_object_dtype(c) or api.is_string_dtype(c)))
              or (kind == "int" and api.is_integer_dtype(c)) or (kind == "bool" and api.is_bool_dtype(c))
              or (kind == "num" and api.is_numeric_dtype(c) and not api.is_bool_dtype(c)))
        if not ok:
            raise ValueError(f"{path}: column {col!r} holds {c.dtype} values, expected {kind}; the table was "
                             "altered; rerun `symfast merge` or the sweep to rebuild it")


def load_results(root: str) -> pd.DataFrame:
    """The tidy table of a finished sweep (Parquet if present, else CSV)."""
    import os

    for ext, reader in (("parquet", pd.read_parquet), ("csv", pd.read_csv)):
        path = os.path.join(root, f"results.{ext}")
        if os.path.exists(path):
            try:
                table = reader(path)
            except ImportError:
                continue
            except Exception as e:  # truncated or garbage file: pyarrow/pandas raise many kinds
                raise ValueError(f"{path} is unreadable ({type(e).__name__}); rerun `symfast merge` or the sweep "
                                 "to rebuild it") from None
            _check_results(table, path)
            return table
    raise ValueError(f"{root} has no results table; is the sweep finished? (`symfast merge` completes shards)")
