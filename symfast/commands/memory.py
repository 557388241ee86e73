"""Sizes against memory: a command estimates what its sizes allocate and refuses, in one line, before
allocating what the machine cannot hold.

Each option has a fixed bound (`symfast.commands.limits`), but options multiply: `schur --batch 65536
--hidden 4096 --copy-length 4096` stays within every bound and asks for petabytes. The estimates here
count the large arrays of a run (training activations and their gradients, parameters with their Adam
moments, evaluation rollouts, the readout's sweep of lifts); they are lower bounds of the peak, so a
refused run could not have fitted, and a run that passes can still run short when the estimate misses
a temporary. Available memory: psutil's `virtual_memory().available` when psutil is installed, else
MemAvailable in /proc/meminfo; with neither (not Linux, no psutil) nothing is refused.
"""
from __future__ import annotations

from symfast.commands import UsageError

__all__ = ["available", "refuse_above", "schur_bytes", "readout_bytes"]

F32, F64 = 4, 8


def available() -> tuple[int, str] | None:
    """(bytes of memory available now, where that number came from), or None when it cannot be read."""
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        return int(psutil.virtual_memory().available), "psutil"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "/proc/meminfo MemAvailable"
    except (OSError, ValueError, IndexError):
        pass
    return None


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"


def refuse_above(estimate: float, what: str, hint: str) -> None:
    """UsageError (one line) when `estimate` bytes exceed the memory available now."""
    got = available()
    if got is not None and estimate > got[0]:
        raise UsageError(f"{what} needs at least {_size(estimate)} of memory, more than the {_size(got[0])} "
                         f"available ({got[1]}); {hint}")


def _rnn_bytes(models: int, batch: int, T: int, I: int, H: int, O: int, gates: int) -> float:
    """Training `models` recurrent models together on [batch, T] sequences: inputs, targets and mask, the
    hidden states (times the gates) kept for backpropagation and their gradients; weights, gradients
    and two Adam moments."""
    activations = batch * T * (I + 2 * O + 2 * gates * H)
    weights = gates * H * (H + I) + O * H
    return F32 * models * (activations + 4 * weights)


def schur_bytes(settings, cfg_of: dict) -> float:
    """The largest training or evaluation step of `symfast schur` with `settings` (a SchurSettings) and
    its {(task, construction): TrainConfig}: per task, all models trained together (the fused engines
    train a task's constructions, widths and seeds at once: tanh; a construction and width's seeds: GRU,
    SSM), then the held-out rollouts (n_eval sequences, float64, the model and its ablated variants)."""
    from symfast.schur.rnn import make_task

    gates = {"tanh": 1, "ssm": 1, "gru": 3, "lstm": 4}[settings.family]
    cons_of, hid_of, worst = settings.constructions_of(), settings.widths_of(), 0.0
    for name in settings.tasks:
        task = settings.copy_task() if name == "copy" else make_task(name)
        T, I, O = task.T, task.n_in, task.n_out
        for cn in cons_of[name]:
            cfg = cfg_of[(name, cn)]
            fused = cfg.engine == "fused" and settings.family != "lstm"
            together = settings.seeds * (len(cons_of[name]) * len(hid_of[name]) if settings.family == "tanh" else 1)
            for H in hid_of[name]:
                train = _rnn_bytes(together if fused else 1, cfg.batch, T, I, H, O, gates)
                evaluate = F64 * settings.n_eval * T * (I + 2 * O + H) * 2
                worst = max(worst, train, evaluate)
    return worst


def readout_bytes(models: int, points: int, hidden, features: int, sweep: int) -> float:
    """`symfast readout`: training `models` fields together on `points` points (features, every hidden
    layer's activations and their gradients, float32), their weights with Adam moments; the sweep's
    `sweep` lifts [features, features] (float64, with the scores' temporaries)."""
    widths = [features, *hidden, 1]
    activations = points * sum(widths) * 2
    weights = sum(a * b + b for a, b in zip(widths, widths[1:])) * 4
    return max(F32 * models * (activations + weights), F64 * 3 * sweep * features ** 2)
