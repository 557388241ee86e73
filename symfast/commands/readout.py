"""`symfast readout`: train seed ensembles per encoding and read out observed symmetries."""
from __future__ import annotations

import logging
import os
import sys
import time

import pandas as pd

from symfast.commands import UsageError, check_backend, input_errors, output_errors

NAME = "readout"
HELP = "train PE+MLP ensembles on shapes and read which symmetries their weights show"

log = logging.getLogger("symfast.readout")


def _csv(s: str) -> list[str]:
    return [p.strip() for p in s.split(",") if p.strip()]


def add_arguments(p) -> None:
    p.add_argument("--shapes", default="triangle,square,hexagon,circle", help="comma-separated shape names")
    p.add_argument("--pe", default="dyadic,triaxis,rff", help="comma-separated encodings: dyadic, triaxis, rff")
    p.add_argument("--seeds", type=int, default=32, help="models per shape (the ensemble size)")
    p.add_argument("--steps", type=int, default=1500, help="Adam steps per model")
    p.add_argument("--points", type=int, default=2048, help="points per model per step")
    p.add_argument("--lr", type=float, default=2e-3, help="Adam learning rate")
    p.add_argument("--hidden", default="64,64", help="hidden widths, comma-separated")
    p.add_argument("--activation", default="relu", help="hidden activation: relu, tanh, silu or sine")
    p.add_argument("--observable", default="gram",
                   help="gram, gram_bias, prefixK, or prefixes (K = 1..L side by side)")
    p.add_argument("--aggregate", default="ensemble", choices=["ensemble", "model"],
                   help="score the ensemble-mean observable, or each model")
    p.add_argument("--sweep", type=int, default=360, help="rotations in the sweep (0 to skip)")
    p.add_argument("--backend", default="auto", choices=["auto", "reference", "cpu", "triton"],
                   help="training kernels")
    p.add_argument("--device", default="cpu", help="torch device for training (cpu or cuda[:N])")
    p.add_argument("--out", default="results/readout", help="output directory")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise rate of calling a true symmetry broken (Holm over the candidates)")
    p.add_argument("--budget", default="fixed", choices=["fixed", "auto"],
                   help="fixed: --seeds per shape; auto: rounds of 8 seeds per shape until every decision "
                        "is settled, at most --seeds")


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
    from symfast.readout import shapes as shp
    from symfast.readout.encodings import encoding_by_name
    from symfast.readout.ensemble import Ensemble
    from symfast.readout.readout import readout
    from symfast.readout.training import fit_sdf

    from symfast.ops.fourier_mlp.reference import ACTIVATIONS
    from symfast.readout.sweeps.spec import MAX_CELLS, MAX_POINTS, MAX_STEPS, MAX_WIDTH, _check_observable

    shape_names, pe_names = _csv(args.shapes), _csv(args.pe)
    if not shape_names or not pe_names:
        raise UsageError("--shapes and --pe need at least one name each")
    with input_errors("--shapes"):
        for s in shape_names:
            shp.by_name(s)
    with input_errors("--pe"):
        pes = [encoding_by_name(n) for n in pe_names]
    for name, hi in (("seeds", MAX_CELLS), ("steps", MAX_STEPS), ("points", MAX_POINTS)):
        if not 1 <= getattr(args, name) <= hi:
            raise UsageError(f"--{name} must be positive and at most {hi}, got {getattr(args, name)}")
    if args.seeds * len(shape_names) > MAX_CELLS:
        raise UsageError(f"--seeds x shapes = {args.seeds * len(shape_names)} models, more than {MAX_CELLS}")
    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be in (0, 1), got {args.alpha}")
    if args.sweep < 0:
        raise UsageError(f"--sweep must be >= 0, got {args.sweep}")
    try:
        hidden = tuple(int(h) for h in _csv(args.hidden))
    except ValueError:
        raise UsageError(f"--hidden must be comma-separated integers, got {args.hidden!r}") from None
    if not hidden or not all(1 <= h <= MAX_WIDTH for h in hidden):
        raise UsageError(f"--hidden widths must be in 1..{MAX_WIDTH}, got {args.hidden!r}")
    if args.activation not in ACTIVATIONS:
        raise UsageError(f"--activation must be one of {sorted(ACTIVATIONS)}, got {args.activation!r}")
    if args.observable != "prefixes":  # "prefixes" reads every K = 1..L, always valid
        with input_errors("--observable"):
            _check_observable(args.observable, [list(hidden)])
    check_backend(args.backend, args.device)
    _check_out(args.out)

    t0 = time.perf_counter()
    ensembles = []
    for pe in pes:
        path = os.path.join(args.out, f"ensemble_{pe.name}.pt")
        settings = dict(hidden=list(hidden), activation=args.activation, steps=args.steps, points=args.points,
                        lr=args.lr, shapes=shape_names, seeds=list(range(args.seeds)))
        if os.path.exists(path):
            with input_errors(f"{path} (delete it to train again)", loading=True):
                ens = Ensemble.load(path)
            if all(ens.config.get(k) == v for k, v in settings.items()):
                log.info(f"[{pe.name}] loaded trained ensemble from {path}")
                ensembles.append(ens)
                continue
        t = time.perf_counter()
        if args.budget == "auto":
            from symfast.readout.budget import adaptive_readout

            res = adaptive_readout(shape_names, pe, alpha=args.alpha, start_seeds=min(8, args.seeds),
                                   max_seeds=args.seeds, steps=args.steps, points=args.points,
                                   observable=args.observable, hidden=hidden, activation=args.activation,
                                   lr=args.lr, device=args.device, backend=args.backend)
            ens = res.ensemble
            # a result, not progress: shown under --quiet too
            print(f"[{pe.name}] adaptive budget: seeds per shape "
                  f"{ {s: ens.shapes.count(s) for s in shape_names} }, {res.model_steps()} model-steps "
                  f"({res.model_steps() / (args.seeds * args.steps * len(shape_names)):.0%} of fixed) "
                  f"in {time.perf_counter() - t:.1f}s", file=sys.stderr)
            with output_errors(path):
                ens.save(path)
            ensembles.append(ens)
            continue
        checkpoint = os.path.join(args.out, f"checkpoint_{pe.name}.pt")
        _check_checkpoint(checkpoint)
        try:
            ens = fit_sdf(shape_names, pe, seeds=args.seeds, hidden=hidden, activation=args.activation,
                          steps=args.steps, points=args.points, lr=args.lr, device=args.device,
                          backend=args.backend, checkpoint=checkpoint, progress=not args.quiet)
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
                alpha=args.alpha)
    with output_errors(args.out):
        _write_outputs(r, args.out)
    _print_tables(r, args, t0, t_train)
    return 0


def _check_checkpoint(path: str) -> None:
    """A checkpoint left by an interrupted run must be readable data; otherwise say which file to delete."""
    if not os.path.exists(path):
        return
    from symfast.readout.sweeps.store import BatchError, safe_load

    try:
        ck = safe_load(path)
    except BatchError as e:
        raise UsageError(f"checkpoint {path} is {e}; delete it to train from scratch") from None
    if not isinstance(ck, dict):
        raise UsageError(f"checkpoint {path} is not a symfast checkpoint; delete it to train from scratch")


def _write_outputs(r, out: str) -> None:
    r.table.to_csv(os.path.join(out, "readout.csv"), index=False)
    r.summary().to_csv(os.path.join(out, "summary.csv"), index=False)
    if not r.sweep.empty:
        r.sweep.to_csv(os.path.join(out, "sweep.csv"), index=False)
        r.plot_sweep(os.path.join(out, "sweep.png"))
    try:
        r.table.to_parquet(os.path.join(out, "readout.parquet"), index=False)
    except ImportError:
        pass
    r.plot_heatmap(os.path.join(out, "heatmap.png"))


def _print_tables(r, args, t0: float, t_train: float) -> None:

    with pd.option_context("display.width", 200, "display.max_rows", 500):
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
    print(f"\nhierarchy G_obs ⊆ G_lift ∩ G_true: {'holds' if n_viol == 0 else f'{n_viol} violation(s)'}")
    print(f"wall time: training {t_train:.1f}s, total {time.perf_counter() - t0:.1f}s; outputs in {args.out}")
