"""`symfast readout`: train seed ensembles per encoding and read out observed symmetries."""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import sys
import time

import pandas as pd

from symfast._io import atomic_write as _write
from symfast.commands import UsageError, check_backend, input_errors, limits, memory, output_errors

NAME = "readout"
HELP = "train PE+MLP ensembles on shapes and read which symmetries their weights show"

log = logging.getLogger("symfast.readout")


def _csv(s: str) -> list[str]:
    return [p.strip() for p in s.split(",") if p.strip()]


# Defaults per --dim. 2D: symfast's budget, chosen on the calibration grid (the readout paper states no
# seeds, steps or points). 3D: a study that runs in a few minutes on 2 CPU cores
# (3D training runs the reference kernels; measured in the docs, readout-3d.md).
DEFAULTS = {
    2: dict(shapes="triangle,square,hexagon,circle", pe="dyadic,triaxis,rff", seeds=32, steps=1500, points=2048,
            sweep=360),
    3: dict(shapes="cube,tetrahedron,octahedron,icosahedron", pe="dyadic3,cube4,ico6,rff3", seeds=8, steps=300,
            points=1024, sweep=72),
}


def add_arguments(p) -> None:
    p.add_argument("--dim", type=int, default=2, choices=[2, 3],
                   help="2: planar shapes (default); 3: solids (cube, tetrahedron, octahedron, icosahedron, ...)")
    p.add_argument("--shapes", default=None, help="comma-separated shape names (default per --dim: "
                   + "; ".join(f"{d}D {v['shapes']}" for d, v in DEFAULTS.items()) + ")")
    p.add_argument("--pe", default=None, help="comma-separated encodings: 2D dyadic, triaxis, rff; 3D dyadic3, "
                   "cube4, ico6, rff3 (default: all of --dim)")
    p.add_argument("--seeds", type=int, default=None, help="models per shape (the ensemble size; default 32 in 2D, "
                   "8 in 3D)")
    p.add_argument("--steps", type=int, default=None, help="Adam steps per model (default 1500 in 2D, 300 in 3D)")
    p.add_argument("--points", type=int, default=None, help="points per model per step (default 2048 in 2D, "
                   "1024 in 3D)")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate")
    p.add_argument("--hidden", default="64,64", help="hidden widths, comma-separated")
    p.add_argument("--activation", default="relu", help="hidden activation: relu, tanh, silu or sine")
    p.add_argument("--eikonal", type=float, default=0.0,
                   help="weight of an eikonal term mean (|grad f| - 1)^2 in the training loss (default 0: the plain fit)")
    p.add_argument("--normals", type=float, default=0.0,
                   help="weight of a normal term mean |grad f - grad sdf|^2 (the shape's exact normals; default 0)")
    p.add_argument("--observable", default="gram",
                   help="gram, gram_bias, prefixK, or prefixes (K = 1..L side by side)")
    p.add_argument("--aggregate", default="ensemble", choices=["ensemble", "model"],
                   help="score the ensemble-mean observable, or each model")
    p.add_argument("--sweep", type=int, default=None, help="rotations in the sweep (0 to skip; default 360 in 2D, "
                   "72 in 3D)")
    p.add_argument("--sweep-axis", default="0,0,1", help="3D: axis of the rotation sweep, as x,y,z")
    p.add_argument("--sampler", default=None, help="training points: 2D disk or box; 3D ball, box or "
                   "near_surface (default: disk in 2D, ball in 3D)")
    p.add_argument("--backend", default="auto", choices=["auto", "reference", "cpu", "triton"],
                   help="training kernels")
    p.add_argument("--device", default="cpu", help="torch device for training (cpu or cuda[:N])")
    p.add_argument("--out", default="results/readout", help="output directory")
    p.add_argument("--overwrite", action="store_true",
                   help="replace ensembles in --out that were trained with other settings (default: refuse)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise rate of calling a true symmetry broken (Holm over the candidates)")
    p.add_argument("--budget", default="fixed", choices=["fixed", "auto"],
                   help="fixed: --seeds x --steps per shape; auto: start at 8 seeds x a third of --steps and "
                        "give each shape with unsettled decisions more steps (up to --steps), then 4 more "
                        "seeds at a time (up to --seeds)")
    p.add_argument("--tolerance", type=float, default=None,
                   help="the asymmetry (relative to the observable, like the score) an observed element must be "
                        "resolved to: --budget auto trains on until it is; readout.csv gets a 'resolved' column, "
                        "and elements still above it are listed as unresolved (default: none)")


def _check_out(out: str) -> None:
    try:
        os.makedirs(out, exist_ok=True)
        probe = os.path.join(out, f".write-test-{os.getpid()}")
        with open(probe, "w") as f:
            f.write("ok")
        os.remove(probe)
    except OSError as e:
        raise UsageError(f"cannot write to output directory {out!r}: {e.strerror or e}") from None


def run(args) -> int:
    from symfast import shapes as shp
    from symfast.nn.encodings import encoding_by_name
    from symfast.nn.ensemble import Ensemble
    from symfast.readout.readout import MIN_MODELS_PER_SHAPE, readout
    from symfast.readout.training import fit_sdf

    from symfast.ops.fourier_mlp.reference import ACTIVATIONS
    from symfast.readout.sweeps.spec import MAX_CELLS, MAX_POINTS, MAX_STEPS, MAX_WIDTH, check_observable

    from symfast.readout.training import DOMAINS

    for name, value in DEFAULTS[args.dim].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    shape_names, pe_names = _csv(args.shapes), _csv(args.pe)
    if not shape_names or not pe_names:
        raise UsageError("--shapes and --pe need at least one name each")
    with input_errors("--shapes"):
        for s in shape_names:
            d = getattr(shp.by_name(s), "dim", 2)
            if d != args.dim:
                raise UsageError(f"--shapes: {s!r} is a {d}D shape; pass --dim {d} or {args.dim}D shapes "
                                 f"(e.g. {DEFAULTS[args.dim]['shapes']})")
    with input_errors("--pe"):
        pes = [encoding_by_name(n) for n in pe_names]
    for pe in pes:
        if pe.input_dim != args.dim:
            raise UsageError(f"--pe: {pe.name!r} encodes {pe.input_dim}D points; pass --dim {pe.input_dim} or "
                             f"{args.dim}D encodings (e.g. {DEFAULTS[args.dim]['pe']})")
    sampler = DOMAINS[args.dim][0] if args.sampler is None else args.sampler
    if sampler not in DOMAINS[args.dim]:
        raise UsageError(f"--sampler must be one of {', '.join(DOMAINS[args.dim])} for --dim {args.dim}, "
                         f"got {sampler!r}")
    try:
        axis = [float(v) for v in _csv(args.sweep_axis)]
    except ValueError:
        axis = []
    if len(axis) != 3 or not all(map(math.isfinite, axis)) or not any(axis):
        raise UsageError(f"--sweep-axis must be three finite numbers x,y,z, not all zero; got {args.sweep_axis!r}")
    for name, hi in (("seeds", MAX_CELLS), ("steps", MAX_STEPS), ("points", MAX_POINTS)):
        if not 1 <= getattr(args, name) <= hi:
            raise UsageError(f"--{name} must be positive and at most {hi}, got {getattr(args, name)}")
    if args.seeds < MIN_MODELS_PER_SHAPE:
        raise UsageError(f"--seeds must be at least {MIN_MODELS_PER_SHAPE}: the readout decides each element against "
                         f"the noise between seeds, which one or two models do not give; got {args.seeds}")
    if args.seeds * len(shape_names) > MAX_CELLS:
        raise UsageError(f"--seeds x shapes = {args.seeds * len(shape_names)} models, more than {MAX_CELLS}")
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be in (0, 1), got {args.alpha}")
    if args.tolerance is not None and not (math.isfinite(args.tolerance) and args.tolerance > 0):
        raise UsageError(f"--tolerance must be a positive number, got {args.tolerance}")
    for name in ("eikonal", "normals"):
        if not (math.isfinite(getattr(args, name)) and getattr(args, name) >= 0):
            raise UsageError(f"--{name} must be a finite weight >= 0, got {getattr(args, name)}")
    second_order = {k: getattr(args, k) for k in ("eikonal", "normals") if getattr(args, k) > 0}
    if second_order and args.budget == "auto":
        raise UsageError("--eikonal/--normals train with a fixed budget; drop --budget auto")
    limits.int_in("--sweep", args.sweep, 0, limits.READOUT_MAX_SWEEP)
    hidden = limits.int_list("--hidden", args.hidden, 1, MAX_WIDTH)
    if args.activation not in ACTIVATIONS:
        raise UsageError(f"--activation must be one of {sorted(ACTIVATIONS)}, got {args.activation!r}")
    if args.observable != "prefixes":  # "prefixes" reads every K = 1..L, always valid
        with input_errors("--observable"):
            check_observable(args.observable, [list(hidden)])
    check_backend(args.backend, args.device)
    from symfast.readout.training import check_backend as check_training

    with input_errors("--hidden"):
        for pe in pes:
            check_training(args.backend, args.device, hidden, pe.dim)
    memory.refuse_above(memory.readout_bytes(args.seeds * len(shape_names), args.points, hidden,
                                             max(pe.dim for pe in pes), args.sweep),
                        "symfast readout with these sizes", "lower --points, --hidden, --seeds or --sweep")
    _check_out(args.out)

    t0 = time.perf_counter()
    ensembles = []
    for pe in pes:
        path = os.path.join(args.out, f"ensemble_{pe.name}.pt")
        settings = dict(hidden=list(hidden), activation=args.activation, steps=args.steps, points=args.points,
                        lr=args.lr, shapes=shape_names, seeds=list(range(args.seeds)), sampler=sampler,
                        **second_order)
        if os.path.exists(path):
            with input_errors(f"{path} (delete it to train again)", loading=True):
                ens = Ensemble.load(path)
            same_loss = all(ens.config.get(k, 0.0) == getattr(args, k) for k in ("eikonal", "normals"))
            if same_loss and all(ens.config.get(k) == v for k, v in settings.items()):
                log.info(f"[{pe.name}] loaded trained ensemble from {path}")
                ensembles.append(ens)
                continue
            if not args.overwrite:
                other = {k: ens.config.get(k, 0.0) for k, v in {**settings, "eikonal": args.eikonal,
                                                                  "normals": args.normals}.items()
                         if ens.config.get(k, 0.0) != v}
                raise UsageError(f"{path} holds another run's ensemble (trained with {other}); use another --out "
                                 "or pass --overwrite to replace it")
        t = time.perf_counter()
        if args.budget == "auto":
            from symfast.readout.budget import adaptive_readout

            # checkpoints per training setting, so a rerun with other settings does not meet them
            key = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
            directory = os.path.join(args.out, f"adaptive_{pe.name}_{key}")
            try:
                with output_errors(directory):
                    res = adaptive_readout(shape_names, pe, alpha=args.alpha, start_seeds=min(8, args.seeds),
                                           max_seeds=args.seeds, steps=args.steps, points=args.points,
                                           observable=args.observable, hidden=hidden,
                                           activation=args.activation, lr=args.lr, device=args.device,
                                           backend=args.backend, sampler=sampler, directory=directory,
                                           tolerance=args.tolerance, progress=not args.quiet)
            except FloatingPointError as e:
                raise UsageError(f"{e} (--lr {args.lr:g})") from None
            except ValueError as e:  # only complaints about the checkpoint files are input errors
                if directory not in str(e):
                    raise
                raise UsageError(str(e)) from None
            ens = res.ensemble
            # a result, not progress: shown under --quiet too
            last = res.history.groupby("shape", sort=False).last()
            per_shape = {s: f"{last.seeds[s]} x {last.steps[s]}" for s in shape_names}
            print(f"[{pe.name}] adaptive budget: seeds x steps per shape {per_shape}, {res.model_steps()} model-steps "
                  f"({res.model_steps() / (args.seeds * args.steps * len(shape_names)):.0%} of fixed) "
                  f"in {time.perf_counter() - t:.1f}s", file=sys.stderr)
            with output_errors(path):
                ens.save(path)
            ensembles.append(ens)
            continue
        checkpoint = os.path.join(args.out, f"checkpoint_{pe.name}.pt")
        _check_checkpoint(checkpoint)
        try:
            with output_errors(checkpoint):  # a full disk while checkpointing: one line
                ens = fit_sdf(shape_names, pe, seeds=args.seeds, hidden=hidden, activation=args.activation,
                              steps=args.steps, points=args.points, lr=args.lr, device=args.device,
                              backend=args.backend, sampler=sampler, checkpoint=checkpoint, progress=not args.quiet,
                              **second_order)
        except FloatingPointError as e:
            raise UsageError(f"{e} (--lr {args.lr:g})") from None
        except ValueError as e:  # only fit_sdf's complaints about the checkpoint file are input errors
            if checkpoint not in str(e):
                raise
            raise UsageError(str(e)) from None
        with output_errors(path):
            ens.save(path)
        os.remove(checkpoint)
        log.info(f"[{pe.name}] trained {len(ens)} models in {time.perf_counter() - t:.1f}s, "
                 f"final loss {ens.losses[-1].mean():.2e}")
        ensembles.append(ens)
    t_train = time.perf_counter() - t0

    r = readout(ensembles, observable=args.observable, aggregate=args.aggregate, sweep=args.sweep,
                alpha=args.alpha, sweep_axis=axis)
    if args.tolerance is not None:
        _mark_resolved(r.table, args.tolerance)
    with output_errors(args.out):
        _write_outputs(r, args.out, ensembles if args.dim == 3 else None)
    _print_tables(r, args, t0, t_train)
    return 0


def _mark_resolved(table, tolerance: float) -> None:
    """Add the `resolved` column and say which observed elements the budget left above the tolerance."""
    from symfast.readout.budget import resolved

    table["resolved"] = resolved(table, tolerance)
    open_rows = table[~table["resolved"]]
    if len(open_rows):  # a result, not progress: shown under --quiet too
        names = ", ".join(f"{r.shape}/{r.pe}/{r.element} ({r.resolution:.3f})" for r in open_rows.itertuples())
        print(f"unresolved at tolerance {tolerance:g} (observed, but an asymmetry up to the resolution in brackets "
              f"is not ruled out; more seeds lower it): {names}", file=sys.stderr)


def _check_checkpoint(path: str) -> None:
    """A checkpoint left by an interrupted run must be readable data; otherwise say which file to delete."""
    if not os.path.exists(path):
        return
    from symfast._io import safe_load

    try:
        ck = safe_load(path, "readout checkpoint")
    except (ValueError, OSError) as e:
        raise UsageError(f"{e}; delete it to train from scratch") from None
    if not isinstance(ck, dict):
        raise UsageError(f"checkpoint {path} is not a symfast checkpoint; delete it to train from scratch")


def _write_outputs(r, out: str, solids=None) -> None:
    """Tables and figures; `solids` (3D ensembles) adds the fitted level sets and SDF slices of the first."""
    _write(os.path.join(out, "readout.csv"), lambda p: r.table.to_csv(p, index=False))
    _write(os.path.join(out, "summary.csv"), lambda p: r.summary().to_csv(p, index=False))
    if not r.sweep.empty:
        _write(os.path.join(out, "sweep.csv"), lambda p: r.sweep.to_csv(p, index=False))
        _write(os.path.join(out, "sweep.png"), r.plot_sweep)
    try:
        _write(os.path.join(out, "readout.parquet"), lambda p: r.table.to_parquet(p, index=False))
    except ImportError:
        pass
    if solids is None:
        _write(os.path.join(out, "heatmap.png"), r.plot_heatmap)
        return
    from symfast.readout import plots3d

    _write(os.path.join(out, "heatmap3d.png"), lambda p: plots3d.plot_score_heatmap(r.table, p))
    if plots3d.HAVE_SKIMAGE:
        _write(os.path.join(out, "level_sets.png"), lambda p: plots3d.plot_level_sets(solids[0], path=p))
    else:  # no scikit-image: no zero-level figure (never another figure under its name), said once
        log.warning("scikit-image is not installed (pip install 'symfast[plot3d]'): level_sets.png is not drawn")
    _write(os.path.join(out, "sdf_slices.png"), lambda p: plots3d.plot_sdf_slices(solids[0], path=p))


def _print_tables(r, args, t0: float, t_train: float) -> None:

    with pd.option_context("display.width", 250, "display.max_rows", 500, "display.max_columns", 30):
        if args.dim == 3:  # 144 candidates: set sizes here, elements in readout.csv / summary.csv
            print(r.counts().to_string(index=False))
        else:
            cols = ["shape", "pe", "element", "liftable", "true_symmetry", "score", "noise_floor", "threshold",
                    "p_adjusted", "observed", "approx_observed"]
            print(r.table[cols].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            print()
            print(r.summary().to_string(index=False))
        print(r.report())
        if r.table["observable"].nunique() > 1:
            print("\nseparation of liftable true vs false elements (worst shape, z units):")
            print(r.separation().to_string(index=False))
    n_viol = len(r.violations)
    if not r.table["observed"].any():  # an empty G_obs satisfies the hierarchy vacuously: not a finding
        print("\nhierarchy G_obs ⊆ G_lift ∩ G_true: not tested, nothing was observed (not even the identity)")
    else:
        print(f"\nhierarchy G_obs ⊆ G_lift ∩ G_true: {'holds' if n_viol == 0 else f'{n_viol} violation(s)'}")
    print(f"wall time: training {t_train:.1f}s, total {time.perf_counter() - t0:.1f}s; outputs in {args.out}")
