"""Time and peak memory of `symfast population` against the population size N.

    python benchmarks/population_scaling.py --sizes 16,64,256,625 --seeds 16 --out scaling [--executor ray]
    python benchmarks/population_scaling.py --dim 3 --sizes 16,64,256 --out scaling3d   # the solids (dyadic3)

Each size runs in a fresh process (so its peak resident memory is its own) into OUT/N<size>/ and is
timed end to end; training and readout seconds are summed from the run's timing.csv. Prints and
writes OUT/scaling.csv: size, fields, wall_s, train_s, readout_s, peak_rss_mb. A size already
finished under OUT is not rerun (delete its folder to measure it again). It times the installed symfast
(never the source tree) and refuses a build without the compiled kernels. Measure on a quiet machine:
other jobs on the same cores change the times, not the memory.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pandas as pd

CHILD = """
import json, resource, sys, time
import torch
torch.set_num_threads({threads})
import symfast
if not symfast.cpp_available():
    sys.exit(f"symfast at {{symfast.__file__}} has no compiled kernels: measure an installed build (pip install .)")
from symfast.readout.sweeps.population import PopulationSpec, run_population
spec = PopulationSpec(seed={seed}, size={size}, seeds={seeds}, encodings={encodings!r}, steps={steps},
                      points={points}, max_batch={max_batch}, dim={dim})
t = time.perf_counter()
run_population(spec, {out!r}, executor={executor!r}, address={address!r})
print(json.dumps(dict(wall_s=time.perf_counter() - t,
                      peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)))
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="16,64,256")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--dim", type=int, default=2, choices=[2, 3])
    p.add_argument("--pe", default=None, help="encodings (default: the population command's for --dim)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--points", type=int, default=1024)
    p.add_argument("--max-batch", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--executor", default="local", choices=["local", "ray"])
    p.add_argument("--address", default=None)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    if args.pe is None:
        from symfast.commands.population import DEFAULT_PE

        args.pe = DEFAULT_PE[args.dim]
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        out = os.path.join(args.out, f"N{size}")
        marker = os.path.join(out, "scaling.json")
        if os.path.exists(marker):
            with open(marker) as f:
                rows.append(json.load(f))
            continue
        code = CHILD.format(threads=args.threads, seed=args.seed, size=size, seeds=args.seeds,
                            encodings=args.pe.split(","), steps=args.steps, points=args.points,
                            max_batch=args.max_batch, dim=args.dim, out=out, executor=args.executor,
                            address=args.address)
        # -P: the installed symfast, not the source tree of the working directory (which has no compiled
        # kernels, so it would time the PyTorch reference path)
        res = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True)
        if res.returncode:
            raise SystemExit(res.stderr.strip().splitlines()[-1] if res.stderr.strip() else f"size {size} failed")
        measured = json.loads(res.stdout.strip().splitlines()[-1])
        timing = pd.read_csv(os.path.join(out, "timing.csv"))
        row = dict(size=size, fields=size * args.seeds * len(args.pe.split(",")), **measured,
                   train_s=float(timing["train_seconds"].sum()), readout_s=float(timing["readout_seconds"].sum()))
        with open(marker, "w") as f:
            json.dump(row, f)
        rows.append(row)
    table = pd.DataFrame(rows)[["size", "fields", "wall_s", "train_s", "readout_s", "peak_rss_mb"]]
    os.makedirs(args.out, exist_ok=True)
    table.to_csv(os.path.join(args.out, "scaling.csv"), index=False)
    print(table.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
