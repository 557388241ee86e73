"""`symfast layerwise`: train with a flip-equivariance loss, recover hidden actions, compare to a control.

Example:
    symfast layerwise --data digits --model classifier --activation tanh \\
        --equivariance-weight 1.0 --out runs/layerwise
"""
from __future__ import annotations

import json
import os
import sys
import time

NAME = "layerwise"
HELP = ("Train MLPs with a horizontal-flip equivariance loss (and a control without), recover the "
        "hidden-layer actions, print per-layer errors vs control vs random, plot layer-1 filters by orbit.")


def add_arguments(p):
    p.add_argument("--data", default="digits",
                   help="'digits' (sklearn, bundled), 'cifar10'/'mnist'/'fashionmnist' (needs --root, "
                        "torchvision, never downloads), or a path to an .npz with images/labels")
    p.add_argument("--root", default=None, help="local dataset directory for --data cifar10/mnist/...")
    p.add_argument("--limit", type=int, default=None, help="use at most this many images")
    p.add_argument("--model", choices=["classifier", "autoencoder"], default="classifier")
    p.add_argument("--activation", choices=["tanh", "relu"], default="tanh")
    p.add_argument("--equivariance-weight", type=float, default=1.0)
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay (e.g. 0.5)")
    p.add_argument("--steps", type=int, default=1500)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--seeds", type=int, default=1, help="number of seeds (0..n-1)")
    p.add_argument("--threshold", type=float, default=0.5,
                   help="per-neuron matching residual below which a neuron counts as fixed/paired")
    p.add_argument("--no-control", action="store_true", help="skip the control trained without the loss")
    p.add_argument("--out", default="layerwise_out", help="output directory (PNG + results.json)")


def run(args) -> int:
    from symfast.commands import UsageError

    for name in ("steps", "batch", "seeds"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be positive, got {getattr(args, name)}")
    if args.limit is not None and args.limit < 10:
        raise UsageError(f"--limit must be at least 10, got {args.limit}")
    if args.equivariance_weight < 0 or args.weight_decay < 0 or args.lr <= 0 or args.threshold <= 0:
        raise UsageError("--equivariance-weight and --weight-decay must be >= 0; --lr and --threshold > 0")
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create output directory {args.out!r}: {e}") from e
    if not os.access(args.out, os.W_OK):
        raise UsageError(f"output directory {args.out!r} is not writable")

    import numpy as np

    from symfast.layerwise.data import load_image_data
    from symfast.layerwise.experiments import format_results, run_experiment
    from symfast.layerwise.network import as_mlp
    from symfast.layerwise.plots import plot_filters_by_orbit

    data = load_image_data(args.data, args.root, args.limit)
    print(f"{data.name}: {len(data.x)} images of shape {data.shape}, horizontal flip; "
          f"{args.model} ({args.activation}), equivariance weight {args.equivariance_weight}, "
          f"weight decay {args.weight_decay}, {args.steps} steps", flush=True)
    t0 = time.perf_counter()
    res = run_experiment(data, args.model, args.activation, args.equivariance_weight, args.weight_decay,
                         args.steps, tuple(range(args.seeds)), not args.no_control, args.threshold, args.lr,
                         args.batch, progress=lambda m: print("  " + m, file=sys.stderr, flush=True))
    print(format_results(res))
    pngs = {}
    for variant in ("equivariant", "control"):
        if not res[variant]:
            continue
        net = res["nets"][(variant, 0)]
        r = res[variant][0]
        path = os.path.join(args.out, f"filters_{variant}.png")
        groups = plot_filters_by_orbit(as_mlp(net).layers[0][0], data.shape, r.actions, path,
                                       title=f"{args.model} ({args.activation}), {variant}: layer-1 filters by orbit")
        pngs[variant] = {"path": path, "groups": groups}
        print(f"wrote {path}: {groups}")
    summary = {"args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
               "seconds": time.perf_counter() - t0, "figures": pngs,
               "results": {v: [r.row() for r in res[v]] for v in ("equivariant", "control")}}
    path = os.path.join(args.out, "results.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=1, default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o))
    print(f"wrote {path} ({summary['seconds']:.1f} s)")
    return 0
