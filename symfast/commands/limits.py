"""Size bounds of command-line options, checked before anything is planned or allocated.

A typo such as `--hidden 1000000000` or `--alpha-grid 0:1:1e-12` must end in one line (exit 2)
that states the bound, not in hours of planning or an allocation that takes the machine's memory.
Each bound is fixed and documented here; it bounds one option, far above what the studies use
(the paper's Schur runs: H = 64, batch 64, copy length 8; the readout: 360 rotations).
"""
from __future__ import annotations

from symfast.commands import UsageError

__all__ = ["SCHUR_MAX_HIDDEN", "SCHUR_MAX_BATCH", "SCHUR_MAX_EVAL", "COPY_MAX_LENGTH", "COPY_MAX_SYMBOLS",
           "COPY_MAX_DELAY", "ALPHA_GRID_MOST", "READOUT_MAX_SWEEP", "LAYERWISE_MAX_STEPS", "LAYERWISE_MAX_SEEDS",
           "LAYERWISE_MAX_BATCH", "PATCH_MAX_COUNT", "POLISH_MAX_ITERS", "POLISH_MAX_HISTORY", "int_in", "int_list",
           "schur_sizes", "layerwise_sizes", "alpha_grid_size"]

SCHUR_MAX_HIDDEN = 4096  # an H x H recurrent matrix per model; its real Schur form is O(H^3)
SCHUR_MAX_BATCH = 65_536  # sequences per training batch
SCHUR_MAX_EVAL = 65_536  # held-out sequences
COPY_MAX_LENGTH = 4096  # copy task: symbols to remember (sequence length grows with it)
COPY_MAX_SYMBOLS = 1024  # copy task: alphabet size (one-hot inputs)
COPY_MAX_DELAY = 65_536  # copy task: blank steps before the replay
ALPHA_GRID_MOST = 200  # values in --alpha-grid
READOUT_MAX_SWEEP = 36_000  # rotations in the readout's sweep (0.01 degree apart)
LAYERWISE_MAX_STEPS = 1_000_000  # training steps per net (the studies use 500-1500)
LAYERWISE_MAX_SEEDS = 1000  # nets per setting, trained one after another
LAYERWISE_MAX_BATCH = 1_048_576  # images per batch (clamped to the data set's size)
PATCH_MAX_COUNT = 1_000_000  # image patches cut and held in memory (the study uses 20,000)
POLISH_MAX_ITERS = 100_000  # L-BFGS iterations of the penalty polish
POLISH_MAX_HISTORY = 10_000  # L-BFGS curvature pairs kept (memory grows with it)


def int_in(option: str, value, lo: int, hi: int) -> int:
    """`value` (an int, or None for "not given") in lo..hi, else a UsageError stating the bounds."""
    if value is not None and not lo <= value <= hi:
        raise UsageError(f"{option} must be in {lo}..{hi}, got {value}")
    return value


def int_list(option: str, text: str, lo: int, hi: int) -> tuple[int, ...]:
    """"8,16" -> (8, 16): comma-separated integers in lo..hi; an empty item ("8,,8") is refused, not dropped."""
    items = [p.strip() for p in str(text).split(",")]
    try:
        values = tuple(int(p) for p in items)
    except ValueError:
        raise UsageError(f"{option} must be comma-separated integers in {lo}..{hi} (no empty items), "
                         f"got {text!r}") from None
    if not all(lo <= v <= hi for v in values):
        raise UsageError(f"{option} values must be in {lo}..{hi}, got {text!r}")
    return values


def schur_sizes(args) -> None:
    """The sizes `symfast schur` would allocate with: --hidden (unless 'paper'), --batch, --n-eval and
    the copy task's --copy-length, --copy-symbols and --copy-delay."""
    if args.hidden != "paper":
        int_list("--hidden", args.hidden, 1, SCHUR_MAX_HIDDEN)
    for option, value, hi in (("--batch", args.batch, SCHUR_MAX_BATCH), ("--n-eval", args.n_eval, SCHUR_MAX_EVAL),
                              ("--copy-length", args.copy_length, COPY_MAX_LENGTH),
                              ("--copy-symbols", args.copy_symbols, COPY_MAX_SYMBOLS)):
        int_in(option, value, 1, hi)
    int_in("--copy-delay", args.copy_delay, 0, COPY_MAX_DELAY)


def layerwise_sizes(args) -> None:
    """The sizes `symfast layerwise` would train and allocate with: --steps, --seeds, --batch,
    --patch-count and the polish's --polish-iters and --polish-history."""
    for option, value, hi in (("--steps", args.steps, LAYERWISE_MAX_STEPS), ("--seeds", args.seeds, LAYERWISE_MAX_SEEDS),
                              ("--batch", args.batch, LAYERWISE_MAX_BATCH),
                              ("--patch-count", args.patch_count, PATCH_MAX_COUNT),
                              ("--polish-iters", args.polish_iters, POLISH_MAX_ITERS),
                              ("--polish-history", args.polish_history, POLISH_MAX_HISTORY)):
        int_in(option, value, 1, hi)


def alpha_grid_size(text: str, start: float, stop: float, step: float) -> None:
    """Refuse a start:stop:step grid of more than ALPHA_GRID_MOST values before it is built."""
    if step > 0 and stop >= start and (stop - start) / step + 1 > ALPHA_GRID_MOST + 0.5:
        raise UsageError(f"--alpha-grid must hold at most {ALPHA_GRID_MOST} values in (0, 1], got {text!r} "
                         f"({(stop - start) / step + 1:.3g} values)")
