"""`symfast schur`: train (or load) tanh RNNs, run all Schur block ablations, write CSV + PNG.

The study itself is `symfast.schur.study.schur_study`: this command parses and checks its flags
(`schur_flags`), builds the study's `SchurSettings`, runs it and writes and prints its tables
(`schur_tanh`; `--family ssm|gru|lstm`, the same ablations on a linear state-space model, GRU or
LSTM: `schur_families`; `--copy-family`: `schur_copy_family`).

Example:
    symfast schur --task copy --out runs/schur      # the paper's copy experiment
    symfast schur --task all --out runs/schur       # and flip-flop, sine, context

The grid is the paper's ("Task-Restricted Symmetries in Recurrent Weight Space", arXiv
2606.18457): 3 seeds, copy at H in {56, 64, 72} x the four constructions, the other tasks at
H = 64 with orthogonal init. Training follows a recipe (`symfast.schur.recipes`): `--recipe paper`
is the paper's budget (Adam 1e-3, batch 64, 30 epochs x 128 batches, no gradient clipping);
`--recipe converge` (the default for tanh RNNs) deviates from it where the paper's budget does not
reach the convergence target, and the run prints every deviation. The other families have their
`converge` entries in the same table (GRU and LSTM flip-flop, linear SSM copy). Only models that reach their task's convergence target
(symfast.schur.paper.CONVERGENCE) enter the tables unless --include-unconverged. A paper number is
held or missed only on at least symfast.schur.paper.SCHUR_MIN_SEEDS (10) converged seeds, so the
paper's 3 seeds test none: `--seeds 14` does (what `symfast reproduce` runs).
Checkpoints in OUT/ckpt are reused when their configuration matches.
"""
from __future__ import annotations

import os

from symfast._io import remove_stale_temps
from symfast.commands import UsageError, limits, memory
from symfast.commands.schur_flags import TASK_NAMES, add_arguments, parse_settings

__all__ = ["NAME", "HELP", "TASK_NAMES", "add_arguments", "parse_settings", "prepare_run", "run_settings", "run"]

NAME = "schur"
HELP = "train tanh RNNs (or GRU, LSTM, SSM) and ablate the coupling blocks of their ordered real Schur form (arXiv 2606.18457)"


def prepare_run(settings, out: str) -> dict:
    """Create OUT/ckpt and check what needs the recipe; the {(task, construction): TrainConfig} of the run."""
    from symfast.schur.recipes import RECIPE_NAMES

    s, family = settings, settings.family
    try:
        os.makedirs(os.path.join(out, "ckpt"), exist_ok=True)
        remove_stale_temps(os.path.join(out, "ckpt"))  # checkpoint writes of killed runs
    except OSError as e:
        raise UsageError(f"cannot create output directory {out!r}: {e}") from e
    if s.recipe not in RECIPE_NAMES:
        raise UsageError(f"unknown --recipe {s.recipe!r}; expected one of {', '.join(RECIPE_NAMES)}")
    cons_of, hid_of = s.constructions_of(), s.widths_of()
    if s.cayley_init is not None and family != "tanh":
        raise UsageError(f"--cayley-init applies to the tanh family's cayley models, not --family {family}")
    if s.cayley_neg is not None:
        if family != "tanh" or s.cayley_neg < 0:
            raise UsageError(f"--cayley-neg takes an integer >= 0 and applies to the tanh family's cayley models, "
                             f"got {s.cayley_neg} with --family {family}")
        widths = [w for t in s.tasks if "cayley" in cons_of[t] for w in hid_of[t]]
        if widths and s.cayley_neg > min(widths):
            raise UsageError(f"--cayley-neg {s.cayley_neg} exceeds the narrowest Cayley model's width {min(widths)}")
    try:
        cfg_of = s.train_configs()
    except ValueError as e:  # e.g. --epochs shorter than the recipe's curriculum
        raise UsageError(f"--recipe {s.recipe} with the flags given: {e}") from None
    if family != "tanh" and "diagonal" in cons_of[s.tasks[0]] and any(h % 2 for v in hid_of.values() for h in v):
        raise UsageError(f"--hidden must be even for the diagonal SSM (2x2 blocks), got "
                         f"{','.join(map(str, s.hidden or ()))}")
    return cfg_of


def run_settings(settings, out: str, progress: bool = True) -> int:
    """One study into `out`: check, print the settings, run `schur_study`, write its files and print its tables."""
    from symfast.commands.schur_families import print_family_header, report_family
    from symfast.commands.schur_tanh import print_tanh_header, report_tanh
    from symfast.schur.study import CheckpointError, schur_study

    cfg_of = prepare_run(settings, out)
    memory.refuse_above(memory.schur_bytes(settings, cfg_of), "symfast schur with these sizes",
                        "lower --batch, --hidden, --n-eval, --seeds or the copy task's --copy-length / --copy-delay")
    tanh = settings.family == "tanh"
    (print_tanh_header if tanh else print_family_header)(settings, cfg_of)
    try:
        study = schur_study(settings, os.path.join(out, "ckpt"), progress=progress, log=print)
    except CheckpointError as e:  # a damaged file: one line naming it, never a traceback
        raise UsageError(str(e)) from None
    return (report_tanh if tanh else report_family)(study, out)


def run(args) -> int:
    limits.schur_sizes(args)  # before anything is planned or allocated
    if args.copy_family:
        from symfast.commands.schur_copy_family import run_copy_family
        return run_copy_family(args, run_settings)
    if args.copy_settings is not None:
        raise UsageError("--copy-settings applies to --copy-family")
    return run_settings(parse_settings(args), args.out, progress=not args.no_progress)
