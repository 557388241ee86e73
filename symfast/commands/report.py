"""`symfast report DIR`: tables and heatmaps of a finished sweep."""
from __future__ import annotations

import hashlib
import logging
import os
import re

import pandas as pd

from symfast._io import atomic_path
from symfast.commands import UsageError, input_errors

NAME = "report"
HELP = "summarise a finished sweep: observed sets per configuration and score heatmaps"

log = logging.getLogger("symfast.report")

_CFG = ["encoding", "hidden", "activation", "steps"]
_OBSERVED_COLUMNS = {"shape", "observable", "element", "observed", "liftable", "true_symmetry", "score", *_CFG}


def add_arguments(p) -> None:
    p.add_argument("dir", help="a finished sweep directory")


def heatmap_name(hidden, activation, steps) -> str:
    """`heatmap_<hidden>_<activation>_<steps>.png`, a plain file name whatever the table holds.

    The values come from observed.csv, so they are reduced to [A-Za-z0-9.x-] (path separators,
    "..", spaces and the like become "-"); a hash of the raw values keeps two configurations
    that reduce to the same text apart.
    """
    raw = [str(v) for v in (hidden, activation, steps)]
    parts = [re.sub(r"[^A-Za-z0-9x-]+", "-", v).strip("-")[:40] or "-" for v in raw]
    name = "heatmap_" + "_".join(parts) + ".png"
    if parts != raw:
        digest = hashlib.sha1("\0".join(raw).encode()).hexdigest()[:8]
        name = f"heatmap_{'_'.join(parts)}_{digest}.png"
    return name


def _read_observed(path: str) -> pd.DataFrame:
    """observed.csv with the columns and types the report needs, or a UsageError naming what is wrong."""
    with input_errors(path):
        obs = pd.read_csv(path)
    missing = _OBSERVED_COLUMNS - set(obs.columns)
    if missing:
        raise UsageError(f"{path}: missing columns {sorted(missing)}; rerun `symfast merge` to rebuild it")
    for col in ("observed", "liftable"):
        if obs[col].dtype != bool:
            raise UsageError(f"{path}: column {col!r} must hold True/False, got {obs[col].dtype} values")
    if not pd.api.types.is_numeric_dtype(obs["score"]):
        raise UsageError(f"{path}: column 'score' must be numeric")
    return obs


def run(args) -> int:
    from symfast.readout.readout import Readout
    from symfast.readout.sweeps import load_results
    from symfast.readout.sweeps.population import PopulationStore, open_store

    if os.path.exists(os.path.join(args.dir, "spec.json")):
        with input_errors(args.dir):
            if isinstance(open_store(args.dir), PopulationStore):
                raise UsageError(f"{args.dir} is a population directory: its report is calibration.md and "
                                 "calibration.csv, written by `symfast population` when the population is complete")
    with input_errors(args.dir):
        table = load_results(args.dir)
    obs = _read_observed(os.path.join(args.dir, "observed.csv"))
    cells = table.drop_duplicates("cell_id")
    print(f"{len(cells)} cells; mean final loss by configuration:")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(cells.groupby(_CFG)["final_loss"].agg(["count", "mean"]).to_string())
        rows = []
        for key, t in obs.groupby(_CFG + ["shape", "observable"], sort=False):
            rows.append(dict(zip(_CFG + ["shape", "observable"], key), G_obs=" ".join(t.loc[t["observed"], "element"]),
                             violations=int((t["observed"] & ~(t["liftable"] & (t["true_symmetry"] == True))).sum())))  # noqa: E712
        summary = pd.DataFrame(rows)
        print()
        print(summary.to_string(index=False))
    with atomic_path(os.path.join(args.dir, "report_summary.csv")) as tmp:
        summary.to_csv(tmp, index=False)
    for (hid, act, steps), t in obs.groupby(["hidden", "activation", "steps"]):
        path = os.path.join(args.dir, heatmap_name(hid, act, steps))
        with atomic_path(path) as tmp:
            Readout(t.assign(pe=t["encoding"]), pd.DataFrame()).plot_heatmap(tmp)
        log.info(f"wrote {path}")
    return 0
