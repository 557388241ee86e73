"""The size of the benchmark grids, chosen by one environment switch.

asv does not tell a benchmark that it runs under `--quick`, so the size is read here, once:

    default               sets that a 2-core machine finishes in minutes, so that
                          `asv run --python=same --quick` takes at most 10 minutes there;
    SYMFAST_BENCH_FULL=1  the large sets too (Gram scores over 360-rotation sweeps, the largest
                          scaling points, ...): a full `asv run` of several hours on 2 cores.

Each file says which of its sets the switch changes. Time benchmarks of the two sizes are not
comparable with each other; the ratio tracks are, where both sides scale alike with the size.
"""
import os

FULL = os.environ.get("SYMFAST_BENCH_FULL", "0") not in ("", "0")


def pick(default, full):
    """`full` under SYMFAST_BENCH_FULL=1, else `default`."""
    return full if FULL else default
