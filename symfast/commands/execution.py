"""Flags, checks and the run of the commands that train a store's batches (`sweep`, `population`):
where the batches train (shard, executor, device, backend) and what a finished shard prints."""
from __future__ import annotations

from symfast.commands import UsageError, check_backend, input_errors, output_errors


def add_arguments(p) -> None:
    """--shard, --executor, --address, --device, --backend, --quiet."""
    p.add_argument("--shard", default=None, help="i/n: run only shard i of n (deterministic partition; then "
                   "symfast merge)")
    p.add_argument("--executor", default="local", choices=["local", "ray"], help="where batches train")
    p.add_argument("--address", default=None,
                   help="Ray cluster address (auto, host:port or ray://host:10001); checked with a 10 s "
                        "connect timeout")
    p.add_argument("--device", default="cpu", help="torch device for training (cpu or cuda[:N])")
    p.add_argument("--backend", default="auto", choices=["auto", "reference", "cpu", "triton"],
                   help="training kernels")
    p.add_argument("--quiet", action="store_true", help="no progress bar or per-batch log lines")


def check(args, spec) -> None:
    """Refuse a bad shard, backend, device or Ray address before anything trains."""
    from symfast.readout.sweeps.run import check_ray_address, parse_shard

    with input_errors():
        parse_shard(args.shard)
        check_backend(args.backend, args.device)
        spec.check_backend(args.backend, args.device)
        if args.executor == "ray":
            check_ray_address(args.address)


def run_shard(runner, spec, args, lr_source: str, what: str):
    """`runner(spec, out, ...)` on this shard; the store when every batch is done, None (after saying what
    remains) when other shards still have batches. lr_source names where the learning rate was set."""
    try:
        with output_errors(args.out):
            store = runner(spec, args.out, shard=args.shard, executor=args.executor, address=args.address,
                           device=args.device, backend=args.backend, progress=not args.quiet)
    except FloatingPointError as e:
        raise UsageError(f"{e} ({lr_source})") from None
    missing = store.missing()
    if missing:
        print(f"shard done; {len(missing)} batches of the {what} remain in other shards "
              f"(then: symfast merge DIR... --out DIR)")
        return None
    return store
