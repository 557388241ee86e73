"""`symfast schur --copy-family`: the Schur ablations over the copy task's family of definitions
(`symfast.schur.copy_family.FAMILY`), and which of them show the pattern of the paper's copy table.

Each definition is an ordinary `symfast schur --task copy` run with its copy flags into
OUT/<setting> (checkpoints reused there, so an interrupted family run resumes); the settings of 48
bits or more train under the longer budget their `CopySetting.long_budget` names (the `converge`
recipe of dense-init copy, printed as a deviation). Then OUT/copy_family_pattern.csv (the pattern's
verdict per setting and seed set), OUT/copy_family_ablation.csv (the paper's 8 copy-table rows per
setting) and OUT/copy_family.png.
"""
from __future__ import annotations

import os

import pandas as pd

from symfast._io import atomic_write
from symfast.commands import UsageError


def _settings(arg: str | None):
    from symfast.schur.copy_family import FAMILY, setting
    if not arg:
        return list(FAMILY)
    try:
        return [setting(n.strip()) for n in arg.split(",") if n.strip()]
    except ValueError as e:
        raise UsageError(str(e)) from None


def read_runs(out: str, settings) -> dict:
    """{setting name: (schur_models.csv, schur_ablation_raw.csv)} of the family runs under `out`."""
    runs = {}
    for s in settings:
        d = os.path.join(out, s.name)
        try:
            runs[s.name] = (pd.read_csv(os.path.join(d, "schur_models.csv")),
                            pd.read_csv(os.path.join(d, "schur_ablation_raw.csv")))
        except FileNotFoundError as e:
            raise UsageError(f"copy setting {s.name}: {e.filename} missing; run it again") from None
    return runs


def run_copy_family(args, run_one) -> int:
    """Run every copy setting of `--copy-settings` with `run_one(settings, out, progress)` (`symfast.commands.schur.
    run_settings`) into OUT/<setting>, then write and print the copy pattern's verdict per setting."""
    from symfast.commands.schur_flags import parse_settings
    from symfast.schur import plots
    from symfast.schur.copy_family import ablation_table, pattern_table
    from symfast.schur.study import copy_family_settings

    if args.family != "tanh" or args.task not in ("copy", "flipflop"):
        raise UsageError("--copy-family runs the tanh family's copy task: leave --family and --task at their "
                         "defaults or pass --task copy")
    if any(v is not None for v in (args.copy_length, args.copy_symbols, args.copy_delay, args.copy_replay)):
        raise UsageError("--copy-family sets the copy task of each setting itself: drop --copy-length, "
                         "--copy-symbols, --copy-delay and --copy-replay (choose settings with --copy-settings)")
    settings = _settings(args.copy_settings)
    base = parse_settings(args)
    for s in settings:
        sub_out = os.path.join(args.out, s.name)
        print(f"\n######## copy setting {s.name} ({s.bits:g} bits"
              + (", the longer budget" if s.long_budget else "") + f") -> {sub_out}")
        rc = run_one(copy_family_settings(base, s), sub_out, progress=not args.no_progress)
        if rc:
            return rc
    runs = read_runs(args.out, settings)
    pattern, table = pattern_table(runs, alpha=args.alpha), ablation_table(runs, alpha=args.alpha)
    atomic_write(os.path.join(args.out, "copy_family_pattern.csv"), lambda p: pattern.to_csv(p, index=False))
    atomic_write(os.path.join(args.out, "copy_family_ablation.csv"), lambda p: table.to_csv(p, index=False))
    png = os.path.join(args.out, "copy_family.png")
    atomic_write(png, lambda p: plots.plot_copy_family(pattern, "all", p))
    print(f"\n######## the paper's copy pattern (-T_CC harmless, -T_C->R far below) per copy setting, alpha "
          f"{args.alpha:g}: verdict per seed set")
    cols = ["setting", "bits", "seeds", "models", "converged", "in_C_mean", "T_CC_mass_mean", "cc_lowest_mean",
            "cr_mean", "verdict"]
    print(pattern[cols].to_string(index=False, float_format="{:.3g}".format))
    print("reasons:\n" + "\n".join(f"  {r.setting} ({r.seeds}): {r.reason}" for r in pattern.itertuples()))
    print(f"\nwrote {os.path.join(args.out, 'copy_family_pattern.csv')}, copy_family_ablation.csv, {png}")
    return 0
