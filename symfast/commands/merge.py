"""`symfast merge DIR... --out DIR`: combine shard directories and check completeness."""
from __future__ import annotations

import logging

from symfast.commands import UsageError, input_errors

NAME = "merge"
HELP = "merge the directories of sweep (or population) shards into one and build the results table"

log = logging.getLogger("symfast.merge")


def add_arguments(p) -> None:
    p.add_argument("dirs", nargs="+", help="shard directories of the same sweep")
    p.add_argument("--out", required=True, help="merged sweep directory (may be one of the inputs)")


def run(args) -> int:
    from symfast.readout.sweeps import finalize
    from symfast.readout.sweeps.population import PopulationStore, finalize_population, open_store

    with input_errors():
        sources = [open_store(d) for d in args.dirs]  # sweep or population directories
        target = type(sources[0])(args.out, sources[0].spec)
    refusals = []  # (batch id, "file: reason") of every source file not merged
    for s in sources:
        if s.root != target.root:
            with input_errors():
                new, refused = target.merge_from(s)
            for bid, reason in refused.items():
                path = s.batch_path(bid)
                refusals.append((bid, reason if path in reason else f"{path}: {reason}"))
    missing = target.missing()
    if missing:  # one line: the refused file of a missing batch, if any, is the one to name
        ids = {b.batch_id for b in missing}
        named = sorted(refusals, key=lambda r: r[0] not in ids)[0][1] if refusals else ""
        raise UsageError(f"merged sweep is incomplete: {len(missing)} of {len(target.spec.plan())} batches "
                         f"missing (e.g. {missing[0].batch_id})" +
                         (f"; {len(refusals)} invalid batch file(s) refused, e.g. {named}" if refusals else "")
                         + "; run the shards that produce them")
    for _, line in refusals:  # the merge is complete without them (a good copy came from another source)
        log.warning(f"not merged: {line}")
    if isinstance(target, PopulationStore):
        finalize_population(target)
        print(f"merged {len(args.dirs)} directories: {target.spec.num_cells} models -> {target.root}/results.csv")
        return 0
    table = finalize(target)
    print(f"merged {len(args.dirs)} directories: {table['cell_id'].nunique()} cells -> {target.root}/results.csv")
    return 0
