"""`symfast sweep SPEC.toml --out DIR`: run or resume a sweep (optionally one shard of it)."""
from __future__ import annotations

NAME = "sweep"
HELP = "run (or resume) a sweep of neural-field trainings and readouts from a TOML spec"


def add_arguments(p) -> None:
    p.add_argument("spec", help="sweep spec (.toml, or .yaml with PyYAML)")
    p.add_argument("--out", required=True, help="sweep directory (created; reruns resume)")
    p.add_argument("--shard", default=None, help="i/n: run only shard i of n (deterministic partition)")
    p.add_argument("--executor", default="local", choices=["local", "ray"])
    p.add_argument("--address", default=None, help="Ray cluster address (e.g. auto or ray://host:10001)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="auto")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-batch log lines")


def run(args) -> int:
    from symfast.readout.sweeps import load_spec, run_sweep

    spec = load_spec(args.spec)
    store = run_sweep(spec, args.out, shard=args.shard, executor=args.executor, address=args.address,
                      device=args.device, backend=args.backend, quiet=args.quiet)
    missing = store.missing()
    if missing:
        print(f"shard done; {len(missing)} batches of the sweep remain in other shards "
              f"(then: symfast merge DIR... --out DIR)")
    else:
        print(f"sweep complete: {store.root}/results.csv ({spec.num_cells} cells)")
    return 0
