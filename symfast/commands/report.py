"""`symfast report DIR`: tables and heatmaps of a finished sweep."""
from __future__ import annotations

import logging
import os

import pandas as pd

from symfast.commands import UsageError, input_errors

NAME = "report"
HELP = "summarise a finished sweep: observed sets per configuration and score heatmaps"

log = logging.getLogger("symfast.report")

_CFG = ["encoding", "hidden", "activation", "steps"]
_OBSERVED_COLUMNS = {"shape", "observable", "element", "observed", "liftable", "true_symmetry", "score", *_CFG}


def add_arguments(p) -> None:
    p.add_argument("dir", help="a finished sweep directory")


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
    summary.to_csv(os.path.join(args.dir, "report_summary.csv"), index=False)
    for (hid, act, steps), t in obs.groupby(["hidden", "activation", "steps"]):
        path = os.path.join(args.dir, f"heatmap_{hid}_{act}_{steps}.png")
        Readout(t.assign(pe=t["encoding"]), pd.DataFrame()).plot_heatmap(path)
        log.info(f"wrote {path}")
    return 0
