"""The flags of `symfast schur` and the study settings they give (`symfast.schur.study.SchurSettings`)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from symfast.commands import UsageError, limits
from symfast.commands.schur_common import parse_list as _list

if TYPE_CHECKING:
    from symfast.schur.study import SchurSettings

__all__ = ["TASK_NAMES", "add_arguments", "parse_settings"]

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


def parse_settings(args) -> SchurSettings:
    """The study's settings of the parsed flags; a bad flag or combination is a UsageError naming it.

    Checks only what the flags say; the checks that need the output folder or the recipe's training
    configurations are `prepare_run`'s."""
    from symfast.schur.ablation import EPSILON
    from symfast.schur.families import FAMILY_CONSTRUCTIONS, GATES
    from symfast.schur.rnn.model import CONSTRUCTIONS
    from symfast.schur.study import SchurSettings

    tasks = _list(args.task, TASK_NAMES, "task")
    family = args.family
    allowed = CONSTRUCTIONS if family == "tanh" else FAMILY_CONSTRUCTIONS[family]
    cons = None if args.construction == "paper" else _list(
        args.construction, allowed, "construction" if family == "tanh" else f"{family} construction")
    if family not in GATES and args.gate != "all":
        raise UsageError(f"--gate applies to --family gru or lstm, not {family}")
    if args.fixed_points < 0:
        raise UsageError(f"--fixed-points must be >= 0, got {args.fixed_points}")
    try:
        hidden = None if args.hidden == "paper" else tuple(int(h) for h in args.hidden.split(",") if h.strip())
    except ValueError as e:
        raise UsageError(f"bad --hidden {args.hidden!r}: integers or 'paper'") from e
    if hidden is not None and (not hidden or any(h < 1 for h in hidden)):
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
    if args.epsilon is not None and not args.epsilon >= 0:
        raise UsageError(f"--epsilon must be >= 0, got {args.epsilon}")
    try:
        alphas = tuple(float(a) for a in args.alphas.split(",") if a.strip())
    except ValueError as e:
        raise UsageError(f"bad --alphas {args.alphas!r}") from e
    sweep = sorted(set(alphas) | {args.alpha})
    if any(not 0 < a <= 1 for a in sweep):
        raise UsageError(f"--alphas must lie in (0, 1], got {sweep}")
    gates = tuple(_list(args.gate, GATES[family], f"{family} gate")) if family in GATES else None
    flags = {f: getattr(args, f) for f in ("seeds", "copy_length", "copy_symbols", "copy_delay", "copy_replay",
                                           "epochs", "batches", "batch", "lr", "clip", "schedule", "warmup",
                                           "min_lr_ratio", "curriculum", "cayley_neg", "cayley_init",
                                           "include_unconverged", "alpha", "n_random", "n_orders", "near_cut",
                                           "n_eval", "fixed_points", "refit", "threads", "engine")}
    try:  # every flag is checked above; the settings' own checks are a safety net
        settings = SchurSettings(family=family, tasks=tuple(tasks), gates=gates, constructions=None if cons is None
                                 else tuple(cons), hidden=hidden, recipe=args.recipe or "converge",
                                 epsilon=EPSILON if args.epsilon is None else args.epsilon,
                                 alphas=alphas, alpha_grid=tuple(grid), **flags)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if settings.copy_task_kwargs() and (family != "tanh" or "copy" not in tasks):
        raise UsageError("--copy-length, --copy-symbols, --copy-delay and --copy-replay set the copy task of the "
                         "tanh family: pass --task copy")
    try:
        settings.copy_task()
    except ValueError as e:
        raise UsageError(f"bad copy task settings: {e}") from None
    return settings
