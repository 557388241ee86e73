"""The exactness sweep for multi-head attention: is the head permutation recovered as the block becomes exact?

The attention counterpart of `symfast.layerwise.exactness` ("Identifiable Equivariant Networks are
Layerwise Equivariant", Shahverdi, Marchetti, Bökman, Kohn): 4-head blocks (d = 4, k = 2, 8 tokens)
are trained with the penalty lam |f(X rho^T) - f(X) rho^T|^2, rho the swap of features (0, 1) and
(2, 3) of the suite's attention experiment, along a continuation in lam. Tokens are standard Gaussian:
a law that rho maps to itself and that covers every input direction, so the penalty is applied on
covering inputs from the start. Two tasks:

- "teacher": fit a planted rho-equivariant block (`planted_attention`, 2 heads fixed, 2 swapped, one
  teacher per seed). The teacher fixes the true head permutation: a student that learned it up to
  its parameter symmetries has the teacher's permutation conjugated by the student-to-teacher head
  matching (`true_index`), which the recovered one should equal.
- "smoothing": the suite's token-smoothing task Y_i = sum_j softmax_j(-|x_i - x_j|^2) x_j, equivariant
  under every orthogonal map; no block of this size fits it exactly and nothing fixes a true permutation.

Per trained block: end-to-end error on held-out covering inputs, task loss and relative task error,
the recovered action's parameter error (`recover_attention_action`) next to the median parameter error
of random head permutations with their own least-squares gauges, the gauge-free head-matching error
and its random level, and (teacher) whether the recovered permutation is the true one. The verdict per
task is read on held-out seeds with bars fixed before the first sweep ran: the MLP sweep's `SLOPE_BAR`
and `EXACT_RATIO_BAR` (`symfast.layerwise.protocol`) on the parameter error, and for the teacher task
the true permutation in every held-out block at the largest lam; a task whose blocks did not train
(`TRAINED_BAR`) gives no verdict.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from symfast._optional import require
from symfast._progress import Progress, reporter
from symfast.layerwise.attention import Attention, planted_attention, permutation_param_error, recover_attention_action
from symfast.layerwise.protocol import (EXACT_RATIO_BAR, FIT, HELDOUT, LAW_SEED, SLOPE_BAR, SPLITS, check_columns,
                                        check_sweep_settings, claims_markdown, combine_verdicts, fit_slope,
                                        heldout_rows, markdown_table, no_heldout_claim, seed_medians, seed_roles,
                                        seeds_text, slope_and_ratio, slope_cells, slope_fits, stage_steps,
                                        verdict_claim)
from symfast.ops.matching import assign
from symfast.report.claim import Verdict

pd = require("pandas", "the layerwise sweeps (their tables)")

__all__ = ["AttentionExactnessSettings", "AttentionExactnessResult", "attention_exactness_sweep",
           "train_attention_sweep", "measure_attention", "true_head_index", "attention_exactness_claims",
           "attention_summary", "format_attention_exactness", "plot_attention_exactness", "TASKS", "RHO",
           "COLUMNS", "TRAINED_BAR"]

# The suite's symmetry: swap features (0, 1) and (2, 3).
RHO = np.eye(4)[[1, 0, 3, 2]]
TASKS = ("teacher", "smoothing")
# Fixed before the first sweep ran: a task whose held-out blocks keep a median relative task error of
# TRAINED_BAR or more at the largest lam did not train (a zero output scores 1): no verdict.
TRAINED_BAR = 0.5
TEACHER_FIXED = 2  # heads the teacher's action fixes (the other two are swapped), as the suite's trained block
TEACHER_SEED = 10_000  # the teacher of seed s is planted with seed TEACHER_SEED + s

COLUMNS = ["task", "lam", "seed", "split", "end_to_end", "task_loss", "task_error", "head_error", "head_random",
           "head_ratio", "match_error", "match_random", "fixed_heads", "index", "true_index", "perm_true",
           "teacher_error"]


@dataclass(frozen=True)
class AttentionExactnessSettings:
    """What one attention sweep trains.

    Attributes:
        lams: penalty weights (> 0); seeds, heldout_seeds, seed_offset as in `ExactnessSettings`.
        heads: heads per block; d, k, tokens: features (must be 4: rho is the suite's 4-feature swap),
            query/key/value width, tokens per sequence.
        steps: steps for the first lam (steps // 2 for every further one); lr: Adam learning rate
            (cosine-decayed per stage); batch: sequences per step.
        test: held-out sequences per scale (covering inputs at token scales 0.5, 1, 2; the task at 1).
        random_draws: random head permutations for the baselines; bootstrap: resamples of the seeds.
    """

    lams: tuple = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4)
    seeds: int = 5
    heldout_seeds: int = 5
    seed_offset: int = 1000
    heads: int = 4
    d: int = 4
    k: int = 2
    tokens: int = 8
    steps: int = 1000
    lr: float = 1e-2
    batch: int = 64
    test: int = 256
    random_draws: int = 16
    bootstrap: int = 1000

    def __post_init__(self):
        check_sweep_settings(self, "heads", "k", "tokens", "test", "random_draws")
        if self.d != len(RHO):
            raise ValueError(f"d must be {len(RHO)} (rho swaps features (0, 1) and (2, 3)), got {self.d}")
        if self.k > self.d or (self.heads - TEACHER_FIXED) % 2 or self.heads < TEACHER_FIXED:
            raise ValueError(f"need k <= d and heads - {TEACHER_FIXED} even and >= 0 (the teacher's heads: "
                             f"{TEACHER_FIXED} fixed, the rest swapped in pairs), got heads={self.heads}, k={self.k}")
        if not self.lr > 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")


def _forward(X, Wq, Wk, Wv, Wo):
    """Stacked blocks: X [M, B, n, d], W [M, heads, ...] -> [M, B, n, d] (as `attention_forward` per block)."""
    q = torch.einsum("mbnd,mhdk->mbhnk", X, Wq)
    kk = torch.einsum("mbnd,mhdk->mbhnk", X, Wk)
    v = torch.einsum("mbnd,mhdk->mbhnk", X, Wv)
    a = torch.softmax(q @ kk.transpose(-1, -2) / np.sqrt(Wq.shape[-1]), -1)
    return torch.einsum("mbhnk,mhkd->mbnd", a @ v, Wo)


def _smoothing(X):
    return torch.softmax(-torch.cdist(X, X) ** 2, -1) @ X


def teacher(seed: int, s: AttentionExactnessSettings):
    """The planted rho-equivariant block of `seed` and its head permutation."""
    return planted_attention(s.d, s.heads, s.k, RHO, seed=TEACHER_SEED + int(seed), n_fixed=TEACHER_FIXED)


def _target(task: str, seeds, s: AttentionExactnessSettings):
    """X [M, B, n, d] -> Y: the task's target per stacked block."""
    if task == "smoothing":
        return _smoothing
    if task != "teacher":
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    T = [torch.stack([getattr(teacher(sd, s)[0], w).float() for sd in seeds]) for w in ("Wq", "Wk", "Wv", "Wo")]
    return lambda X: _forward(X, *T)


def train_attention_sweep(task: str, lams, seeds, s: AttentionExactnessSettings, num_threads: int | None = 1) -> dict:
    """Train one block per seed along the penalty path lams (ascending), stacked, as a continuation.

    Loss per block: mean |f(X) - Y|^2 + lam * mean |f(X rho^T) - f(X) rho^T|^2 over a batch of Gaussian
    sequences. The first lam trains `steps` steps from the seed's initialisation, every next one
    `steps // 2` more from the previous weights, each stage with a fresh Adam and a cosine-decayed
    learning rate (as `symfast.layerwise.penalty_training.train_sweep`). Adam is elementwise: the
    stacked blocks train exactly as they would alone; a block's init and batches depend on its seed only.

    Returns:
        {(lam, seed): Attention} (float64 copies of the trained weights).
    """
    old = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        return _train_path(task, lams, seeds, s)
    finally:
        torch.set_num_threads(old)


def _train_path(task, lams, seeds, s):
    lams = sorted(float(w) for w in lams)
    seeds = [int(sd) for sd in seeds]
    target = _target(task, seeds, s)
    gens = [torch.Generator().manual_seed(sd) for sd in seeds]
    shapes = ((s.heads, s.d, s.k), (s.heads, s.d, s.k), (s.heads, s.d, s.k), (s.heads, s.k, s.d))
    params = [torch.stack([torch.randn(*sh, generator=g) / np.sqrt(sh[-2]) for g in gens]).requires_grad_()
              for sh in shapes]
    R = torch.as_tensor(RHO, dtype=torch.float32)
    out_nets = {}
    for i, lam in enumerate(lams):
        steps = stage_steps(s.steps, i)
        opt = torch.optim.Adam(params, lr=s.lr)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, steps)
        for _ in range(steps):
            X = torch.stack([torch.randn(s.batch, s.tokens, s.d, generator=g) for g in gens])
            with torch.no_grad():
                Y = target(X)
            out = _forward(X, *params)
            task_loss = (out - Y).pow(2).sum(-1).mean((1, 2))
            eq = (_forward(X @ R.T, *params) - out @ R.T).pow(2).sum(-1).mean((1, 2))
            loss = (task_loss + lam * eq).sum()  # per block: its own loss, the blocks are independent
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
        for m, sd in enumerate(seeds):
            out_nets[(lam, sd)] = Attention(*(p[m].detach() for p in params))
    return out_nets


def true_head_index(att: Attention, teacher_att: Attention, teacher_index) -> tuple:
    """The head permutation `att` carries if it is `teacher_att` up to head order and gauges.

    Student heads are matched to teacher heads (sigma) by one assignment on the gauge-free forms
    M = Wq Wk^T and N = Wv Wo; the teacher's permutation conjugated by sigma is the student's:
    true[h] = sigma^-1(teacher_index[sigma(h)]).

    Returns:
        (true_index, teacher_error): the relative distance of the matched forms, sqrt(sum of
        |M_h - M'_sigma(h)|^2 / |M'|^2 + the same for N); near 0 when the student learned the teacher.
    """
    if att.heads != teacher_att.heads or att.Wq.shape[1] != teacher_att.Wq.shape[1]:
        raise ValueError("student and teacher need the same number of heads and features")
    H = att.heads
    costs = 0
    for a, b in ((att.M(), teacher_att.M()), (att.N(), teacher_att.N())):
        costs = costs + torch.cdist(a.reshape(H, -1), b.reshape(H, -1)) ** 2 / max(float(b.pow(2).sum()), 1e-300)
    sigma = assign(costs[None].numpy())[0]
    inv = np.argsort(sigma)
    true = inv[np.asarray(teacher_index)[sigma]]
    return true, float(costs[np.arange(H), sigma].sum()) ** 0.5


def _covering(s: AttentionExactnessSettings, seed: int = LAW_SEED):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(3, s.test, s.tokens, s.d, generator=g, dtype=torch.float64)
    return (X * torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64)[:, None, None, None]).reshape(-1, s.tokens, s.d), X[1]


def measure_attention(att: Attention, X_cover, X_task, Y_task, s: AttentionExactnessSettings, truth=None,
                      seed: int = 0) -> dict:
    """One trained block read against rho: a table row (without task, lam, seed, split).

    Args:
        att: the block; X_cover: [N, n, d] held-out covering inputs (end-to-end error); X_task, Y_task:
            held-out task inputs and targets; truth: (teacher Attention, its index) or None.
    """
    R = torch.as_tensor(RHO)
    out = att(X_cover)
    e2e = float((att(X_cover @ R.T) - out @ R.T).norm() / out.norm())
    pred = att(X_task)
    act = recover_attention_action(att, RHO, random_draws=s.random_draws, seed=seed)
    rng = np.random.default_rng(seed)
    # the median: a random permutation can need a nearly singular gauge, whose inverse makes its residual huge
    rand = float(np.median([permutation_param_error(att, RHO, rng.permutation(att.heads))
                            for _ in range(s.random_draws)]))
    row = {"end_to_end": e2e, "task_loss": float((pred - Y_task).pow(2).sum(-1).mean()),
           "task_error": float((pred - Y_task).norm() / Y_task.norm()), "head_error": act.param_error,
           "head_random": rand, "head_ratio": act.param_error / rand,
           "match_error": float(np.hypot(act.qk_error, act.ov_error)), "match_random": act.baseline,
           "fixed_heads": act.counts()["fixed"], "index": " ".join(map(str, act.index.tolist())),
           "true_index": "", "perm_true": np.nan, "teacher_error": np.nan}
    if truth is not None:
        true, err = true_head_index(att, *truth)
        row.update(true_index=" ".join(map(str, true.tolist())), perm_true=float(np.array_equal(true, act.index)),
                   teacher_error=err)
    return row


def attention_exactness_claims(table: pd.DataFrame, bootstrap: int = 1000) -> list:
    """One verdict row per task, read on the held-out seeds only.

    Held when (as the MLP sweep) the log-log slope of the head parameter error against the end-to-end
    error has its 95 % interval above `SLOPE_BAR`, the mean head error / random interval at the largest
    lam lies below `EXACT_RATIO_BAR`, and, where a true permutation exists (teacher), every held-out
    block at the largest lam carries it; missed when any of these lies on the wrong side; not
    comparable when the blocks did not train (median task error >= `TRAINED_BAR` at the largest lam),
    with too few seeds, overlapping intervals, or less than `MIN_DECADES` decades of end-to-end error.
    """
    check_columns(table, ("task", "lam", "seed", "split", "end_to_end", "task_error", "head_error", "head_ratio",
                          "perm_true"), "the attention exactness table")
    claims = []
    for task, t in heldout_rows(table, "task"):
        claim = f"Attention: head permutation recovered as end-to-end error -> 0 ({task} task)"
        has_truth = t["perm_true"].notna().any()
        expected = (f"log-log slope of head parameter error vs end-to-end error > {SLOPE_BAR:g} and head error / "
                    f"random < {EXACT_RATIO_BAR:g} at the largest penalty weight (held-out seeds, 95 % intervals)"
                    + ("; the true head permutation in every held-out block there" if has_truth else ""))
        if t.empty:
            claims.append(no_heldout_claim(claim, expected))
            continue
        r = slope_and_ratio(t, "head_error", "head_ratio", bootstrap)
        top = r["top"]
        parts = [r["v_slope"], r["v_ratio"]]
        found = ""
        if has_truth:
            k, n = int(top["perm_true"].sum()), len(top)
            found = f"; true permutation in {k} of {n}"
            parts.append(Verdict("held", f"true permutation in all {n}") if k == n else
                         Verdict("missed", f"true permutation in only {k} of {n} held-out blocks"))
        task_err = float(top["task_error"].median())
        v = combine_verdicts(parts, r["decades"])
        if task_err >= TRAINED_BAR:
            v = Verdict("not comparable", "not converged")
        measured = (f"slope {r['slope']:.2f} [{r['lo']:.2f}, {r['hi']:.2f}]; ratio {r['ratio']:.2f} "
                    f"[{r['ratio_lo']:.2f}, {r['ratio_hi']:.2f}] at lam {top['lam'].iloc[0]:g}{found}; task error "
                    f"{task_err:.3f}; end-to-end {t['end_to_end'].min():.1e}..{t['end_to_end'].max():.1e} "
                    f"({r['decades']:.1f} decades); seeds {r['seeds'][0]}..{r['seeds'][-1]} (n = {r['n']})")
        note = ("the teacher is a planted equivariant block: its permutation, carried over by the head matching, is "
                "the truth" if has_truth else "the smoothing task fixes no true head permutation")
        if task_err >= TRAINED_BAR:
            note = f"median task error {task_err:.2f} >= {TRAINED_BAR:g} at the largest lam: the blocks did not train; {note}"
        claims.append(verdict_claim(claim, expected, measured, v, note))
    return claims


@dataclass
class AttentionExactnessResult:
    """table: one row per trained block (`COLUMNS`); fits: per task the slope on fit and held-out seeds;
    claims: `attention_exactness_claims` (held-out seeds); settings."""

    table: pd.DataFrame
    fits: pd.DataFrame
    claims: list
    settings: AttentionExactnessSettings


def attention_exactness_sweep(tasks=TASKS, settings: AttentionExactnessSettings | None = None,
                              progress: Progress = False, num_threads: int | None = 1) -> AttentionExactnessResult:
    """Train rho-equivariant attention blocks along the penalty path per task and read each one.

    `num_threads`: torch threads for the whole sweep (1 by default: the tensors are tiny, extra threads
    only contend on a shared machine; None keeps the current setting).
    """
    old = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        return _sweep(tasks, settings or AttentionExactnessSettings(), progress)
    finally:
        torch.set_num_threads(old)


def _sweep(tasks, s: AttentionExactnessSettings, progress) -> AttentionExactnessResult:
    for task in tasks:
        if task not in TASKS:
            raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    split = seed_roles(s.seeds, s.heldout_seeds, s.seed_offset)
    X_cover, X_task = _covering(s)
    rows = []
    for task in tasks:
        reporter(progress, "symfast.layerwise")(f"attention exactness: {task}, {len(s.lams)} penalty weights x "
                                                f"{len(split)} seeds")
        nets = train_attention_sweep(task, s.lams, list(split), s, num_threads=None)
        truths = {sd: teacher(sd, s) for sd in split} if task == "teacher" else {}
        for (lam, sd), att in nets.items():
            Y = truths[sd][0](X_task) if task == "teacher" else _smoothing(X_task)
            rows.append({"task": task, "lam": lam, "seed": sd, "split": split[sd],
                         **measure_attention(att, X_cover, X_task, Y, s, truths.get(sd), seed=sd)})
    table = pd.DataFrame(rows)[COLUMNS]
    fits = [{"task": task, **slope_fits(table[table["task"] == task], "end_to_end", "head_error", s.bootstrap)}
            for task in tasks]
    return AttentionExactnessResult(table, pd.DataFrame(fits), attention_exactness_claims(table, s.bootstrap), s)


def attention_summary(table: pd.DataFrame, split: str = FIT) -> pd.DataFrame:
    """Medians per (task, lam) over one split's seeds; perm_true as the fraction of blocks with the true one."""
    t = table[table["split"] == split]
    cols = ["end_to_end", "task_loss", "task_error", "head_error", "head_random", "head_ratio", "match_error",
            "match_random", "fixed_heads", "teacher_error"]
    out = seed_medians(t, ["task", "lam"], cols)
    out["perm_true"] = t.groupby(["task", "lam"], sort=False)["perm_true"].mean().values
    return out


def format_attention_exactness(res: AttentionExactnessResult) -> str:
    """Markdown: medians (fit and held-out seeds), slopes, verdict rows."""
    s = res.settings
    head = (f"Attention {s.heads} heads, d = {s.d}, k = {s.k}, {s.tokens} Gaussian tokens, rho = swap of features "
            f"(0, 1), (2, 3); penalty weights {list(s.lams)}; {s.steps} steps for the first weight, "
            f"{stage_steps(s.steps, 1)} per further weight (continuation), Adam lr {s.lr:g}, batch {s.batch}; "
            f"{seeds_text(s.seeds, s.heldout_seeds, s.seed_offset)}.")
    fmt = lambda c: (lambda v: f"{v:.2e}") if c in ("end_to_end", "task_loss") else (lambda v: f"{v:.3g}")  # noqa: E731
    lines = [head]
    for split, name in ((FIT, "fit"), (HELDOUT, "held-out")):
        summ = attention_summary(res.table, split)
        lines += ["", f"### Medians over the {name} seeds (perm_true: fraction of blocks with the true permutation)",
                  "", markdown_table(summ, {c: fmt(c) for c in summ.columns})]
    slopes = pd.DataFrame([{"task": f["task"], **slope_cells(f)} for _, f in res.fits.iterrows()])
    lines += ["", "### Slopes of log(head parameter error) vs log(end-to-end error), 95 % bootstrap intervals over "
              "seeds", "", markdown_table(slopes),
              "", f"### Verdicts (held-out seeds; bars fixed before any run: slope > {SLOPE_BAR:g}, ratio < "
              f"{EXACT_RATIO_BAR:g}, true permutation in every block, task error < {TRAINED_BAR:g})", "",
              claims_markdown(res.claims)]
    return "\n".join(lines)


def plot_attention_exactness(table: pd.DataFrame, path=None):
    """Log-log per task against the end-to-end error: the head parameter error (blue; red where the
    recovered permutation is not the true one), the gauge-free head-matching error (orange) and the
    random-permutation parameter error (grey); fit seeds filled, held-out seeds open.

    Returns:
        the figure (the matplotlib backend is left as it is).
    """
    plt = require("matplotlib.pyplot", "plotting")

    from symfast.plotting import FONT, SMALL, finish, legend_outside

    tasks = list(dict.fromkeys(table["task"]))
    if not tasks:
        raise ValueError("the attention exactness table is empty")
    fig, axes = plt.subplots(1, len(tasks), figsize=(4.4 * len(tasks), 3.8), layout="constrained", squeeze=False)
    for ax, task in zip(axes[0], tasks):
        t = table[table["task"] == task]
        for part in SPLITS:
            p = t[t["split"] == part]
            wrong = p["perm_true"] == 0
            lab = "" if part == FIT else " (held-out)"
            for mask, color, name in ((~wrong, "C0", "head parameter error"),
                                      (wrong, "C3", "head parameter error, wrong permutation")):
                if mask.any():
                    ax.scatter(p.loc[mask, "end_to_end"], p.loc[mask, "head_error"], s=14,
                               c=color if part == FIT else "none", edgecolors=color, label=name + lab)
            ax.scatter(p["end_to_end"], p["match_error"], s=12, marker="^", c="C1" if part == FIT else "none",
                       edgecolors="C1", label="head matching error (Wq Wk^T, Wv Wo)" + lab)
            ax.scatter(p["end_to_end"], p["head_random"], s=10, marker="x", c="0.5",
                       label="parameter error, random head permutations" if part == FIT else None)
        f = t[t["split"] == FIT]
        if f["end_to_end"].nunique() >= 2:
            k = fit_slope(f["end_to_end"], f["head_error"], f["seed"], bootstrap=1)[0]
            lx = np.log(f["end_to_end"])
            xs = np.exp(np.linspace(lx.min(), lx.max(), 2))
            ax.plot(xs, np.exp(np.log(f["head_error"]).mean() + k * (np.log(xs) - lx.mean())), color="C0", lw=1,
                    label="parameter error fit (fit seeds)")
            ax.text(0.03, 0.03, f"slope {k:.2f}", transform=ax.transAxes, fontsize=SMALL)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"attention, {task} task", fontsize=FONT)
        ax.set_xlabel("end-to-end error (held-out Gaussian tokens)", fontsize=SMALL)
        ax.tick_params(which="both", labelsize=SMALL)
    axes[0][0].set_ylabel("error of the recovered head action (relative)", fontsize=SMALL)
    handles = {}
    for ax in axes[0]:  # one legend for all panels: a label drawn only in one panel still shows
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    legend_outside(axes[0][-1], where="right", handles=list(handles.values()), labels=list(handles))
    return finish(fig, path)
