"""`symfast layerwise`: train with a flip-equivariance loss, recover hidden actions, compare to a control.

Examples:
    symfast layerwise --data digits --model mlp --activation sigmoid --out runs/layerwise
    symfast layerwise --model cnn --activation relu --out runs/cnn
    symfast layerwise --suite --out runs/suite      # architectures x activations + autoencoder regimes
    symfast layerwise --exactness --out runs/exact  # layer error vs end-to-end error along a penalty sweep
    symfast layerwise --exactness --model attention --out runs/exact_att  # the same for attention heads
    symfast layerwise --identifiability --out runs/ident  # layer error / random vs near-linear fraction, regime grid
    symfast layerwise --identifiability --matched --out runs/ident_matched  # the same at matched end-to-end error
    symfast layerwise --patches --quick --out runs/patches  # flip-equivariant autoencoder on natural-image patches
"""
from __future__ import annotations

import json
import os
import time

from symfast._io import atomic_write, atomic_write_bytes
from symfast._progress import reporter
from symfast.commands import UsageError, input_errors
from symfast.commands.limits import layerwise_sizes

NAME = "layerwise"
HELP = ("train MLPs with a horizontal-flip equivariance loss (and a control without) and recover the "
        "hidden-layer actions: per-layer errors vs control vs random, layer-1 filters by orbit")


def _write_text(path: str, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def add_arguments(p):
    from symfast.activations import ACTIVATION_TABLE

    p.add_argument("--data", default="digits",
                   help="'digits' (sklearn, bundled), 'cifar10'/'mnist'/'fashionmnist' (needs --root, "
                        "torchvision, never downloads), or a path to an .npz with images/labels")
    p.add_argument("--root", default=None, help="local dataset directory for --data cifar10/mnist/...")
    p.add_argument("--limit", type=int, default=None, help="use at most this many images (default: all)")
    p.add_argument("--model", choices=["mlp", "classifier", "autoencoder", "cnn", "attention"], default="mlp",
                   help="mlp (= classifier): invariant MLP classifier; autoencoder: equivariant MLP autoencoder; "
                        "cnn: invariant CNN classifier (valid 3x3 convs, average pooling); attention: a 4-head "
                        "block on a synthetic token-smoothing task, equivariant to swapping feature pairs "
                        "(--data, --activation ignored); with --exactness, mlp (default) or attention")
    p.add_argument("--activation", choices=sorted(ACTIVATION_TABLE), default="tanh",
                   help="hidden activation; its latent group decides the matching (see the user guide)")
    p.add_argument("--suite", action="store_true",
                   help="run the summary instead: mlp and cnn x tanh/sigmoid/relu (equivariant + control) and "
                        "the autoencoder regime grid; writes suite.md, regimes.png, results.json")
    p.add_argument("--exactness", action="store_true",
                   help="run the exactness sweep instead: invariant MLPs per activation along a sweep of the penalty "
                        "weight (penalty on data and off-data samples), layer-1 error vs end-to-end error, the fitted "
                        "log-log slope and a verdict on held-out seeds; writes exactness.csv/.md/.png, claims.csv. With "
                        "--model attention: 4-head attention blocks per task (--tasks), head parameter error vs "
                        "end-to-end error; writes exactness_attention.csv/.md/.png, claims.csv")
    p.add_argument("--identifiability", action="store_true",
                   help="run the identifiability sweep instead: invariant MLPs per activation (default tanh, sigmoid) "
                        "trained as in --exactness up to a fixed penalty weight, over input scales x weight decays "
                        "(near-linear to saturated units); layer-1 error / random against the near-linear fraction and "
                        "a verdict on held-out seeds; writes identifiability.csv/.md/.png, claims.csv")
    p.add_argument("--matched", action="store_true",
                   help="with --identifiability: compare the groups at matched end-to-end error instead: every net is "
                        "trained along a longer penalty ladder and read at the first weight whose end-to-end error "
                        "lies in a fixed band (nets that never do are excluded and counted); writes "
                        "identifiability_matched.csv/.md/.png, identifiability_matched_paths.csv, identifiability_matched_last.csv (every net "
                        "read at the ladder's last weight, the unmatched contrast), claims.csv")
    p.add_argument("--patches", action="store_true",
                   help="run the natural-image patch study instead: patches of scikit-image's bundled photographs "
                        "(needs scikit-image), the flip-equivariant tanh autoencoder and a control, layer-1 filters "
                        "sorted into symmetric (s+) / antisymmetric (s-) / paired / unmatched; writes patches.md, "
                        "patches.csv, filters_equivariant.png, filters_control.png, results.json")
    p.add_argument("--patch-size", type=int, default=8, help="with --patches: patch side in pixels (4..32)")
    p.add_argument("--patch-count", type=int, default=20000, help="with --patches: number of patches")
    p.add_argument("--patch-color", choices=["gray", "channels"], default="gray",
                   help="with --patches: colour photographs converted to gray, or each RGB channel as a gray image")
    p.add_argument("--input-scale", type=float, default=1.0,
                   help="with --patches: pixel standard deviation of the centred patches (larger: tanh units leave "
                        "their near-linear range)")
    p.add_argument("--flip-closed", action="store_true",
                   help="with --patches: add the mirror of every patch (the set is closed under the flip)")
    p.add_argument("--activations", default=None,
                   help="comma-separated activations (default: tanh,sigmoid,odd_poly,relu with --exactness; "
                        "tanh,sigmoid with --identifiability)")
    p.add_argument("--polish", default=None,
                   help="with --exactness (MLP): comma-separated penalty weights above the Adam sweep's largest "
                        "(e.g. 1e5,1e6,1e7), each a full-batch L-BFGS polish stage continuing the path (default: "
                        "none, the Adam-only sweep)")
    p.add_argument("--polish-iters", type=int, default=300,
                   help="with --exactness --polish: L-BFGS iterations per polish weight")
    p.add_argument("--polish-history", type=int, default=50,
                   help="with --exactness --polish: L-BFGS memory, the curvature pairs kept (1000 closes the "
                        "error several times faster per iteration on digits)")
    p.add_argument("--tasks", default=None,
                   help="with --exactness --model attention: comma-separated tasks, 'teacher' (fit a planted "
                        "equivariant block: the true head permutation is known) and/or 'smoothing' (the suite's "
                        "token-smoothing task) (default teacher,smoothing)")
    p.add_argument("--quick", action="store_true",
                   help="with --suite: fewer steps and smaller CNNs; with --exactness: 4 penalty weights, 2 fit and 3 "
                        "held-out seeds, smaller nets (MLP) and fewer steps; with --identifiability: scales 0.1 and "
                        "10 without weight decay, 1 fit and 3 held-out seeds, smaller nets, fewer steps; with "
                        "--patches: 4000 patches, 300 steps, one seed")
    p.add_argument("--seed-offset", type=int, default=None,
                   help="default: 0 with --suite (the training seed of every model, the one the claims' bars were "
                        "set after; a fresh value gives a held-out replicate, symfast reproduce uses 1000), 1000 with "
                        "--exactness (the first held-out seed; the fit seeds are 0, 1, ...), 3 with --identifiability "
                        "(held-out seeds 3, 4, 5; fit seeds 0, 1, 2), 6 with --identifiability --matched (held-out "
                        "seeds 6, 7, 8)")
    p.add_argument("--equivariance-weight", type=float, default=1.0, help="weight of the equivariance loss term")
    p.add_argument("--weight-decay", type=float, default=0.0, help="AdamW weight decay (e.g. 0.5)")
    p.add_argument("--steps", type=int, default=1500, help="training steps per model (--suite --quick uses smaller fixed budgets)")
    p.add_argument("--lr", type=float, default=2e-3, help="AdamW learning rate")
    p.add_argument("--batch", type=int, default=256, help="images per training batch")
    p.add_argument("--seeds", type=int, default=1, help="number of seeds (0..n-1)")
    p.add_argument("--threshold", type=float, default=0.5,
                   help="per-neuron matching residual below which a neuron counts as fixed/paired")
    p.add_argument("--no-control", action="store_true", help="skip the control trained without the loss")
    p.add_argument("--out", default="results/layerwise", help="output directory (PNG + results.json)")


def _run_suite(args, data) -> int:
    import json

    from symfast.activations import table_markdown
    from symfast.layerwise.attention import attention_experiment, format_attention
    from symfast.layerwise.suite import autoencoder_regimes, format_regimes, format_suite, plot_regimes, run_suite

    log = reporter(not args.quiet, "symfast.layerwise")  # progress lines through the logger
    t0 = time.perf_counter()
    steps, cnn_steps, ae_steps = (400, 300, 300) if args.quick else (args.steps, args.steps, args.steps)
    seed = 0 if args.seed_offset is None else args.seed_offset
    rows = run_suite(data, steps=steps, cnn_steps=cnn_steps, cnn_channels=(8, 16) if args.quick else (16, 32),
                     equivariance_weight=args.equivariance_weight, seed=seed, progress=log, figures_dir=args.out)
    regimes = autoencoder_regimes(data, steps=ae_steps, seed=seed, progress=log)
    log("attention block (synthetic smoothing task)")
    att = attention_experiment(steps=200 if args.quick else args.steps, seed=seed)
    fig = os.path.join(args.out, "regimes.png")
    atomic_write(fig, lambda p: plot_regimes(regimes, p))
    text = ["## Latent groups by activation", "", table_markdown(), "",
            f"## Flip-invariant classifiers on {data.name} (layer 1; equivariance weight {args.equivariance_weight})",
            "", format_suite(rows), "",
            "## Autoencoder with the equivariance loss: input scale x weight decay (tanh)", "",
            format_regimes(regimes), "", f"figure: {fig}", "",
            "## Multi-head attention (4 heads, d = 4, features swapped in pairs; synthetic smoothing task)", "",
            format_attention(att)]
    print("\n".join(text))
    _write_text(os.path.join(args.out, "suite.md"), "\n".join(text) + "\n")
    settings = {"quick": bool(args.quick), "steps": steps, "seed_offset": seed, "data": data.name}
    _write_text(os.path.join(args.out, "results.json"), json.dumps(
        {"suite": rows, "autoencoder_regimes": regimes, "attention": att, "settings": settings,
         "seconds": time.perf_counter() - t0}, indent=1))
    print(f"wrote {args.out}/suite.md, results.json ({time.perf_counter() - t0:.1f} s)")
    return 0


def _run_exactness(args, data) -> int:
    from symfast.layerwise.claims import REPLICATE_SEED
    from symfast.layerwise.exactness import (ACTIVATIONS, exactness_sweep, format_exactness, plot_exactness,
                                             summary_table)
    from symfast.layerwise.penalty_training import ExactnessSettings
    from symfast.report.claim import not_comparable

    acts = _activation_list(args, ACTIVATIONS)
    offset = REPLICATE_SEED if args.seed_offset is None else args.seed_offset
    with input_errors("--polish"):
        polish = () if args.polish is None else tuple(float(w) for w in args.polish.split(",") if w.strip())
        if args.polish is not None and not polish:
            raise ValueError("no polish penalty weight given")
    with input_errors("--exactness settings"):
        extra = dict(seed_offset=offset, polish_lams=polish, polish_iters=args.polish_iters,
                     polish_history=args.polish_history)
        s = (ExactnessSettings(lams=(1e-3, 1e-1, 1e1, 1e3), seeds=2, heldout_seeds=3, sizes=(32, 16), steps=300,
                               bootstrap=400, **extra) if args.quick else ExactnessSettings(**extra))
    t0 = time.perf_counter()
    res = exactness_sweep(data, acts, s, progress=not args.quiet)
    if args.quick:  # as for the suite: a smoke run's rows are not evidence
        res.claims = not_comparable(res.claims, "not converged", "--quick: smaller nets, fewer steps and seeds "
                                    "than the documented run")
    _write_sweep(args.out, "exactness", res, format_exactness(res), summary_table, plot_exactness, t0)
    return 0


def _activation_list(args, default: tuple) -> tuple:
    from symfast.activations import activation

    acts = default if args.activations is None else tuple(a.strip() for a in args.activations.split(",") if a.strip())
    with input_errors("--activations"):
        if not acts:
            raise ValueError("no activation given")
        for a in acts:
            activation(a)
    return acts


def _run_identifiability(args, data) -> int:
    from symfast.layerwise.identifiability import (ACTIVATIONS, IdentifiabilitySettings, format_identifiability,
                                                   identifiability_sweep, plot_identifiability, regime_summary)
    from symfast.layerwise.matched import HELDOUT_OFFSET, LADDER
    from symfast.report.claim import not_comparable

    acts = _activation_list(args, ACTIVATIONS)
    with input_errors("--identifiability settings"):
        extra = {} if args.seed_offset is None else dict(seed_offset=args.seed_offset)
        if args.matched:  # the ladder and the held-out seeds of the matched design
            extra = {"lams": LADDER[-5::2] if args.quick else LADDER, "seed_offset": HELDOUT_OFFSET, **extra}
        s = (IdentifiabilitySettings(**{**dict(scales=(0.1, 10.0), weight_decays=(0.0,), seeds=1, heldout_seeds=3,
                                               sizes=(16, 8), steps=150, bootstrap=400), **extra}) if args.quick
             else IdentifiabilitySettings(**extra))
    t0 = time.perf_counter()
    if args.matched:
        return _run_matched(args, acts, data, s, t0)
    res = identifiability_sweep(data, acts, s, progress=not args.quiet)
    if args.quick:  # as for the exactness sweep: a smoke run's rows are not evidence
        res.claims = not_comparable(res.claims, "not converged", "--quick: smaller nets, fewer steps, scales and "
                                    "seeds than the documented run")
    _write_sweep(args.out, "identifiability", res, format_identifiability(res), regime_summary, plot_identifiability,
                 t0)
    return 0


def _run_matched(args, acts, data, grid, t0: float) -> int:
    from symfast.layerwise.matched import MatchedSettings, format_matched, matched_summary, matched_sweep, plot_matched
    from symfast.report.claim import not_comparable

    res = matched_sweep(data, acts, MatchedSettings(grid=grid), progress=not args.quiet)
    if args.quick:  # a smoke run's rows are not evidence
        res.claims = not_comparable(res.claims, "not converged", "--quick: smaller nets, fewer steps, scales, seeds "
                                    "and ladder weights than the documented run")
    for name, t in (("paths", res.paths), ("last", res.last)):
        atomic_write(os.path.join(args.out, f"identifiability_matched_{name}.csv"),
                     lambda p, t=t: t.to_csv(p, index=False))
    _write_sweep(args.out, "identifiability_matched", res, format_matched(res), matched_summary, plot_matched, t0)
    return 0


def _run_attention_exactness(args) -> int:
    from symfast.layerwise.attention_exactness import (TASKS, AttentionExactnessSettings, attention_exactness_sweep,
                                                       attention_summary, format_attention_exactness,
                                                       plot_attention_exactness)
    from symfast.layerwise.claims import REPLICATE_SEED
    from symfast.report.claim import not_comparable

    if args.activations is not None:
        raise UsageError("--activations is for the MLP sweep; with --model attention pick --tasks")
    tasks = TASKS if args.tasks is None else tuple(t.strip() for t in args.tasks.split(",") if t.strip())
    bad = [t for t in tasks if t not in TASKS]
    if bad or not tasks:
        raise UsageError(f"--tasks: choose from {', '.join(TASKS)}, got {args.tasks!r}")
    offset = REPLICATE_SEED if args.seed_offset is None else args.seed_offset
    with input_errors("--exactness settings"):
        s = (AttentionExactnessSettings(lams=(1e-3, 1e-1, 1e1, 1e3), seeds=2, heldout_seeds=3, steps=300,
                                        seed_offset=offset, bootstrap=400) if args.quick else
             AttentionExactnessSettings(seed_offset=offset))
    t0 = time.perf_counter()
    res = attention_exactness_sweep(tasks, s, progress=not args.quiet)
    if args.quick:  # as for the MLP sweep: a smoke run's rows are not evidence
        res.claims = not_comparable(res.claims, "not converged", "--quick: fewer penalty weights, steps and seeds "
                                    "than the documented run")
    _write_sweep(args.out, "exactness_attention", res, format_attention_exactness(res), attention_summary,
                 plot_attention_exactness, t0)
    return 0


def _write_sweep(out: str, stem: str, res, text: str, summary, plot, t0: float) -> None:
    """Print an exactness sweep's report and write STEM.md, STEM.csv, STEM_summary.csv, STEM_fits.csv,
    claims.csv and STEM.png (the MLP and the attention sweeps write the same set)."""
    from symfast.report.claim import write_claims

    print(text)
    _write_text(os.path.join(out, f"{stem}.md"), text + "\n")
    atomic_write(os.path.join(out, f"{stem}.csv"), lambda p: res.table.to_csv(p, index=False))
    atomic_write(os.path.join(out, f"{stem}_summary.csv"), lambda p: summary(res.table).to_csv(p, index=False))
    atomic_write(os.path.join(out, f"{stem}_fits.csv"), lambda p: res.fits.to_csv(p, index=False))
    atomic_write(os.path.join(out, "claims.csv"), lambda p: write_claims(p, res.claims))
    atomic_write(os.path.join(out, f"{stem}.png"), lambda p: plot(res.table, p))
    print(f"wrote {out}/{stem}.md, {stem}.csv, {stem}_summary.csv, {stem}_fits.csv, claims.csv, {stem}.png "
          f"({time.perf_counter() - t0:.1f} s)")


def _run_patches(args) -> int:
    import pandas as pd

    from symfast.layerwise.network import as_mlp
    from symfast.layerwise.patches import PatchSettings, format_patch_study, load_patches, patch_study
    from symfast.layerwise.plots import counts_text, plot_filters_by_orbit

    with input_errors("--patches settings"):
        s = PatchSettings(size=args.patch_size, count=4000 if args.quick else args.patch_count,
                          color=args.patch_color, flip_closed=args.flip_closed, scale=args.input_scale,
                          seeds=(0,) if args.quick else tuple(range(args.seeds)),
                          steps=300 if args.quick else args.steps,
                          equivariance_weight=args.equivariance_weight, weight_decay=args.weight_decay,
                          activation=args.activation, threshold=args.threshold, lr=args.lr, batch=args.batch,
                          control=not args.no_control)
    t0 = time.perf_counter()
    with input_errors("--patches", loading=True):
        try:
            data = load_patches(s.size, s.count, s.data_seed, s.color, s.flip_closed, scale=s.scale)
        except ImportError as e:
            raise UsageError(str(e)) from None
    res = patch_study(s, progress=not args.quiet, data=data)
    text = format_patch_study(res["rows"], s)
    print(text)
    _write_text(os.path.join(args.out, "patches.md"), text + "\n")
    atomic_write(os.path.join(args.out, "patches.csv"), lambda p: pd.DataFrame(res["rows"]).to_csv(p, index=False))
    for variant in ("equivariant", "control"):
        if res["run"][variant]:
            filt = res["run"]["filters"][(variant, s.seeds[0])]  # filter-level residual, as the table's counts
            W = as_mlp(res["run"]["nets"][(variant, s.seeds[0])]).layers[0][0]
            atomic_write(os.path.join(args.out, f"filters_{variant}.png"), lambda p: plot_filters_by_orbit(
                W, res["data"].shape, filt, p,
                title=f"{s.size}x{s.size} patches, {s.activation} autoencoder, {variant} (seed {s.seeds[0]}), "
                      f"filter-level {counts_text(filt)}"))
    _write_text(os.path.join(args.out, "results.json"), json.dumps(
        {"settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(s).items()},
         "rows": res["rows"], "seconds": time.perf_counter() - t0}, indent=1))
    print(f"wrote {args.out}/patches.md, patches.csv, filters_*.png, results.json ({time.perf_counter() - t0:.1f} s)")
    return 0


def _run_cnn(args, data) -> int:
    import json

    import numpy as np

    from symfast.layerwise.cnn_experiments import format_cnn_results, run_cnn_experiment
    from symfast.layerwise.conv import as_cnn
    from symfast.layerwise.plots import orbit_groups, plot_filters_by_orbit

    t0 = time.perf_counter()
    res = run_cnn_experiment(data, args.activation, args.equivariance_weight, args.weight_decay, args.steps,
                             tuple(range(args.seeds)), not args.no_control, args.threshold, lr=args.lr,
                             batch=args.batch, progress=not args.quiet)
    print(format_cnn_results(res))
    for variant in ("equivariant", "control"):
        if res[variant]:
            W = as_cnn(res["nets"][(variant, 0)]).convs[0][0]
            path = os.path.join(args.out, f"filters_{variant}.png")
            atomic_write(path, lambda p: plot_filters_by_orbit(
                W.reshape(len(W), -1), W.shape[1:], res[variant][0].actions, p,
                title=f"cnn ({args.activation}), {variant}: layer-1 kernels by orbit"))
            groups = {k: len(v) for k, v in orbit_groups(res[variant][0].actions).items()}
            print(f"wrote {path}: {groups}")
    _write_text(os.path.join(args.out, "results.json"), json.dumps(
        {"results": {v: [r.row() for r in res[v]] for v in ("equivariant", "control")},
         "seconds": time.perf_counter() - t0}, indent=1,
        default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o)))
    print(f"wrote {args.out}/results.json ({time.perf_counter() - t0:.1f} s)")
    return 0


def _run_attention(args) -> int:
    import json

    from symfast.layerwise.attention import attention_experiment, format_attention

    t0 = time.perf_counter()
    rows = attention_experiment(steps=args.steps, seed=0)
    print(format_attention(rows))
    _write_text(os.path.join(args.out, "results.json"),
                json.dumps({"attention": rows, "seconds": time.perf_counter() - t0}, indent=1))
    print(f"wrote {args.out}/results.json ({time.perf_counter() - t0:.1f} s)")
    return 0


def run(args) -> int:

    layerwise_sizes(args)
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
    from symfast.layerwise.plots import lit_pixels, orbit_groups, plot_filters_by_orbit

    if sum(map(bool, (args.exactness, args.suite, args.patches, args.identifiability))) > 1:
        raise UsageError("--exactness, --suite, --identifiability and --patches are separate runs; pick one")
    if args.matched and not args.identifiability:
        raise UsageError("--matched is for --identifiability")
    if args.identifiability and args.model not in ("mlp", "classifier"):
        raise UsageError(f"--identifiability runs with --model mlp, got --model {args.model}")
    if args.polish is not None and not (args.exactness and args.model in ("mlp", "classifier")):
        raise UsageError("--polish is for --exactness with the MLP (--model mlp)")
    if args.patches:
        return _run_patches(args)
    if args.tasks is not None and not (args.exactness and args.model == "attention"):
        raise UsageError("--tasks is for --exactness --model attention")
    if args.exactness and args.model == "attention":
        return _run_attention_exactness(args)
    if args.exactness and args.model not in ("mlp", "classifier"):
        raise UsageError(f"--exactness runs with --model mlp or attention, got --model {args.model}")
    if args.model == "attention" and not args.suite and not args.exactness:
        return _run_attention(args)
    with input_errors(f"--data {args.data}", loading=True):
        data = load_image_data(args.data, args.root, args.limit)
    if args.exactness:
        return _run_exactness(args, data)
    if args.identifiability:
        return _run_identifiability(args, data)
    if args.suite:
        return _run_suite(args, data)
    if args.model == "cnn":
        return _run_cnn(args, data)
    model = "classifier" if args.model == "mlp" else args.model
    print(f"{data.name}: {len(data.x)} images of shape {data.shape}, horizontal flip; "
          f"{args.model} ({args.activation}), equivariance weight {args.equivariance_weight}, "
          f"weight decay {args.weight_decay}, {args.steps} steps", flush=True)
    t0 = time.perf_counter()
    res = run_experiment(data, model, args.activation, args.equivariance_weight, args.weight_decay,
                         args.steps, tuple(range(args.seeds)), not args.no_control, args.threshold, args.lr,
                         args.batch, progress=not args.quiet)
    print(format_results(res))
    pngs = {}
    for variant in ("equivariant", "control"):
        if not res[variant]:
            continue
        net = res["nets"][(variant, 0)]
        r = res[variant][0]
        path = os.path.join(args.out, f"filters_{variant}.png")
        atomic_write(path, lambda p: plot_filters_by_orbit(
            as_mlp(net).layers[0][0], data.shape, r.actions, p, lit=lit_pixels(data.x),
            title=f"{args.model} ({args.activation}), {variant}: layer-1 filters by orbit"))
        groups = {k: len(v) for k, v in orbit_groups(r.actions).items()}
        pngs[variant] = {"path": path, "groups": groups}
        print(f"wrote {path}: {groups}")
    summary = {"args": {k: v for k, v in vars(args).items() if not k.startswith("_")},
               "seconds": time.perf_counter() - t0, "figures": pngs,
               "results": {v: [r.row() for r in res[v]] for v in ("equivariant", "control")}}
    path = os.path.join(args.out, "results.json")
    _write_text(path, json.dumps(summary, indent=1,
                                 default=lambda o: o.tolist() if isinstance(o, np.ndarray) else str(o)))
    print(f"wrote {path} ({summary['seconds']:.1f} s)")
    return 0
