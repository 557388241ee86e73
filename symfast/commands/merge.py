"""`symfast merge DIR... --out DIR`: combine shard directories and check completeness."""
from __future__ import annotations

import logging

from symfast.commands import UsageError, input_errors

NAME = "merge"
HELP = "merge the directories of sweep shards into one and build the results table"

log = logging.getLogger("symfast.merge")


def add_arguments(p) -> None:
    p.add_argument("dirs", nargs="+", help="shard directories of the same sweep")
    p.add_argument("--out", required=True, help="merged sweep directory (may be one of the inputs)")


def run(args) -> int:
    from symfast.readout.sweeps import SweepStore, finalize

    with input_errors():
        sources = [SweepStore.open(d) for d in args.dirs]
        target = SweepStore(args.out, sources[0].spec)
    refusals = []  # "file: reason" of every source file not merged
    for s in sources:
        if s.root != target.root:
            with input_errors():
                new, refused = target.merge_from(s)
            for bid, reason in refused.items():
                path = s.batch_path(bid)
                refusals.append(reason if path in reason else f"{path}: {reason}")
                log.warning(f"not merged: {refusals[-1]}")
    missing = target.missing()
    if missing:
        raise UsageError(f"merged sweep is incomplete: {len(missing)} of {len(target.spec.plan())} batches "
                         f"missing (e.g. {missing[0].batch_id})" +
                         (f"; {len(refusals)} invalid batch file(s) refused, first {refusals[0]}" if refusals else "")
                         + "; run the shards that produce them")
    table = finalize(target)
    print(f"merged {len(args.dirs)} directories: {table['cell_id'].nunique()} cells -> {target.root}/results.csv")
    return 0
