"""`symfast population SEED:N --out DIR`: train and read out a shape population with known groups, and
measure the readout's error rates on it (optionally beside a held-out population)."""
from __future__ import annotations

import os

from symfast.commands import UsageError, execution, input_errors, limits, output_errors

NAME = "population"
DEFAULT_PE = {2: "triaxis", 3: "dyadic3"}  # --pe per --dim
HELP = ("train and read out neural fields of a random shape population with known groups (streaming, resumable, "
        "shardable) and write the readout's error rates with Wilson 95-percent intervals")


def add_arguments(p) -> None:
    p.add_argument("population", help="SEED:N, the population's seed and size (e.g. 0:625)")
    p.add_argument("--out", required=True, help="directory (created; a rerun resumes; shards may share it)")
    p.add_argument("--seeds", type=int, default=16, help="models per shape (at least 3)")
    p.add_argument("--dim", type=int, default=2, choices=[2, 3],
                   help="2: the planar members (default); 3: each member extruded into a prism with its O(3) group")
    p.add_argument("--pe", default=None, help="comma-separated encodings: 2D dyadic, triaxis, rff; 3D dyadic3, "
                   "cube4, ico6, rff3 (default: triaxis for --dim 2, dyadic3 for --dim 3)")
    p.add_argument("--hidden", default="64,64", help="hidden widths, comma-separated")
    p.add_argument("--activation", default="relu", help="relu, tanh, silu or sine")
    p.add_argument("--steps", type=int, default=300, help="Adam steps per model")
    p.add_argument("--points", type=int, default=1024, help="points per model per step")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate")
    p.add_argument("--observable", default="gram", help="readout observable: gram, gram_bias or prefixK")
    p.add_argument("--alpha", type=float, default=0.05, help="the readout's family-wise level")
    p.add_argument("--max-batch", type=int, default=256, help="most models per fused training batch "
                   "(whole shapes; the most work an interruption can lose)")
    p.add_argument("--budget", default="fixed", choices=["fixed", "auto"],
                   help="fixed: every model --seeds x --steps; auto: the adaptive rule, from 8 seeds x steps/3 "
                        "up to --seeds x --steps per shape while a decision is unsettled")
    p.add_argument("--tolerance", type=float, default=None,
                   help="the asymmetry (relative to the Gram, like the score) an observed element must be resolved "
                        "to; with --budget auto the rule trains on until it is, and an element still above it at "
                        "the caps is reported unresolved (default: none)")
    p.add_argument("--families", default=None,
                   help="comma-separated families to keep of the first N members: dihedral, cyclic, near, "
                        "asymmetric (default: all)")
    p.add_argument("--keep-weights", action="store_true", help="store every batch's trained weights too")
    p.add_argument("--heldout", default=None, help="a finished population directory (another seed, same "
                   "settings): its rates are written beside this one's")
    execution.add_arguments(p)

def spec_from_args(args):
    """The PopulationSpec the options describe (UsageError naming the option otherwise)."""
    from symfast.readout.sweeps.population import PopulationSpec, parse_population
    from symfast.readout.sweeps.spec import MAX_WIDTH

    with input_errors("population"):
        seed, size = parse_population(args.population)
    hidden = limits.int_list("--hidden", args.hidden, 1, MAX_WIDTH)
    pe = args.pe if args.pe is not None else DEFAULT_PE[args.dim]
    encodings = [e.strip() for e in pe.split(",") if e.strip()]
    if not encodings:
        raise UsageError("--pe needs at least one encoding")
    with input_errors():
        return PopulationSpec(seed=seed, size=size, seeds=args.seeds, encodings=encodings, hidden=list(hidden),
                              activation=args.activation, steps=args.steps, points=args.points, lr=args.lr,
                              observable=args.observable, alpha=args.alpha, max_batch=args.max_batch,
                              keep_weights=args.keep_weights, budget=args.budget,
                              families=_families(args.families), tolerance=args.tolerance, dim=args.dim)


def _families(text):
    if text is None:
        return None
    families = [f.strip() for f in text.split(",") if f.strip()]
    if not families:
        raise UsageError("--families needs at least one family")
    return families


def run(args) -> int:
    from symfast.readout.sweeps.population import PopulationStore, open_store, run_population

    spec = spec_from_args(args)
    execution.check(args, spec)
    with input_errors():
        held = open_store(args.heldout) if args.heldout else None
        PopulationStore(args.out, spec)
    if held is not None:
        _check_heldout(held, spec, args.heldout)
    if execution.run_shard(run_population, spec, args, f"--lr {args.lr:g}", "population") is None:
        return 0
    with output_errors(args.out):
        page = write_calibration(args.out, args.heldout)
    print(f"population {spec.seed}:{spec.size} complete ({spec.num_cells} models): {args.out}/results.csv, "
          f"{args.out}/calibration.csv, {page}")
    return 0


def _check_heldout(held, spec, path: str) -> None:
    from symfast.readout.sweeps.population import PopulationSpec

    if not isinstance(held.spec, PopulationSpec):
        raise UsageError(f"--heldout {path}: not a population directory")
    theirs, ours = held.spec.to_dict(), spec.to_dict()
    differ = sorted(k for k in set(ours) | set(theirs) if k not in ("seed", "size", "max_batch", "keep_weights")
                    and theirs.get(k) != ours.get(k))
    if differ:
        raise UsageError(f"--heldout {path}: trained with other settings ({', '.join(differ)}); a held-out "
                         "population differs only in its seed (and size)")
    if theirs["seed"] == ours["seed"]:
        raise UsageError(f"--heldout {path}: the same population seed {spec.seed}; a held-out population needs "
                         "another seed")
    if held.missing():
        raise UsageError(f"--heldout {path}: unfinished ({len(held.missing())} batches missing)")


def write_calibration(out: str, heldout: str | None = None) -> str:
    """calibration.csv (with held-out columns when `heldout` is given), calibration.md and the
    near-symmetry curve near_symmetry.png in `out`."""
    import pandas as pd

    from symfast._io import atomic_write, atomic_write_bytes
    from symfast.readout.sweeps.population import load_population, open_store
    from symfast.readout.sweeps.rates import calibration, compare, markdown, plot_near

    spec = open_store(out).spec
    calib = calibration(load_population(out))
    budget_line = (" Adaptive budget: each shape from {} seeds x {} steps ".format(*spec.auto_start()) +
                   "up to the seeds and steps above while a decision is unsettled (the mean budget per row is "
                   "in its last column)." if spec.budget == "auto" else "")
    if spec.tolerance is not None:
        budget_line += (f" Tolerance {spec.tolerance:g}: an observed element must be resolved to an asymmetry of "
                        f"{spec.tolerance:g}; one still above it at the caps is unresolved, counted apart and not as "
                        "a false positive.")
    held_line = ""
    if heldout:
        with input_errors(f"--heldout {heldout}"):
            other = calibration(load_population(heldout))
            hspec = open_store(heldout).spec
        calib = compare(calib, other)
        held_line = f" Held-out columns: population {hspec.seed}:{hspec.size} (another seed)."
    atomic_write_bytes(os.path.join(out, "calibration.csv"), calib.to_csv(index=False).encode())
    chosen = f"the {', '.join(spec.families)} members of " if spec.families else ""
    cells = "at most " if spec.budget == "auto" else ""  # the adaptive rule stops below its caps
    solids = " extruded into prisms (3D)" if spec.dim == 3 else ""
    intro = (f"Population {chosen}{spec.seed}:{spec.size}{solids} (N = {len(spec.members())} shapes x {spec.seeds} seeds x "
             f"{len(spec.encodings)} encoding(s) = {cells}{spec.num_cells} fields), "
             f"{spec.steps} steps x {spec.points} points, hidden {spec.hidden}, {spec.observable}, alpha "
             f"{spec.alpha}.{budget_line}{held_line} Rates with Wilson 95% intervals counting elements, and beside "
             "them the 95% intervals counting shapes (one seed ensemble decides all of a shape's elements: read "
             "those); see the population section of the readout-decisions guide for what each rate counts.")
    page = os.path.join(out, "calibration.md")
    written = pd.read_csv(os.path.join(out, "calibration.csv"), dtype={"n": str, "epsilon": str})
    atomic_write_bytes(page, markdown(written, "Readout error rates on a shape population", intro).encode())
    if (written["metric"] == "near_FPR").any():  # the near-symmetry curve
        atomic_write(os.path.join(out, "near_symmetry.png"), lambda p: plot_near(written, p))
    return page
