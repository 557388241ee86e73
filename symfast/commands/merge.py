"""`symfast merge DIR... --out DIR`: combine shard directories and check completeness."""
from __future__ import annotations

NAME = "merge"
HELP = "merge the directories of sweep shards into one and build the results table"


def add_arguments(p) -> None:
    p.add_argument("dirs", nargs="+", help="shard directories of the same sweep")
    p.add_argument("--out", required=True, help="merged sweep directory (may be one of the inputs)")


def run(args) -> int:
    from symfast.readout.sweeps import SweepStore, finalize

    sources = [SweepStore.open(d) for d in args.dirs]
    target = SweepStore(args.out, sources[0].spec)
    for s in sources:
        if s.root != target.root:
            target.merge_from(s)
    missing = target.missing()
    if missing:
        raise ValueError(f"merged sweep is incomplete: {len(missing)} of {len(target.spec.plan())} batches "
                         f"missing (e.g. {missing[0].batch_id}); run the shards that produce them")
    table = finalize(target)
    print(f"merged {len(args.dirs)} directories: {table['cell_id'].nunique()} cells -> {target.root}/results.csv")
    return 0
