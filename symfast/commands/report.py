"""`symfast report DIR`: tables and heatmaps of a finished sweep."""
from __future__ import annotations

import os

import pandas as pd

NAME = "report"
HELP = "summarise a finished sweep: observed sets per configuration and score heatmaps"


def add_arguments(p) -> None:
    p.add_argument("dir", help="a finished sweep directory")


def run(args) -> int:
    from symfast.readout.readout import Readout
    from symfast.readout.sweeps import load_results

    table = load_results(args.dir)
    obs = pd.read_csv(os.path.join(args.dir, "observed.csv"))
    cells = table.drop_duplicates("cell_id")
    print(f"{len(cells)} cells; mean final loss by configuration:")
    cfg = ["encoding", "hidden", "activation", "steps"]
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(cells.groupby(cfg)["final_loss"].agg(["count", "mean"]).to_string())
        rows = []
        for key, t in obs.groupby(cfg + ["shape", "observable"], sort=False):
            rows.append(dict(zip(cfg + ["shape", "observable"], key), G_obs=" ".join(t.loc[t["observed"], "element"]),
                             violations=int((t["observed"] & ~(t["liftable"] & (t["true_symmetry"] == True))).sum())))  # noqa: E712
        summary = pd.DataFrame(rows)
        print()
        print(summary.to_string(index=False))
    summary.to_csv(os.path.join(args.dir, "report_summary.csv"), index=False)
    for (hid, act, steps), t in obs.groupby(["hidden", "activation", "steps"]):
        path = os.path.join(args.dir, f"heatmap_{hid}_{act}_{steps}.png")
        Readout(t.assign(pe=t["encoding"]), pd.DataFrame()).plot_heatmap(path)
        print(f"wrote {path}")
    return 0
