"""What one Schur study trains and analyses: `SchurSettings`.

The fields are the settings of `symfast schur`, parsed, with the command line's defaults; the
methods resolve what depends on the family, the task or the paper ("Task-Restricted Symmetries in
Recurrent Weight Space", arXiv 2606.18457): the constructions and widths per task, the copy task,
the alpha sweep and the training configuration of every (task, construction).
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from symfast.schur.ablation import ALPHAS, EPSILON
from symfast.schur.paper import COPY_WIDTHS, PAPER_SEEDS, TASK_WIDTH

__all__ = ["SchurSettings", "DEFAULT_ALPHA_GRID", "BUDGET_FLAGS", "copy_family_settings",
           "COPY_FAMILY_CONSTRUCTION", "COPY_FAMILY_HIDDEN"]

# The fine alpha grid of the stability table: 0.85 to 0.95 in steps of 0.01, rounded as the command
# line rounds a start:stop:step grid.
DEFAULT_ALPHA_GRID = tuple(round(0.85 + 0.01 * i, 10) for i in range(11))
# The training settings a field of its own can override (field name -> TrainConfig field), in the
# order the deviations from the paper's budget are listed.
BUDGET_FLAGS = {"epochs": "epochs", "batches": "batches_per_epoch", "batch": "batch", "lr": "lr", "clip": "clip",
                "schedule": "schedule", "warmup": "warmup", "min_lr_ratio": "min_lr_ratio",
                "curriculum": "curriculum", "cayley_neg": "cayley_neg", "cayley_init": "cayley_init"}
# The copy family's model: orthogonal init at H = 64 (the paper's copy widths are 56 / 64 / 72).
COPY_FAMILY_CONSTRUCTION, COPY_FAMILY_HIDDEN = "orthogonal", 64
# The training settings a copy setting's longer budget sets (when not given explicitly).
_LONG_BUDGET_FIELDS = ("epochs", "lr", "clip", "schedule", "warmup", "min_lr_ratio", "curriculum")


@dataclass(frozen=True)
class SchurSettings:
    """Every setting of one Schur study (`schur_study`), with the defaults of `symfast schur`.

    Attributes:
        family: "tanh" (the paper's tanh RNN), "ssm", "gru" or "lstm".
        tasks: task names ("flipflop", "sine", "context", "copy").
        gates: gru / lstm: the gates whose recurrent slice is ablated; None: all of the family's.
        constructions: the recurrent constructions; None: the paper's (tanh: all four on copy,
            orthogonal on the other tasks; other families: all of the family's).
        hidden: hidden widths H; None: the paper's (tanh copy: 56, 64, 72; otherwise 64).
        seeds: seeds 0..seeds-1 per setting.
        copy_length: the tanh family's copy task (None: the paper's): its length, and likewise
            copy_symbols, copy_delay and copy_replay ("cyclic" or "once").
        recipe: the training recipe (`symfast.schur.recipes`).
        epochs: explicit training settings that replace the recipe's (None: the recipe's): epochs,
            and likewise batches, batch, lr, clip, schedule, warmup, min_lr_ratio, curriculum,
            cayley_neg and cayley_init (the last two apply to Cayley models only).
        epsilon: tolerance on the rollout distance d_D for eps-stabilisers.
        include_unconverged: keep models below their convergence target in the tables.
        alpha: the sector cut of the main tables.
        alphas: the ablation sweep (alpha is always in it).
        n_random: equal-norm random draws per ablation and control.
        n_orders: random within-sector orders.
        alpha_grid: the fine alpha grid of the stability table (tanh family; () for none).
        near_cut: relative distance to alpha * rho within which eigenvalues are listed (tanh family).
        n_eval: held-out sequences.
        fixed_points: fixed and slow points searched from this many visited states per model (0: none).
        refit: also report the ridge-refit readout variant.
        threads: training threads (None: torch's count for the fused tanh engine, 1 otherwise).
        engine: "fused" or "torch".
    """

    family: str = "tanh"
    tasks: tuple = ("flipflop",)
    gates: tuple | None = None
    constructions: tuple | None = None
    hidden: tuple | None = None
    seeds: int = PAPER_SEEDS
    copy_length: int | None = None
    copy_symbols: int | None = None
    copy_delay: int | None = None
    copy_replay: str | None = None
    recipe: str = "converge"
    epochs: int | None = None
    batches: int | None = None
    batch: int | None = None
    lr: float | None = None
    clip: float | None = None
    schedule: str | None = None
    warmup: int | None = None
    min_lr_ratio: float | None = None
    curriculum: int | None = None
    cayley_neg: int | None = None
    cayley_init: str | None = None
    epsilon: float = EPSILON
    include_unconverged: bool = False
    alpha: float = 0.9
    alphas: tuple = ALPHAS
    n_random: int = 4
    n_orders: int = 8
    alpha_grid: tuple = DEFAULT_ALPHA_GRID
    near_cut: float = 0.02
    n_eval: int = 256
    fixed_points: int = 0
    refit: bool = False
    threads: int | None = None
    engine: str = "fused"

    def __post_init__(self):
        """Refuse settings no study can run (the command line refuses each with its flag's name first)."""
        from symfast.schur.families import FAMILIES, FAMILY_CONSTRUCTIONS, GATES
        from symfast.schur.rnn import TASKS

        def known(what, items, allowed):
            if not items or any(v not in allowed for v in items):
                raise ValueError(f"{what} must be a non-empty choice of {', '.join(allowed)}, got {items!r}")
        if self.family not in FAMILIES:
            raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        known("tasks", self.tasks, tuple(TASKS))
        if self.constructions is not None:
            known(f"{self.family} constructions", self.constructions, FAMILY_CONSTRUCTIONS[self.family])
        if self.gates is not None:
            known(f"{self.family} gates", self.gates, GATES.get(self.family, ()))
        at_least = {"seeds": 1, "n_eval": 1, "n_random": 0, "n_orders": 0, "fixed_points": 0, "epochs": 0,
                    "batches": 1, "batch": 1}
        for name, low in at_least.items():
            v = getattr(self, name)
            if v is not None and v < low:
                raise ValueError(f"{name} must be >= {low}, got {v}")
        if self.hidden is not None and (not self.hidden or min(self.hidden) < 1):
            raise ValueError(f"hidden widths must be >= 1, got {self.hidden!r}")
        if any(not 0 < a <= 1 for a in self.sweep) or any(not 0 < a <= 1 for a in self.alpha_grid):
            raise ValueError(f"alpha, alphas and alpha_grid must lie in (0, 1], got {self.alpha}, {self.alphas}, "
                             f"{self.alpha_grid}")
        if not (self.epsilon >= 0 and self.near_cut > 0 and (self.clip is None or self.clip > 0)):
            raise ValueError(f"need epsilon >= 0, near_cut > 0 and clip > 0 (or None), got {self.epsilon}, "
                             f"{self.near_cut}, {self.clip}")
        if self.engine not in ("fused", "torch") or self.copy_replay not in (None, "cyclic", "once"):
            raise ValueError(f"engine must be fused or torch and copy_replay cyclic, once or None, got "
                             f"{self.engine!r}, {self.copy_replay!r}")

    @property
    def sweep(self) -> list[float]:
        """The alphas of the ablation table, sorted: `alphas` and `alpha`."""
        return sorted({float(a) for a in self.alphas} | {self.alpha})

    def constructions_of(self) -> dict:
        """{task: [construction]} the study trains."""
        from symfast.schur.families import FAMILY_CONSTRUCTIONS
        from symfast.schur.rnn.model import CONSTRUCTIONS

        if self.constructions is not None:
            return {t: list(self.constructions) for t in self.tasks}
        if self.family == "tanh":
            return {t: list(CONSTRUCTIONS) if t == "copy" else ["orthogonal"] for t in self.tasks}
        return {t: list(FAMILY_CONSTRUCTIONS[self.family]) for t in self.tasks}

    def widths_of(self) -> dict:
        """{task: [hidden width]} the study trains."""
        if self.hidden is not None:
            return {t: list(self.hidden) for t in self.tasks}
        return {t: list(COPY_WIDTHS) if t == "copy" and self.family == "tanh" else [TASK_WIDTH] for t in self.tasks}

    def copy_task_kwargs(self) -> dict:
        """The copy task's settings given (make_task keywords); {} for the paper's copy task."""
        cyclic = None if self.copy_replay is None else self.copy_replay == "cyclic"
        return {k: v for k, v in (("length", self.copy_length), ("n_symbols", self.copy_symbols),
                                  ("delay", self.copy_delay), ("cyclic", cyclic)) if v is not None}

    def copy_task(self):
        """The copy task the study trains on (raises ValueError for settings the task refuses)."""
        from symfast.schur.rnn import make_task
        return make_task("copy", **self.copy_task_kwargs())

    def is_paper_copy(self) -> bool:
        """Whether the copy task is the paper's (only then are the paper's copy numbers compared)."""
        from symfast.schur.rnn import make_task
        return self.copy_task() == make_task("copy")

    def analysed_gates(self) -> list:
        """The gates ablated per model, the family's default gate first; [None] for the tanh RNN and the SSM
        (their one recurrent matrix)."""
        from symfast.schur.families import DEFAULT_GATE, GATES

        if self.family not in GATES:
            return [None]
        gates = list(GATES[self.family] if self.gates is None else self.gates)
        gates.sort(key=lambda g: g != DEFAULT_GATE[self.family])  # the default (candidate / cell input) first
        return gates

    def budget_overrides(self) -> dict:
        """{TrainConfig field: value} of the training settings given explicitly (they win over the recipe).

        A constant learning rate has no warmup or floor: those two are set to 0 unless given."""
        given = {f: getattr(self, a) for a, f in BUDGET_FLAGS.items() if getattr(self, a) is not None}
        if given.get("schedule") == "constant":
            given = {"warmup": 0, "min_lr_ratio": 0.0, **given}
        return given

    def training_threads(self) -> int | None:
        """Training threads: `threads`, else torch's count (None) for the fused tanh engine, else 1."""
        return self.threads or (1 if self.engine == "torch" or self.family != "tanh" else None)

    def train_configs(self) -> dict:
        """{(task, construction): TrainConfig} of the recipe with the explicit settings applied.

        Raises:
            ValueError: a setting the recipe's config refuses (e.g. fewer epochs than its curriculum).
        """
        from symfast.schur.recipes import recipe_config

        given = self.budget_overrides()
        cons_of = self.constructions_of()

        def flags(cn):  # cayley_neg and cayley_init are settings of Cayley models only
            return {f: v for f, v in given.items() if f not in ("cayley_neg", "cayley_init") or cn == "cayley"}
        return {(t, cn): recipe_config(self.recipe, t, cn, self.family, threads=self.training_threads(),
                                       engine=self.engine, **flags(cn))
                for t in self.tasks for cn in cons_of[t]}


def copy_family_settings(base: SchurSettings, copy_setting) -> SchurSettings:
    """The settings of one member of the copy task's family (`symfast.schur.copy_family.FAMILY`).

    The copy task of `copy_setting` on the tanh family; the paper's constructions and widths become
    orthogonal init at H = 64; a setting with a longer budget trains under the `converge` recipe of
    dense-init copy for every training setting not given explicitly in `base`.
    """
    from symfast.schur.recipes import recipe_config

    sub = replace(base, tasks=("copy",), copy_length=copy_setting.length, copy_symbols=copy_setting.n_symbols,
                  copy_delay=copy_setting.delay, copy_replay="cyclic" if copy_setting.cyclic else "once",
                  constructions=base.constructions or (COPY_FAMILY_CONSTRUCTION,),
                  hidden=base.hidden or (COPY_FAMILY_HIDDEN,))
    if copy_setting.long_budget:  # settings given explicitly win, as in any run
        long_cfg = recipe_config("converge", "copy", "dense")
        sub = replace(sub, **{f: getattr(long_cfg, f) for f in _LONG_BUDGET_FIELDS if getattr(sub, f) is None})
    return sub
