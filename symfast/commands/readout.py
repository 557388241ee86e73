"""`symfast readout`: train seed ensembles per encoding and read out observed symmetries."""
from __future__ import annotations

import os
import sys
import time

import pandas as pd

NAME = "readout"
HELP = "train PE+MLP ensembles on shapes and read which symmetries their weights show"


def _csv(s: str) -> list[str]:
    return [p.strip() for p in s.split(",") if p.strip()]


def add_arguments(p) -> None:
    p.add_argument("--shapes", default="triangle,square,hexagon,circle", help="comma-separated shape names")
    p.add_argument("--pe", default="dyadic,triaxis,rff", help="comma-separated encodings: dyadic, triaxis, rff")
    p.add_argument("--seeds", type=int, default=32, help="models per shape (the ensemble size)")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--points", type=int, default=2048, help="points per model per step")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--hidden", default="64,64", help="hidden widths, comma-separated")
    p.add_argument("--activation", default="relu")
    p.add_argument("--observable", default="gram",
                   help="gram, gram_bias, prefixK, or prefixes (K = 1..L side by side)")
    p.add_argument("--aggregate", default="ensemble", choices=["ensemble", "model"])
    p.add_argument("--sweep", type=int, default=360, help="rotations in the sweep (0 to skip)")
    p.add_argument("--backend", default="auto", help="auto, reference, cpu or triton")
    p.add_argument("--device", default="cpu")
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
        raise ValueError(f"cannot write to output directory {out!r}: {e.strerror or e}") from None


def run(args) -> int:
    from symfast.readout import shapes as shp
    from symfast.readout.encodings import encoding_by_name
    from symfast.readout.ensemble import Ensemble
    from symfast.readout.readout import readout
    from symfast.readout.training import fit_sdf

    shape_names, pe_names = _csv(args.shapes), _csv(args.pe)
    if not shape_names or not pe_names:
        raise ValueError("--shapes and --pe need at least one name each")
    for s in shape_names:
        shp.by_name(s)
    pes = [encoding_by_name(n) for n in pe_names]
    for name in ("seeds", "steps", "points"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} must be positive, got {getattr(args, name)}")
    if not 0 < args.alpha < 1:
        raise ValueError(f"--alpha must be in (0, 1), got {args.alpha}")
    if args.sweep < 0:
        raise ValueError(f"--sweep must be >= 0, got {args.sweep}")
    try:
        hidden = tuple(int(h) for h in _csv(args.hidden))
    except ValueError:
        raise ValueError(f"--hidden must be comma-separated integers, got {args.hidden!r}") from None
    _check_out(args.out)

    t0 = time.perf_counter()
    ensembles = []
    for pe in pes:
        path = os.path.join(args.out, f"ensemble_{pe.name}.pt")
        settings = dict(hidden=list(hidden), activation=args.activation, steps=args.steps, points=args.points,
                        lr=args.lr, shapes=shape_names, seeds=list(range(args.seeds)))
        if os.path.exists(path):
            ens = Ensemble.load(path)
            if all(ens.config.get(k) == v for k, v in settings.items()):
                print(f"[{pe.name}] loaded trained ensemble from {path}", file=sys.stderr)
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
            print(f"[{pe.name}] adaptive budget: seeds per shape "
                  f"{ {s: ens.shapes.count(s) for s in shape_names} }, {res.model_steps()} model-steps "
                  f"({res.model_steps() / (args.seeds * args.steps * len(shape_names)):.0%} of fixed) "
                  f"in {time.perf_counter() - t:.1f}s", file=sys.stderr)
            ens.save(path)
            ensembles.append(ens)
            continue
        ens = fit_sdf(shape_names, pe, seeds=args.seeds, hidden=hidden, activation=args.activation,
                      steps=args.steps, points=args.points, lr=args.lr, device=args.device,
                      backend=args.backend, checkpoint=os.path.join(args.out, f"checkpoint_{pe.name}.pt"),
                      progress=not args.quiet)
        ens.save(path)
        os.remove(os.path.join(args.out, f"checkpoint_{pe.name}.pt"))
        print(f"[{pe.name}] trained {len(ens)} models in {time.perf_counter() - t:.1f}s, "
              f"final loss {ens.losses[-1].mean():.2e}", file=sys.stderr)
        ensembles.append(ens)
    t_train = time.perf_counter() - t0

    r = readout(ensembles, observable=args.observable, aggregate=args.aggregate, sweep=args.sweep,
                alpha=args.alpha)
    r.table.to_csv(os.path.join(args.out, "readout.csv"), index=False)
    r.summary().to_csv(os.path.join(args.out, "summary.csv"), index=False)
    if not r.sweep.empty:
        r.sweep.to_csv(os.path.join(args.out, "sweep.csv"), index=False)
        r.plot_sweep(os.path.join(args.out, "sweep.png"))
    try:
        r.table.to_parquet(os.path.join(args.out, "readout.parquet"), index=False)
    except ImportError:
        pass
    r.plot_heatmap(os.path.join(args.out, "heatmap.png"))

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
    return 0
