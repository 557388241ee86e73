"""Training models of different settings in one fused call, against one call per setting,
interleaved in one process: A B A B, wall and CPU time (user + system) of each.

    PYTHONPATH=. python benchmarks/mixed_training.py grid [batches per epoch, default 16] [pairs, default 3]
    PYTHONPATH=. python benchmarks/mixed_training.py padding

grid: the paper's copy grid under the `converge` recipe (36 models: H = 56, 64, 72 x dense, orthogonal,
normal, Cayley x 3 seeds; three settings) for one epoch of each of the recipe's three phases: the
curriculum (dense, normal and Cayley at the curriculum's middle length, T = 73, beside orthogonal at
T = 137), all 36 at T = 137, and the 27 models that train past the orthogonal models' 30 epochs.
"per setting" is what `symfast schur` did before: one `train_many` call per distinct setting.
padding: the kernel alone on the curriculum
phase's shapes (27 models at T = 73 beside 9 at T = 137, H = 72, batch 64): two calls against one
call with the short sequences padded at the tail with mask 0, after checking that the padded call's
losses and gradients are bit-identical.
Training runs on 2 threads (the kernel; `threads=2`), the padding comparison on 2 torch threads.
"""
import os
import resource
import sys
import time

import torch

from symfast.schur.recipes import recipe_config
from symfast.schur.rnn import Copy, train_many

COPY_WIDTHS = (56, 64, 72)
CONSTRUCTIONS = ("dense", "orthogonal", "normal", "cayley")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _timed(fn) -> tuple[float, float]:
    w, c = time.perf_counter(), _cpu()
    fn()
    return time.perf_counter() - w, _cpu() - c


def _per_setting(models):
    """One train_many call per distinct setting, as before."""
    for key in dict.fromkeys(repr(m[3]) for m in models):
        _one_call([m for m in models if repr(m[3]) == key])


def _one_call(models):
    """models: (seed, width, construction, TrainConfig) tuples of the copy task."""
    train_many(Copy(), *([m[i] for m in models] for i in range(4)))


def _interleave(phases, pairs: int) -> None:
    print(f"load average {os.getloadavg()}")
    for name, models, steps in phases:
        _one_call(models[:2])  # warm-up: the kernel's buffers, lazy imports
        for p in range(pairs):
            for mode, fn in (("per setting", _per_setting), ("one call", _one_call)):
                w, c = _timed(lambda: fn(models))
                print(f"{name} | {mode} | {w:.2f} s wall | {c:.2f} s CPU | {1e3 * w / steps:.0f} ms wall per step | "
                      f"load {os.getloadavg()[0]:.2f}", flush=True)


def grid(bpe: int = 16, pairs: int = 3) -> None:
    def cfg(cn, curriculum):
        base = recipe_config("converge", "copy", cn)
        return recipe_config("converge", "copy", cn, epochs=1, batches_per_epoch=bpe, threads=2,
                             curriculum=1 if curriculum and base.curriculum else 0)
    cells = [(cn, h, s) for cn in CONSTRUCTIONS for h in COPY_WIDTHS for s in range(3)]
    phase = {curr: [(s, h, cn, cfg(cn, curr)) for cn, h, s in cells] for curr in (True, False)}
    _interleave([("curriculum: 27 models at T = 73 + 9 at T = 137", phase[True], bpe),
                 ("all 36 at T = 137", phase[False], bpe),
                 ("27 at T = 137 (no orthogonal)", [m for m in phase[False] if m[2] != "orthogonal"], bpe)], pairs)


def padding() -> None:
    from symfast.ops.rnn_train import rnn_train_step
    torch.set_num_threads(2)
    full = Copy()
    short = full.shortened(0.5)  # the curriculum's middle length, T = 73
    pad = full.T - short.T
    g = torch.Generator().manual_seed(0)

    def data(task, n, S=64):
        x, y, m = (torch.stack(t) for t in zip(*[task.sample(S, seed=s) for s in range(n)]))
        return x, y, m[..., 0]

    def padded(d):
        x, y, m = d
        return (torch.nn.functional.pad(x, (0, 0, 0, pad)), torch.nn.functional.pad(y, (0, 0, 0, pad)),
                torch.nn.functional.pad(m, (0, pad)))

    def weights(n, H):
        return (0.3 * torch.randn(n, H, H, generator=g) / H ** 0.5, torch.randn(n, H, full.n_in, generator=g),
                torch.randn(n, full.n_out, H, generator=g))
    for H, n in ((8, 3), (64, 4), (72, 2)):
        P, d = weights(n, H), data(short, n, 16)
        a, b = rnn_train_step(*P, *d), rnn_train_step(*P, *padded(d))
        same = all(torch.equal(getattr(a, k), getattr(b, k)) for k in ("loss", "dW", "dU", "dV"))
        print(f"H = {H}: losses and gradients with a tail of {pad} masked steps bit-identical: {same}")
    P27, P9 = weights(27, 72), weights(9, 72)
    P36 = tuple(torch.cat(p) for p in zip(P27, P9))
    d27, d9 = data(short, 27), data(full, 9)
    d36 = tuple(torch.cat(p) for p in zip(padded(d27), d9))

    def two_calls():
        rnn_train_step(*P27, *d27)
        rnn_train_step(*P9, *d9)
    print(f"load average {os.getloadavg()}")
    for _ in range(3):
        for name, fn in (("two calls", two_calls), ("one padded call", lambda: rnn_train_step(*P36, *d36))):
            fn()
            w, c = _timed(lambda: [fn() for _ in range(5)])
            print(f"{name}: {200 * w:.0f} ms wall, {200 * c:.0f} ms CPU per step", flush=True)


if __name__ == "__main__":
    what, rest = sys.argv[1], [int(a) for a in sys.argv[2:]]
    {"grid": grid, "padding": padding}[what](*rest)
