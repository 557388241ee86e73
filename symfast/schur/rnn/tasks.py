"""Task generators for single-layer tanh RNNs, one common interface (the four tasks of
"Task-Restricted Symmetries in Recurrent Weight Space", arXiv 2606.18457).

Every task is a small dataclass with `n_in`, `n_out`, `T` and
`sample(batch, seed) -> (inputs [B, T, n_in], targets [B, T, n_out], mask [B, T, n_out])`
(float32 torch tensors, batch first, 0/1 mask; the same seed gives the same batch).
FVU and the loss are computed over the masked entries only.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import torch

# Seed of the held-out evaluation batches (ablations, subspace projections, convergence checks): far
# above the seeds training batches are drawn with.
EVAL_SEED = 10**6

__all__ = ["Task", "FlipFlop", "SineGeneration", "ContextIntegration", "Copy", "make_task", "TASKS", "fvu"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(int(seed))


class Task:
    """Common interface; subclasses set n_in, n_out, T and implement sample()."""

    name = "task"

    def sample(self, batch: int, seed: int):  # pragma: no cover - interface
        raise NotImplementedError

    def config(self) -> dict:
        return {"name": self.name, **asdict(self)}

    def shortened(self, frac: float) -> "Task":
        """The task with its sequences cut to about `frac` (0 < frac <= 1) of their length, for a
        training curriculum (`symfast.schur.rnn.config.task_at`); the task itself where it has no
        shorter version."""
        return self


@dataclass
class FlipFlop(Task):
    """n-bit flip-flop (Sussillo & Barak 2013).

    Inputs [B, T, n_bits]: at each step each channel independently carries a pulse with
    probability `p_pulse`, of sign +1 or -1 with equal probability, else 0.
    Targets [B, T, n_bits]: the sign of the last pulse seen on that channel (0 before the
    first pulse). Mask: all ones. Defaults: 3 bits, T = 100, p_pulse = 0.05.
    """

    n_bits: int = 3
    T: int = 100
    p_pulse: float = 0.05
    name = "flipflop"

    @property
    def n_in(self):
        return self.n_bits

    @property
    def n_out(self):
        return self.n_bits

    def sample(self, batch: int, seed: int):
        g = _gen(seed)
        pulse = torch.rand(batch, self.T, self.n_bits, generator=g) < self.p_pulse
        sign = 1.0 - 2.0 * (torch.rand(batch, self.T, self.n_bits, generator=g) < 0.5)  # -1 if u < 0.5, else +1
        x = pulse * sign
        # The target at step t is the pulse at step last(t) = the latest t' <= t with a pulse: a running
        # maximum over time of (t' + 1 where a pulse is, else 0), read from x behind one row of zeros
        # (0: no pulse yet, target 0). No Python loop over time.
        last = (pulse * torch.arange(1, self.T + 1).view(1, -1, 1)).cummax(1).values
        y = torch.cat([torch.zeros(batch, 1, self.n_bits), x], 1).gather(1, last)
        return x, y, torch.ones_like(y)

    def shortened(self, frac: float) -> Task:
        """The same task over the first max(10, ceil(frac T)) steps."""
        return replace(self, T=min(self.T, max(10, math.ceil(frac * self.T))))


@dataclass
class SineGeneration(Task):
    """Sine generation with the frequency set by a static input.

    A frequency omega ~ U[omega_min, omega_max] (radians per step) is drawn per sequence;
    input [B, T, 1] is the constant omega / omega_max; target [B, T, 1] is sin(omega t),
    t = 1..T. Mask: all ones. Defaults: T = 100, omega in [0.1, 0.6].
    """

    T: int = 100
    omega_min: float = 0.1
    omega_max: float = 0.6
    name = "sine"
    n_in = 1
    n_out = 1

    def sample(self, batch: int, seed: int):
        g = _gen(seed)
        om = self.omega_min + (self.omega_max - self.omega_min) * torch.rand(batch, 1, 1, generator=g)
        t = torch.arange(1, self.T + 1, dtype=torch.float32).view(1, -1, 1)
        x = (om / self.omega_max).expand(batch, self.T, 1).clone()
        y = torch.sin(om * t)
        return x, y, torch.ones_like(y)

    def shortened(self, frac: float) -> Task:
        """The same task over the first max(10, ceil(frac T)) steps."""
        return replace(self, T=min(self.T, max(10, math.ceil(frac * self.T))))


@dataclass
class ContextIntegration(Task):
    """Context-dependent integration (Mante et al. 2013), a regression version.

    Inputs [B, T, 4]: two noisy evidence streams s_k = c_k + noise_std * N(0, 1) during the
    stimulus window [t_on, t_off) (0 elsewhere) and a one-hot context cue (channels 2, 3)
    present during the whole trial. Coherences c_k ~ U[-c_max, c_max]. Target [B, T, 1]:
    during the response window [t_off, T) the mean of the *relevant* stream over the
    stimulus window divided by c_max (so it lies in about [-1, 1]); mask = response
    window only. Defaults: T = 60, t_on = 5, t_off = 45, c_max = 0.4, noise_std = 0.5.
    """

    T: int = 60
    t_on: int = 5
    t_off: int = 45
    c_max: float = 0.4
    noise_std: float = 0.5
    name = "context"
    n_in = 4
    n_out = 1

    def sample(self, batch: int, seed: int):
        g = _gen(seed)
        c = self.c_max * (2 * torch.rand(batch, 1, 2, generator=g) - 1)
        ctx = (torch.rand(batch, generator=g) < 0.5).long()
        x = torch.zeros(batch, self.T, 4)
        win = slice(self.t_on, self.t_off)
        n = self.t_off - self.t_on
        x[:, win, :2] = c + self.noise_std * torch.randn(batch, n, 2, generator=g)
        x[:, :, 2:] = torch.nn.functional.one_hot(ctx, 2).to(x.dtype).unsqueeze(1)  # the context cue
        ev = x[:, win, :2].mean(1)  # [B, 2]
        target = ev.gather(1, ctx.unsqueeze(1)) / self.c_max  # [B, 1]: the relevant stream
        y = torch.zeros(batch, self.T, 1)
        m = torch.zeros(batch, self.T, 1)
        y[:, self.t_off:] = target.unsqueeze(1)
        m[:, self.t_off:] = 1.0
        return x, y, m


@dataclass
class Copy(Task):
    """Copy task with autonomous replay: see L symbols, then generate them again and again (or, with
    `cyclic=False`, once, after a delay).

    The paper ("Task-Restricted Symmetries in Recurrent Weight Space") scores "autonomous
    replay accuracy over the first 128 generated symbols" without spelling the task out;
    this is the definition inferred from that phrase (the defaults):
    Inputs [B, T, K + 1], T = L + 1 + delay + replay: a random sequence of L symbols (alphabet K,
    one-hot, uniform) at steps [0, L), a go cue (channel K) at step L, then zeros: the
    network runs autonomously, driven by nothing but its own state. Targets [B, T, K]:
    from step L + 1 + delay on, the sequence repeated cyclically (step L + 1 + delay + j shows
    symbol j mod L), one-hot; mask = that replay window. Replay accuracy = fraction of the first
    `scored` generated steps whose argmax output is the right symbol.
    Defaults: K = 4, L = 8, delay = 0, cyclic, replay = scored = 128 (so T = 137).

    A variant that is ours, not the paper's: `cyclic=False` replays the sequence once (replay = L
    steps: step L + 1 + delay + j shows symbol j), and `delay` D > 0 puts D unscored blank steps
    between the go cue and the replay (the network must hold the sequence through them). replay and
    scored default to 128 for the cyclic task and to L for the single replay, which allows no other
    value. The defaults give today's task bit for bit, and its config lists delay and cyclic only when
    they differ from the defaults (so checkpoints of the default task keep matching).
    """

    n_symbols: int = 4
    length: int = 8
    replay: int | None = None
    scored: int | None = None
    delay: int = 0
    cyclic: bool = True
    name = "copy"

    def __post_init__(self):
        if not isinstance(self.cyclic, bool):
            raise ValueError(f"Copy: cyclic must be True or False, got {self.cyclic!r}")
        if self.replay is None:
            self.replay = 128 if self.cyclic else self.length
        if self.scored is None:
            self.scored = min(128, self.replay)
        for name in ("n_symbols", "length", "replay", "scored"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"Copy: {name} must be >= 1, got {getattr(self, name)}")
        if int(self.delay) < 0:
            raise ValueError(f"Copy: delay must be >= 0, got {self.delay}")
        if not self.cyclic and self.replay != self.length:
            raise ValueError(f"Copy: a single replay (cyclic=False) lasts length ({self.length}) steps, "
                             f"got replay={self.replay}")
        if self.scored > self.replay:
            raise ValueError(f"Copy: scored ({self.scored}) must be <= replay ({self.replay})")

    def config(self) -> dict:
        c = super().config()
        for k, default in (("delay", 0), ("cyclic", True)):
            if c[k] == default:
                del c[k]
        return c

    @property
    def n_in(self):
        return self.n_symbols + 1

    @property
    def n_out(self):
        return self.n_symbols

    @property
    def start(self) -> int:
        """The first step of the replay window: L + 1 + delay."""
        return self.length + 1 + self.delay

    @property
    def T(self):
        return self.start + self.replay

    def sample(self, batch: int, seed: int):
        g = _gen(seed)
        K, L, s = self.n_symbols, self.length, self.start
        sym = torch.randint(0, K, (batch, L), generator=g)
        oh = torch.nn.functional.one_hot(sym, K).float()
        x = torch.zeros(batch, self.T, K + 1)
        x[:, :L, :K] = oh
        x[:, L, K] = 1.0
        y = torch.zeros(batch, self.T, K)
        m = torch.zeros(batch, self.T, K)
        y[:, s:] = oh.repeat(1, -(-self.replay // L), 1)[:, :self.replay]  # step s + j: symbol j mod L
        m[:, s:] = 1.0
        return x, y, m

    def shortened(self, frac: float) -> "Copy":
        """The same task, shorter: the cyclic task with a replay window of max(length, ceil(frac replay))
        steps (scored steps cut to fit), the single replay with a delay of floor(frac delay) steps."""
        if not self.cyclic:
            return replace(self, delay=math.floor(frac * self.delay))
        r = min(self.replay, max(self.length, math.ceil(frac * self.replay)))
        return replace(self, replay=r, scored=min(self.scored, r))

    def replay_accuracy(self, y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Accuracy on the first `scored` generated symbols: y_hat [..., B, T, K], y [B, T, K] -> [...]."""
        w = slice(self.start, self.start + self.scored)
        return (y_hat[..., w, :].argmax(-1) == y[:, w].argmax(-1)).float().mean((-1, -2))


TASKS = {"flipflop": FlipFlop, "sine": SineGeneration, "context": ContextIntegration, "copy": Copy}


def make_task(name: str, **kwargs) -> Task:
    """Task by name ('flipflop', 'sine', 'context', 'copy') with optional overrides."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; expected one of {sorted(TASKS)}")
    return TASKS[name](**kwargs)


def fvu(y_hat: torch.Tensor, y: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """FVU = E||y_hat - y||^2 / E||y - mean y||^2 over masked entries; y_hat [..., B, T, O] -> [...].

    The mean is per output channel over masked (batch, time) entries.
    """
    m = mask.to(y.dtype)
    cnt = m.sum((0, 1)).clamp_min(1)
    mu = (y * m).sum((0, 1)) / cnt
    den = (((y - mu) ** 2) * m).sum()
    num = (((y_hat - y) ** 2) * m).sum((-1, -2, -3))
    return num / den.clamp_min(1e-12)

