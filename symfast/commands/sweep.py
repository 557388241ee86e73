"""`symfast sweep SPEC.toml --out DIR`: run or resume a sweep (optionally one shard of it)."""
from __future__ import annotations

from symfast.commands import execution, input_errors

NAME = "sweep"
HELP = "run (or resume) a sweep of neural-field trainings and readouts from a TOML spec"


def add_arguments(p) -> None:
    p.add_argument("spec", help="sweep spec (.toml, or .yaml with PyYAML)")
    p.add_argument("--out", required=True, help="sweep directory (created; reruns resume; shards may share it)")
    execution.add_arguments(p)


def run(args) -> int:
    from symfast.readout.sweeps import SweepStore, load_spec, run_sweep

    with input_errors(args.spec):
        spec = load_spec(args.spec)
    execution.check(args, spec)
    with input_errors():
        SweepStore(args.out, spec)
    store = execution.run_shard(run_sweep, spec, args, f"lr in {args.spec}", "sweep")
    if store is not None:
        print(f"sweep complete: {store.root}/results.csv ({spec.num_cells} cells)")
    return 0
