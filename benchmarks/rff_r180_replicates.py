"""RandomFourierPE's r180 on two replicates: at which budget do seeds 0.. and seeds 1000.. agree?

Per budget (seeds x steps, 2048 points per step), trains the 7 calibration shapes
(`symfast.readout.calibration.grid_shapes()`) under RandomFourierPE twice, on seeds 0..S-1 and on
seeds 1000..1000+S-1, reads each ensemble out against the calibration candidates and keeps the r180
rows: observed, Holm-adjusted p, error against the truth. The claim "random Fourier features observe
r180 where it is a true symmetry" is held on a replicate when r180 is observed on every
point-symmetric shape (square, hexagon, rectangle), else missed; where the two replicates agree, the
budget can be recorded in `symfast.readout.claims.REPLICATE_READINGS`.

Writes --out/rff_r180_replicates.csv after each ensemble (a rerun starts over). About 9 minutes on
one H200 for the default budgets (training on the GPU: 40-130 s per ensemble); hours on 2 CPU cores.

    python benchmarks/rff_r180_replicates.py --device cuda --budgets 64x1500,128x1500,32x1500 --out DIR
"""
import argparse
import os
import time

import pandas as pd

from symfast.nn.encodings import RandomFourierPE
from symfast.readout import calibration
from symfast.readout.readout import readout
from symfast.readout.training import fit_sdf

REPLICATES = (0, 1000)  # first seed of each replicate, as in the calibration's held-out replicate
COLUMNS = ["seeds", "steps", "first_seed", "shape", "truth", "observed", "p_adjusted", "error", "train_s", "read_s"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="64x1500,128x1500,32x1500", help="SEEDSxSTEPS, comma-separated")
    ap.add_argument("--device", default="cpu", help="torch device for training (cpu or cuda[:N])")
    ap.add_argument("--points", type=int, default=2048, help="points per model per step")
    ap.add_argument("--out", required=True, help="directory for rff_r180_replicates.csv")
    args = ap.parse_args()
    budgets = [tuple(int(x) for x in b.split("x")) for b in args.budgets.split(",")]
    os.makedirs(args.out, exist_ok=True)
    shapes = calibration.grid_shapes()
    cands = calibration.candidates_for(shapes)
    rows = []
    for seeds, steps in budgets:
        for first in REPLICATES:
            t0 = time.perf_counter()
            ens = fit_sdf(shapes, RandomFourierPE(), seeds=list(range(first, first + seeds)), steps=steps,
                          points=args.points, device=args.device)
            t1 = time.perf_counter()
            t = calibration.score_table(readout(ens, candidates=cands, sweep=0).table, shapes)
            r = t[t["element"] == "r180"].assign(seeds=seeds, steps=steps, first_seed=first, train_s=t1 - t0,
                                                 read_s=time.perf_counter() - t1)
            rows.append(r[COLUMNS])
            print(rows[-1].to_string(index=False), flush=True)
            table = pd.concat(rows, ignore_index=True)
            path = os.path.join(args.out, "rff_r180_replicates.csv")
            table.to_csv(path + ".tmp", index=False)
            os.replace(path + ".tmp", path)  # a complete file at every point


if __name__ == "__main__":
    main()
