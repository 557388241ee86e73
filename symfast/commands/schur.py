"""`symfast schur`: train (or load) tanh RNNs, run all Schur block ablations, write CSV + PNG.

`--family ssm|gru|lstm` runs the same ablations on a linear state-space model, GRU or LSTM
(`symfast.commands.schur_families`: training with checkpoints in OUT/ckpt, ablation tables, CSV and a
spectra figure).

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
import time

import pandas as pd
import torch

from symfast._io import atomic_write, remove_stale_temps
from symfast.commands import UsageError, limits
from symfast.commands.schur_common import SINGLE, ablated_fixed_point_facts, ci_column, fixed_point_facts, print_fixed_points
from symfast.commands.schur_common import budget as _budget
from symfast.commands.schur_common import fmt_ci as _fmt_ci
from symfast.commands.schur_common import parse_list as _list
from symfast.commands.schur_common import print_deviations
from symfast.commands.schur_common import stabiliser_table as _stabiliser_table

NAME = "schur"
HELP = "train tanh RNNs (or GRU, LSTM, SSM) and ablate the coupling blocks of their ordered real Schur form (arXiv 2606.18457)"

TASK_NAMES = ("flipflop", "sine", "context", "copy")


def add_arguments(p) -> None:
    p.add_argument("--family", choices=("tanh", "ssm", "gru", "lstm"), default="tanh",
                   help="recurrent family: tanh RNN (the paper's), linear state-space model (A ablated), GRU or LSTM "
                        "(one gate's recurrent slice ablated, see --gate)")
    p.add_argument("--gate", default="all",
                   help="gru: r,z,n (n = the candidate W_hn); lstm: i,f,g,o (g = the cell input W_hg); a comma "
                        "list or 'all' (gru and lstm only)")
    p.add_argument("--task", default="flipflop", help="flipflop|sine|context|copy, a comma list, or 'all'")
    p.add_argument("--copy-length", type=int, default=None, help="copy task: sequence length L (default 8)")
    p.add_argument("--copy-symbols", type=int, default=None, help="copy task: alphabet size K (default 4)")
    p.add_argument("--copy-delay", type=int, default=None,
                   help="copy task: blank steps between the go cue and the replay (default 0)")
    p.add_argument("--copy-replay", choices=("cyclic", "once"), default=None,
                   help="copy task: replay the sequence again and again over 128 steps (cyclic, the default) or "
                        "once (L steps); the task variants are ours, not the paper's (tanh family only)")
    from symfast.schur.paper import PAPER_SEEDS
    p.add_argument("--copy-family", action="store_true",
                   help="run the copy task over its family of definitions (L 8/16/32 x K 4/8 x cyclic/once; "
                        "orthogonal, H 64 unless given) into OUT/<setting>, and test the paper's copy pattern in each "
                        "(copy_family_pattern.csv, copy_family.png)")
    p.add_argument("--copy-settings", default=None,
                   help="with --copy-family: a comma list of settings, e.g. cyclic_L8_K4,once_L16_K4 (default: all)")
    p.add_argument("--seeds", type=int, default=PAPER_SEEDS,
                   help=f"number of seeds (0..seeds-1); beyond {PAPER_SEEDS}, the paper's, the comparison with the "
                        f"paper is also read on seeds {PAPER_SEEDS}.. alone, a held-out replicate "
                        "(schur_paper_replicates.csv); a paper number is tested only on 10 or more converged seeds")
    p.add_argument("--hidden", default="paper",
                   help="hidden units H, a comma list; 'paper': 56,64,72 for the tanh family on copy, 64 otherwise")
    p.add_argument("--construction", default="paper",
                   help="tanh: dense|orthogonal|normal|cayley ('paper': all for copy, orthogonal for the others); "
                        "ssm: dense|diagonal; gru, lstm: nobias|bias ('paper': all of the family's); "
                        "a comma list or 'all'")
    p.add_argument("--recipe", default=None,
                   help="training recipe (symfast.schur.recipes): 'paper' (the paper's budget: 30 epochs x 128 "
                        "batches of 64, Adam 1e-3, no clipping) or 'converge' (per task and construction: clipping, "
                        "more epochs, a learning-rate schedule; every deviation is printed), for every family "
                        "(default: converge)")
    p.add_argument("--epochs", type=int, default=None, help="training epochs (default: the recipe's)")
    p.add_argument("--batches", type=int, default=None, help="batches per epoch (default: the recipe's)")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the recipe's)")
    p.add_argument("--lr", type=float, default=None, help="Adam (peak) learning rate (default: the recipe's)")
    p.add_argument("--clip", type=float, default=None,
                   help="clip each model's gradient norm (default: the recipe's; the paper: off)")
    p.add_argument("--cayley-neg", type=int, default=None,
                   help="cayley models: the number of -1 entries of the fixed diagonal D of the scaled Cayley map "
                        "W = (I + A)^{-1} (I - A) D (arXiv 1707.09520); 0 is the plain map (default: the recipe's)")
    from symfast.schur.rnn.model import CAYLEY_INITS, LATTICE, SPREAD
    p.add_argument("--cayley-init", choices=CAYLEY_INITS, default=None,
                   help="cayley models: the init of the generator; identity = W near I (the paper's construction), "
                        f"spread = W's eigenvalue angles drawn uniformly over (-{SPREAD:g} pi, {SPREAD:g} pi) in a "
                        f"random basis, lattice = the same angles on the multiples of 2 pi / {LATTICE} "
                        "(default: the recipe's)")
    p.add_argument("--schedule", choices=("constant", "cosine"), default=None,
                   help="learning-rate schedule (default: the recipe's): cosine = linear warmup, then a cosine decay")
    p.add_argument("--warmup", type=int, default=None, help="warmup steps of the cosine schedule (default: the recipe's)")
    p.add_argument("--min-lr-ratio", type=float, default=None,
                   help="the cosine schedule's final learning rate as a fraction of --lr (default: the recipe's)")
    p.add_argument("--curriculum", type=int, default=None,
                   help="first epochs trained on shortened sequences, growing to the full task (default: the recipe's)")
    p.add_argument("--epsilon", type=float, default=None,
                   help="tolerance on the rollout distance d_D for eps-stabilisers (default 0.05)")
    p.add_argument("--include-unconverged", action="store_true",
                   help="keep models below the convergence target in the tables")
    p.add_argument("--alpha", type=float, default=0.9, help="sector cut for the main table")
    p.add_argument("--alphas", default="0.85,0.9,0.95", help="alpha sweep (comma list; '' for none)")
    p.add_argument("--n-random", type=int, default=4,
                   help="equal-norm random draws per ablation and control (anywhere, same pattern, outside)")
    p.add_argument("--n-orders", type=int, default=8,
                   help="random within-sector block orders (beside modulus and reversed) at --alpha")
    p.add_argument("--alpha-grid", default="0.85:0.95:0.01",
                   help="fine alpha grid for the stability table (tanh family), start:stop:step or a comma list "
                        "('' for none)")
    p.add_argument("--near-cut", type=float, default=0.02,
                   help="list eigenvalues within this relative distance of alpha * rho (tanh family)")
    p.add_argument("--n-eval", type=int, default=256, help="held-out sequences")
    p.add_argument("--fixed-points", type=int, default=0,
                   help="search fixed and slow points from this many visited states per model (0: no search); "
                        "writes OUT/schur[_<family>]_fixed_points.csv")
    p.add_argument("--refit", action="store_true", help="also report the ridge-refit readout variant")
    p.add_argument("--threads", type=int, default=None,
                   help="threads for training (default: torch's thread count for the fused engine, 1 for torch)")
    p.add_argument("--engine", choices=("fused", "torch"), default="fused",
                   help="tanh training: all models of a task (every seed, width, construction and training setting) at "
                        "once through the fused kernel, or torch.nn.RNN one model at a time; GRU and SSM: all seeds of a "
                        "construction as one batched ensemble, or one model at a time (the LSTM: one at a time under either)")
    p.add_argument("--out", default="results/schur", help="output directory")
    p.add_argument("--no-progress", action="store_true")


def _train_task(task, cells, args, cfg, ckdir) -> dict:
    """Every model of `task` the run needs, {(construction, hidden): ([model per seed], [losses per seed])}.

    `cfg`: one TrainConfig, or {construction: TrainConfig} (a recipe's per-construction settings).
    A model whose checkpoint in `ckdir` is complete and of this run's settings is loaded; all the
    others, of every construction, width and training settings, train together in one `train_many`
    call (one fused kernel call per step for the models whose batches have the same shape, widths
    padded), each resuming from a partly trained checkpoint of its own. The result of each model
    does not depend on which others it trains with.
    """
    from symfast.schur.recipes import FIELDS
    from symfast.schur.rnn import TrainConfig, train_many
    from symfast.schur.rnn.checkpoint import load_checkpoint as _load

    def load_checkpoint(path):  # a damaged file: one line naming it, never a traceback or NaN model
        try:
            return _load(path)
        except ValueError as e:
            raise UsageError(str(e)) from None
    cfg_of = cfg if isinstance(cfg, dict) else {cn: cfg for cn, _ in cells}  # construction -> TrainConfig
    seeds = list(range(args.seeds))
    keys = [(cn, hidden, s) for cn, hidden in cells for s in seeds]
    paths = {key: os.path.join(ckdir, f"{task.name}_{key[0]}_H{key[1]}_s{key[2]}.pt") for key in keys}
    models, losses = {}, {}
    for key in keys:
        cn, hidden, _ = key
        if os.path.exists(paths[key]):
            m, t, info = load_checkpoint(paths[key])
            tr, c = {**vars(TrainConfig()), **info["train"]}, cfg_of[cn]  # older files: no schedule fields
            if (t == task and m.n_hidden == hidden and m.recurrent == cn and info["epoch"] == c.epochs
                    and all(tr[f] == getattr(c, f) for f in FIELDS)):
                models[key], losses[key] = m, info["losses"]
    todo = [key for key in keys if key not in models]
    if todo:
        cfgs = [cfg_of[cn] for cn, _, _ in todo]
        t0 = time.perf_counter()
        trained = train_many(task, [s for _, _, s in todo], [h for _, h, _ in todo], [cn for cn, _, _ in todo], cfgs,
                             checkpoints=[paths[key] for key in todo], progress=not args.no_progress)
        print(f"trained {len(todo)} {task.name} models ({len(keys) - len(todo)} loaded, "
              f"{len({repr(c) for c in cfgs})} training settings) in one {cfgs[0].engine} run: "
              f"{time.perf_counter() - t0:.1f} s")
        models.update(zip(todo, trained))
        # --epochs 0 trains nothing and writes no checkpoint: no losses to show
        losses.update((key, load_checkpoint(paths[key])[2]["losses"] if os.path.exists(paths[key]) else [])
                      for key in todo)
    return {(cn, hidden): ([models[(cn, hidden, s)] for s in seeds], [losses[(cn, hidden, s)] for s in seeds])
            for cn, hidden in cells}


def analyse_model(model, task, seed: int, args, sweep, epsilon: float, grid) -> dict:
    """The analysis of one trained tanh RNN, on one torch thread (`symfast.schur.threads`).

    Args:
        model: a trained TanhRNN; task: its task; seed: its seed (seeds the random controls and orders).
        args: the parsed flags (alpha, n_eval, n_random, n_orders, refit, near_cut); sweep: the alphas
            of the ablation table; epsilon: the d_D tolerance; grid: the fine alpha grid ([] for none).

    Returns:
        {"ablation": schur_ablation's table, "subspace": removed_direction_projections' rows at
        args.alpha, "blocks": the SchurBlocks at args.alpha, "near_cut": near_cut_eigenvalues'
        table, "alpha_grid": alpha_stability's table or None, "fixed_points": with args.fixed_points = K
        > 0, the fixed/slow points from K visited states and each single-block ablation linearised at the
        slowest (`schur_common.fixed_point_facts`, `ablated_fixed_point_facts`), else None, "key": {"fvu",
        "replay_acc", "converged"} of the full model at args.alpha}.
    """
    from symfast.schur import schur_blocks
    from symfast.schur.ablation import schur_ablation
    from symfast.schur.nearcut import alpha_stability, near_cut_eigenvalues
    from symfast.schur.paper import converged
    from symfast.schur.subspace import removed_direction_projections
    from symfast.schur.threads import analysis_threads

    if args.alpha not in sweep:
        raise ValueError(f"the sweep {sweep} must hold alpha = {args.alpha}")
    with analysis_threads():
        df = schur_ablation(model, task, alpha=sweep, n_eval=args.n_eval, n_random=args.n_random, seed=seed,
                            refit=args.refit, epsilon=epsilon, n_orders=args.n_orders, detail_alphas=[args.alpha])
        full = df[(df.subset == "full") & (df.alpha == args.alpha)].iloc[0]
        acc = float(full["replay_acc"]) if "replay_acc" in df else None
        pr = removed_direction_projections(model, task, alpha=args.alpha, n_eval=args.n_eval)
        W = model.recurrent_weight(torch.float64).detach()
        sb = schur_blocks(W, alpha=args.alpha)
        nc = near_cut_eigenvalues(W, args.alpha, args.near_cut)
        ag = alpha_stability(model, task, grid, n_eval=min(64, args.n_eval)) if grid else None
        fp = None
        if getattr(args, "fixed_points", 0):
            fp, h_star = fixed_point_facts(model, task, args.fixed_points, seed, args.alpha)
            fp.update(gate="W", **ablated_fixed_point_facts(model, h_star, args.alpha,
                                                            df[df.alpha == args.alpha].set_index("subset")))
    return {"ablation": df, "subspace": pr, "blocks": sb, "near_cut": nc, "alpha_grid": ag, "fixed_points": fp,
            "key": {"fvu": float(full["fvu"]), "replay_acc": acc,
                    "converged": converged(task.name, float(full["fvu"]), acc)}}


def _grid(arg: str) -> list[float]:
    """'0.85:0.95:0.01' (inclusive) or '0.85,0.9' or '' -> sorted alphas in (0, 1]."""
    try:
        if ":" in arg:
            a, b, h = (float(v) for v in arg.split(":"))
            limits.alpha_grid_size(arg, a, b, h)  # before the list is built
            if not h > 0 or b < a:
                raise ValueError
            out = [round(a + h * i, 10) for i in range(int(round((b - a) / h)) + 1)]
        else:
            out = [float(v) for v in arg.split(",") if v.strip()]
    except ValueError as e:
        raise UsageError(f"bad --alpha-grid {arg!r}: start:stop:step or a comma list") from e
    if any(not 0 < v <= 1 for v in out) or len(out) > 200:
        raise UsageError(f"--alpha-grid must hold at most 200 values in (0, 1], got {arg!r}")
    return sorted(set(out))


def _order_table(s, copy: bool) -> pd.DataFrame:
    """Per subset (means over seeds): the paper's dFVU beside its range over within-sector orderings, the
    ordering-invariant variant, and the equal-norm random controls."""
    fmt = "{:.3g}".format
    cols = {"subset": s["subset"], "dFVU paper": s["dfvu_mean"].map(fmt),
            "over orderings min / med / max": [f"{a:.3g} / {b:.3g} / {c:.3g}" for a, b, c in
                                               s[["dfvu_order_min_mean", "dfvu_order_median_mean",
                                                  "dfvu_order_max_mean"]].to_numpy()],
            "order-dep. (share)": s["order_dependent_mean"].map("{:.2g}".format),
            "dFVU inv": s["dfvu_inv_mean"].map(fmt), "mass inv": s["removed_rel_T_inv_mean"].map(fmt),
            "rand pattern": s["rand_pattern_dfvu_mean_mean"].map(fmt),
            "rand outside": s["rand_outside_dfvu_mean_mean"].map(fmt), "rand anywhere": s["rand_dfvu_mean_mean"].map(fmt)}
    if copy and "replay_order_min_mean" in s:
        cols["replay over orderings"] = [f"{a:.3g}..{b:.3g}" for a, b in
                                         s[["replay_order_min_mean", "replay_order_max_mean"]].to_numpy()]
        cols["replay inv"] = s["replay_acc_inv_mean"].map(fmt)
    return pd.DataFrame(cols)


def _grid_table(g) -> pd.DataFrame:
    out = []
    for key, gg in g.groupby(["task", "construction", "hidden", "subset"], sort=False):
        per_seed = gg.groupby("seed").agg(nR_lo=("n_R", "min"), nR_hi=("n_R", "max"), rng=("dfvu_range", "first"),
                                          rng_inv=("dfvu_inv_range", "first"), med=("dfvu", "median"))
        out.append(dict(zip(["task", "construction", "H", "subset"], key),
                        n_R=f"{per_seed.nR_lo.min()}..{per_seed.nR_hi.max()}",
                        dfvu_median=f"{per_seed.med.median():.3g}", dfvu_range=f"{per_seed.rng.median():.3g}",
                        dfvu_inv_range=f"{per_seed.rng_inv.median():.3g}"))
    return pd.DataFrame(out)


def _print_convergence(facts, tasks, include_unconverged) -> None:
    from symfast.schur.paper import CONVERGENCE
    print("\nconvergence (held-out; target " + ", ".join(f"{t}: {m} {'<=' if m == 'fvu' else '>='} {v}"
                                                          for t, (m, v) in CONVERGENCE.items() if t in tasks) + ")")
    conv = facts.groupby(["task", "construction", "hidden"], sort=False).agg(
        converged=("converged", "sum"), seeds=("converged", "size"), fvu_median=("fvu", "median"),
        fvu_max=("fvu", "max"), replay_acc_min=("replay_acc", "min"))
    print(conv.to_string())
    if not include_unconverged and not facts.converged.all():
        print("unconverged models are excluded from every table (--include-unconverged keeps them)")


def run(args) -> int:
    from symfast.schur import plots
    from symfast.schur.ablation import EPSILON, summarize
    from symfast.schur.paper import COPY_WIDTHS, PAPER_SEEDS, TASK_WIDTH, compare_replicates, compare_with_paper
    from symfast.schur.recipes import RECIPE_NAMES, recipe_config
    from symfast.schur.rnn import TrainConfig, make_task
    from symfast.schur.families import FAMILY_CONSTRUCTIONS, GATES
    from symfast.schur.rnn.model import CONSTRUCTIONS
    from symfast.schur.subspace import damage_predictors

    limits.schur_sizes(args)  # before anything is planned or allocated
    if args.copy_family:
        from symfast.commands.schur_copy_family import run_copy_family
        return run_copy_family(args, run)
    if args.copy_settings is not None:
        raise UsageError("--copy-settings applies to --copy-family")
    tasks = _list(args.task, TASK_NAMES, "task")
    family = args.family
    if family == "tanh":
        if args.construction == "paper":
            cons_of = {t: list(CONSTRUCTIONS) if t == "copy" else ["orthogonal"] for t in tasks}
        else:
            cons = _list(args.construction, CONSTRUCTIONS, "construction")
            cons_of = {t: cons for t in tasks}
    else:
        allowed = FAMILY_CONSTRUCTIONS[family]
        cons = list(allowed) if args.construction == "paper" else _list(args.construction, allowed,
                                                                          f"{family} construction")
        cons_of = {t: cons for t in tasks}
    copy_kw = {k: v for k, v in (("length", args.copy_length), ("n_symbols", args.copy_symbols),
                                 ("delay", args.copy_delay),
                                 ("cyclic", None if args.copy_replay is None else args.copy_replay == "cyclic"))
               if v is not None}
    if copy_kw and (family != "tanh" or "copy" not in tasks):
        raise UsageError("--copy-length, --copy-symbols, --copy-delay and --copy-replay set the copy task of the "
                         "tanh family: pass --task copy")
    try:
        copy_task = make_task("copy", **copy_kw)
    except ValueError as e:
        raise UsageError(f"bad copy task settings: {e}") from None
    paper_copy = copy_task == make_task("copy")
    if family not in GATES and args.gate != "all":
        raise UsageError(f"--gate applies to --family gru or lstm, not {family}")
    if args.fixed_points < 0:
        raise UsageError(f"--fixed-points must be >= 0, got {args.fixed_points}")
    try:
        if args.hidden == "paper":
            hid_of = {t: list(COPY_WIDTHS) if t == "copy" and family == "tanh" else [TASK_WIDTH] for t in tasks}
        else:
            hs = [int(h) for h in args.hidden.split(",") if h.strip()]
            hid_of = {t: hs for t in tasks}
    except ValueError as e:
        raise UsageError(f"bad --hidden {args.hidden!r}: integers or 'paper'") from e
    if any(h < 1 for v in hid_of.values() for h in v) or not all(hid_of.values()):
        raise UsageError(f"--hidden must be >= 1, got {args.hidden}")
    for name in ("seeds", "batches", "batch", "n_eval"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if (args.epochs or 0) < 0 or args.n_random < 0 or args.n_orders < 0:
        raise UsageError("--epochs, --n-random and --n-orders must be >= 0")
    if not args.near_cut > 0:
        raise UsageError(f"--near-cut must be > 0, got {args.near_cut}")
    grid = _grid(args.alpha_grid)
    if not 0 < args.alpha <= 1:
        raise UsageError(f"--alpha must be in (0, 1], got {args.alpha}")
    if args.clip is not None and not args.clip > 0:
        raise UsageError(f"--clip must be > 0, got {args.clip}")
    epsilon = EPSILON if args.epsilon is None else args.epsilon
    if not epsilon >= 0:
        raise UsageError(f"--epsilon must be >= 0, got {args.epsilon}")
    try:
        sweep = sorted({float(a) for a in args.alphas.split(",") if a.strip()} | {args.alpha})
    except ValueError as e:
        raise UsageError(f"bad --alphas {args.alphas!r}") from e
    if any(not 0 < a <= 1 for a in sweep):
        raise UsageError(f"--alphas must lie in (0, 1], got {sweep}")
    try:
        os.makedirs(os.path.join(args.out, "ckpt"), exist_ok=True)
        remove_stale_temps(os.path.join(args.out, "ckpt"))  # checkpoint writes of killed runs
    except OSError as e:
        raise UsageError(f"cannot create output directory {args.out!r}: {e}") from e
    threads = args.threads or (1 if args.engine == "torch" or family != "tanh" else None)  # None: torch's count
    recipe = args.recipe or "converge"
    if recipe not in RECIPE_NAMES:
        raise UsageError(f"unknown --recipe {recipe!r}; expected one of {', '.join(RECIPE_NAMES)}")
    given = {f: v for f, v in (("epochs", args.epochs), ("batches_per_epoch", args.batches), ("batch", args.batch),
                               ("lr", args.lr), ("clip", args.clip), ("schedule", args.schedule),
                               ("warmup", args.warmup), ("min_lr_ratio", args.min_lr_ratio),
                               ("curriculum", args.curriculum),
                               ("cayley_neg", args.cayley_neg), ("cayley_init", args.cayley_init))
             if v is not None}  # explicit flags win
    if given.get("schedule") == "constant":  # a constant rate has no warmup or floor (unless given: an error)
        given = {"warmup": 0, "min_lr_ratio": 0.0, **given}

    def flags(cn):  # cayley_neg and cayley_init are settings of Cayley models only
        return {f: v for f, v in given.items() if f not in ("cayley_neg", "cayley_init") or cn == "cayley"}
    if args.cayley_init is not None and family != "tanh":
        raise UsageError(f"--cayley-init applies to the tanh family's cayley models, not --family {family}")
    if args.cayley_neg is not None:
        if family != "tanh" or args.cayley_neg < 0:
            raise UsageError(f"--cayley-neg takes an integer >= 0 and applies to the tanh family's cayley models, "
                             f"got {args.cayley_neg} with --family {family}")
        widths = [w for t in tasks if "cayley" in cons_of[t] for w in hid_of[t]]
        if widths and args.cayley_neg > min(widths):
            raise UsageError(f"--cayley-neg {args.cayley_neg} exceeds the narrowest Cayley model's width {min(widths)}")
    try:
        cfg_of = {(t, cn): recipe_config(recipe, t, cn, family, threads=threads, engine=args.engine, **flags(cn))
                  for t in tasks for cn in cons_of[t]}
    except ValueError as e:  # e.g. --epochs shorter than the recipe's curriculum
        raise UsageError(f"--recipe {recipe} with the flags given: {e}") from None
    if family != "tanh":
        from symfast.commands.schur_families import run_family
        return run_family(args, tasks, cons, hid_of, sweep, epsilon, cfg_of, recipe, given)
    print(f"settings: recipe {recipe}, {args.seeds} seeds, eps = {epsilon:g}, alphas {sweep}; the paper's budget: "
          f"{_budget(TrainConfig())}")
    print_deviations(recipe, cfg_of, given, family)
    frames, spectra, facts, projs, schur_T, losses, nears, grids, fps = [], {}, [], [], {}, {}, [], [], []
    if not paper_copy:
        print(f"copy task (a variant, not the paper's): {copy_task.config()}")
    for tname in tasks:
        task = copy_task if tname == "copy" else make_task(tname)
        trained = _train_task(task, [(cn, h) for cn in cons_of[tname] for h in hid_of[tname]], args,
                              {cn: cfg_of[(tname, cn)] for cn in cons_of[tname]}, os.path.join(args.out, "ckpt"))
        for cn in cons_of[tname]:
            for hidden in hid_of[tname]:
                models, losses[f"{tname} / {cn}, H = {hidden}"] = trained[(cn, hidden)]
                for seed, model in enumerate(models):
                    a = analyse_model(model, task, seed, args, sweep, epsilon, grid)
                    df, sb, key = a["ablation"], a["blocks"], a["key"]
                    for col, v in (("converged", key["converged"]), ("seed", seed), ("hidden", hidden),
                                   ("construction", cn), ("task", tname)):
                        df.insert(0, col, v)
                    frames.append(df)
                    key = {"task": tname, "construction": cn, "hidden": hidden, "seed": seed, **key}
                    projs.append(a["subspace"].merge(
                        df[df.alpha == args.alpha][["subset", "dfvu", "rand_dfvu_mean", "rand_pattern_dfvu_mean",
                                                    "task", "construction", "hidden", "seed", "converged"]],
                        on="subset"))
                    facts.append({"task": tname, "construction": cn, "hidden": hidden, "seed": seed,
                                  "fvu": key["fvu"], "replay_acc": key["replay_acc"], "converged": key["converged"],
                                  "N_over_T": float(sb.N.norm() / sb.T.norm()), "n_R": sb.n_R,
                                  "rho": sb.rho, "n_near_cut": int(sb.near_cut.sum())})
                    spectra.setdefault((tname, cn, hidden), []).append((sb.eigvals.numpy(), sb.rho))
                    key = {k: key[k] for k in ("task", "construction", "hidden", "seed", "converged")}
                    nears.append(a["near_cut"].assign(**key))
                    if a["fixed_points"] is not None:
                        fps.append({k: key[k] for k in ("task", "construction", "hidden", "seed")} | a["fixed_points"])
                    facts[-1]["n_near_cut_rel"] = len(a["near_cut"])
                    if grid:
                        grids.append(a["alpha_grid"].assign(**key))
                    schur_T.setdefault(f"{tname} / {cn}, H = {hidden}, seed {seed}", (sb.T.numpy(), sb.n_R))
    raw = pd.concat(frames, ignore_index=True)
    facts = pd.DataFrame(facts)
    proj = pd.concat(projs, ignore_index=True)
    raw["noop"] = (raw["stabiliser"] == "no-op").astype(float)
    raw["order_dependent"] = raw["order_dependent"].astype(float)
    used = raw if args.include_unconverged else raw[raw.converged]
    proj["dfvu_excess"] = proj["dfvu"] - proj["rand_pattern_dfvu_mean"]  # matched size: minus same-pattern random
    proj_used = proj if args.include_unconverged else proj[proj.converged]
    near = pd.concat(nears, ignore_index=True)
    grid_df = pd.concat(grids, ignore_index=True) if grids else pd.DataFrame()
    values = ("fvu", "dfvu", "d_D", "removed_rel_T", "sensitivity", "rand_dfvu_mean", "replay_acc",
              "nonadditivity", "fvu_refit", "dfvu_order_min", "dfvu_order_median", "dfvu_order_max",
              "order_dependent", "replay_order_min", "replay_order_max", "dfvu_inv", "replay_acc_inv",
              "removed_rel_T_inv", "rand_pattern_dfvu_mean", "rand_outside_dfvu_mean", "noop")
    def summarise(rows):
        return summarize(rows, by=("task", "construction", "hidden", "alpha", "subset"), values=values)
    summ = summarise(used)
    atomic_write(os.path.join(args.out, "schur_ablation_raw.csv"), lambda p: raw.to_csv(p, index=False))
    atomic_write(os.path.join(args.out, "schur_ablation_summary.csv"), lambda p: summ.to_csv(p, index=False))
    atomic_write(os.path.join(args.out, "schur_models.csv"), lambda p: facts.to_csv(p, index=False))
    atomic_write(os.path.join(args.out, "schur_subspace.csv"), lambda p: proj.to_csv(p, index=False))
    atomic_write(os.path.join(args.out, "schur_near_cut.csv"), lambda p: near.to_csv(p, index=False))
    if grids:
        atomic_write(os.path.join(args.out, "schur_alpha_grid.csv"), lambda p: grid_df.to_csv(p, index=False))
    if fps:
        atomic_write(os.path.join(args.out, "schur_fixed_points.csv"), lambda p: pd.DataFrame(fps).to_csv(p, index=False))

    pd.set_option("display.width", 220)
    pd.set_option("display.max_columns", 30)
    pd.set_option("display.max_colwidth", 80)
    if fps:
        print_fixed_points(fps, args.fixed_points, args.alpha)
    if used.empty:
        _print_convergence(facts, tasks, args.include_unconverged)
        print("\nno converged model: nothing to tabulate (lengthen training or pass --include-unconverged)")
        return 0
    for (tname, cn, hidden), s in summ[summ.alpha == args.alpha].groupby(["task", "construction", "hidden"],
                                                                         sort=False):
        f = facts[(facts.task == tname) & (facts.construction == cn) & (facts.hidden == hidden) & (
            facts.converged | args.include_unconverged)]
        print(f"\n== {tname} / {cn}: H={hidden}, {len(f)} seeds in the table, alpha={args.alpha}, "
              f"||N||/||T|| = {f.N_over_T.mean():.3g} (max {f.N_over_T.max():.2g}), n_R = {f.n_R.tolist()}, "
              f"eigenvalues within 1% of the cut: {f.n_near_cut.tolist()}")
        cols = {"subset": s["subset"], "FVU": ci_column(s, "fvu"),
                "dFVU raw [95% CI]": ci_column(s, "dfvu"),
                "mass/||T||": s["removed_rel_T_mean"].map("{:.3g}".format),
                "normalised sens.": s["sensitivity_mean"].map("{:.3g}".format),
                "rand dFVU": s["rand_dfvu_mean_mean"].map("{:.3g}".format),
                "d_D": s["d_D_mean"].map("{:.3g}".format)}
        if "replay_acc_mean" in s and tname == "copy":
            cols["replay acc [95% CI]"] = ci_column(s, "replay_acc")
        if "fvu_refit_mean" in s:
            cols["FVU refit"] = s["fvu_refit_mean"].map("{:.3g}".format)
        print(pd.DataFrame(cols).to_string(index=False))
        print(_order_table(s, tname == "copy").to_string(index=False))
        r = used[(used.task == tname) & (used.construction == cn) & (used.hidden == hidden) & used.subset.isin(SINGLE)]
        winners = r.loc[r.groupby(["seed", "alpha"])["dfvu"].idxmax()].copy()
        winners.loc[winners["dfvu"] <= 1e-9, "subset"] = "none"  # no block hurts (e.g. Cayley, empty C sector)
        counts = winners.groupby("alpha")["subset"].value_counts().unstack(fill_value=0)
        print("most damaging single block (count of seeds) per alpha:\n" + counts.to_string())
        if cn == "cayley":
            print(f"Cayley: W orthogonal => normal, ||N||/||T|| <= {f.N_over_T.max():.1e}; "
                  f"max |dFVU| over ablations = {s['dfvu_mean'].abs().max():.1e} (behaviour unchanged)")
    _print_convergence(facts, tasks, args.include_unconverged)
    print(f"\n== eps-stabilisers (d_D <= {epsilon:g}): 'S k/n' = k of n seeds, median d_D; no-op = nothing removed; "
          "single blocks and all three (every subset: schur_ablation_raw.csv, schur_stabilisers.png)")
    print(_stabiliser_table(used).to_string(index=False))
    pred = damage_predictors(proj_used)
    pred_task = damage_predictors(proj_used, by="task")
    print("\n== subspace or coupling: Spearman rho of dFVU with each predictor across task x seed x block "
          "[95% bootstrap]")
    print(pred.to_string(index=False, float_format="{:.3g}".format))
    print(pred_task.to_string(index=False, float_format="{:.3g}".format))
    pred_m = damage_predictors(proj_used, target="dfvu_excess")
    print("matched size: the same with dFVU(block) - dFVU(same-pattern random of equal norm) as the target")
    print(pred_m.to_string(index=False, float_format="{:.3g}".format))
    print(f"\n== eigenvalues within {args.near_cut:g} rho of the cut alpha rho = {args.alpha:g} rho "
          "(per model; each listed in schur_near_cut.csv)")
    cnt = facts.groupby(["task", "construction", "hidden"], sort=False)["n_near_cut_rel"].agg(list)
    print(cnt.to_string())
    if grids:
        g_used = grid_df if args.include_unconverged else grid_df[grid_df.converged]
        if not g_used.empty:
            print(f"\n== stability over the alpha grid {grid[0]:g}..{grid[-1]:g} ({len(grid)} values, "
                  f"{min(64, args.n_eval)} held-out sequences): n_R range and median over seeds of each effect's "
                  "range (max - min over alpha); schur_alpha_grid.csv")
            print(_grid_table(g_used).to_string(index=False))
    cmp = compare_with_paper(summ if paper_copy else summ[summ.task != "copy"], alpha=0.9)
    if not paper_copy:
        print("\n(the copy task is a variant: the paper's copy numbers are not compared)")
    atomic_write(os.path.join(args.out, "schur_paper_comparison.csv"), lambda p: cmp.to_csv(p, index=False))
    print("\n== comparison with the paper (ours: mean [95% CI] over converged seeds)")
    show = cmp.assign(ours=[_fmt_ci(*r) for r in cmp[["ours", "lo", "hi"]].to_numpy()])
    print(show[["table", "setting", "subset", "metric", "paper", "ours", "n", "verdict", "reason"]]
          .to_string(index=False))
    print("verdicts: " + ", ".join(f"{k} {v}" for k, v in cmp["verdict"].value_counts().items()))
    reps = None
    if args.seeds > PAPER_SEEDS and not used.empty and (used.seed >= PAPER_SEEDS).any():
        reps = compare_replicates(used if paper_copy else used[used.task != "copy"], summarise, alpha=0.9)
        atomic_write(os.path.join(args.out, "schur_paper_replicates.csv"), lambda p: reps.to_csv(p, index=False))
        print(f"\n== the same verdicts on the paper's seeds 0..{PAPER_SEEDS - 1} (the recipes were chosen on them) "
              f"and on the held-out seeds {PAPER_SEEDS}..{args.seeds - 1}")
        print(reps[["table", "setting", "subset", "n_paper_seeds", "verdict_paper_seeds", "n_heldout",
                    "verdict_heldout", "verdict_all", "replicated"]].to_string(index=False))
        both = reps[reps.replicated.notna()]
        tested = both.verdict_paper_seeds.isin(["held", "missed"]) | both.verdict_heldout.isin(["held", "missed"])
        print(f"replicated: {int(both[tested].replicated.sum())} of {int(tested.sum())} tested verdicts (held or missed "
              f"in either seed set); {int(both[~tested].replicated.sum())} of {int((~tested).sum())} others (order-"
              "dependent, not comparable, by construction: no test to replicate)")
    png = os.path.join(args.out, "schur_ablation.png")
    used_facts = facts if args.include_unconverged else facts[facts.converged]
    atomic_write(png, lambda p: plots.ablation_figure(used, spectra, args.alpha, used_facts, p))
    atomic_write(os.path.join(args.out, "schur_stabilisers.png"), lambda p: plots.stabilisers(used, p))
    atomic_write(os.path.join(args.out, "schur_subspace.png"), lambda p: plots.predictors(proj_used, pred, p))
    atomic_write(os.path.join(args.out, "schur_T.png"), lambda p: plots.schur_form(schur_T, p))
    atomic_write(os.path.join(args.out, "schur_loss.png"), lambda p: plots.loss_curves(losses, p))
    print(f"\nwrote {os.path.join(args.out, 'schur_ablation_raw.csv')}, schur_ablation_summary.csv, schur_models.csv, "
          f"schur_subspace.csv, schur_paper_comparison.csv, {png}, schur_stabilisers.png, schur_subspace.png, "
          "schur_T.png, schur_loss.png, schur_near_cut.csv" + (", schur_alpha_grid.csv" if grids else "")
          + (", schur_fixed_points.csv" if fps else "")
          + (", schur_paper_replicates.csv" if reps is not None else ""))
    return 0
