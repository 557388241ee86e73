"""`symfast sweep SPEC.toml --out DIR`: run or resume a sweep (optionally one shard of it)."""
from __future__ import annotations

from symfast.commands import UsageError, check_backend, input_errors

NAME = "sweep"
HELP = "run (or resume) a sweep of neural-field trainings and readouts from a TOML spec"


def add_arguments(p) -> None:
    p.add_argument("spec", help="sweep spec (.toml, or .yaml with PyYAML)")
    p.add_argument("--out", required=True, help="sweep directory (created; reruns resume; shards may share it)")
    p.add_argument("--shard", default=None, help="i/n: run only shard i of n (deterministic partition)")
    p.add_argument("--executor", default="local", choices=["local", "ray"], help="where batches train")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (auto, host:port or ray://host:10001); checked with a 10 s "
                        "connect timeout")
    p.add_argument("--device", default="cpu", help="torch device for training (cpu or cuda[:N])")
    p.add_argument("--backend", default="auto", choices=["auto", "reference", "cpu", "triton"],
                   help="training kernels")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-batch log lines")


def run(args) -> int:
    from symfast.readout.sweeps import SweepStore, load_spec, run_sweep
    from symfast.readout.sweeps.run import check_ray_address, parse_shard

    with input_errors(args.spec):
        spec = load_spec(args.spec)
    with input_errors():
        parse_shard(args.shard)
        SweepStore(args.out, spec)
        check_backend(args.backend, args.device)
        spec.check_backend(args.backend, args.device)
        if args.executor == "ray":
            check_ray_address(args.address)
    try:
        store = run_sweep(spec, args.out, shard=args.shard, executor=args.executor, address=args.address,
                          device=args.device, backend=args.backend, progress=not args.quiet)
    except FloatingPointError as e:
        raise UsageError(f"{e} (lr in {args.spec})") from None
    missing = store.missing()
    if missing:
        print(f"shard done; {len(missing)} batches of the sweep remain in other shards "
              f"(then: symfast merge DIR... --out DIR)")
    else:
        print(f"sweep complete: {store.root}/results.csv ({spec.num_cells} cells)")
    return 0
