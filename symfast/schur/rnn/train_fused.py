"""Training many TanhRNNs at once through the fused ensemble kernel (`symfast.ops.rnn_train`).

Each model keeps what one-at-a-time training gives it: its own init (TanhRNN from its seed and its
settings), its own batches (seeded by (seed, epoch, batch), from `config.task_at` under its own
curriculum), its own loss (masked MSE), its own learning rate per step (`config.lr_at` of its own
settings), its own gradient clipping and its own Adam. Models of one call may have different
training settings (one TrainConfig per model, differing in anything but engine and threads:
epochs, batch size and batches per epoch, rate, schedule, clipping, curriculum, Cayley init...).

The models of equal settings resumed at the same epoch form a cohort: its parameters are stacked
(leading dim = model) under one torch.optim.Adam, which is each model's own Adam because Adam is
elementwise and the cohort's models share a step count, with the cohort's learning rate at each
step. Every cohort starts at the first step of the call, at its own epoch, and leaves the call
after its last epoch (where its models are written back). Per step, the cohorts whose batches have
the same shape share one kernel call; a curriculum's shorter sequences get a call of their own
rather than a tail padded with mask 0 (the padded tail is bit-identical, but the kernel still
runs its steps: on the copy grid's curriculum shapes one padded call took 15-32 % more CPU time
than two calls; docs/results-log.md). Models of different widths share a call: parameters are
zero-padded to the widest model of the call, and `widths` makes the kernel ignore the padding
(which therefore stays exactly zero, Cayley included). Clipping sums each model's gradient norm
over its own width only. Per-model checkpoints (model, Adam state and losses, the model's own
settings) are written in the format of the one-at-a-time path, so either path resumes the
other's checkpoints.

Per step, each distinct batch (task at the epoch, batch size, seed) is drawn once and shared by
every model that trains on it (the copy grid's 36 models draw 3 batches per shape, not 36); a
mask that is the same for every output channel is passed as [B, S, T]. The Cayley models' W and
its gradient are formed on each model's own width (one solve, two products: `_cayley_grad`), and
the kernel ignores the padding, so a model's result does not depend on the models it is trained
with (bit for bit): a run resumed with its models at different epochs ends where an
uninterrupted one ends, and a model trained beside models of other settings ends where it ends
among its own.

Threads: only the kernel call runs on the caller's torch thread count (`cfg.threads` under
`train_seeds`; the kernel puts one thread on each model); everything else in the step runs on one
thread. Small ops spread over two threads of a busy machine wait for both to be scheduled: a
72 x 72 product measured 60 ms on 2 threads at load average 6.7 against 0.13 ms on one.
"""
from __future__ import annotations

from dataclasses import replace

import torch

from symfast._progress import Progress, reporter
from symfast.ops.rnn_train import rnn_train_step
from symfast.schur.rnn.checkpoint import resume, save_checkpoint
from symfast.schur.rnn.config import batch_seed, cayley_options, lr_at, model_configs, task_at
from symfast.schur.rnn.model import TanhRNN, cayley

__all__ = ["train_models"]


def _pad(p: torch.Tensor, name: str, Hm: int) -> torch.Tensor:
    """One model's parameter (or a stack of them, leading dims first) zero-padded to width Hm."""
    H = p.shape[-1] if name == "readout" else p.shape[-2]
    if name == "readout":  # V [O, H]
        return torch.nn.functional.pad(p, (0, Hm - H))
    if name == "rnn.weight_ih_l0":  # U [H, I]
        return torch.nn.functional.pad(p, (0, 0, 0, Hm - H))
    return torch.nn.functional.pad(p, (0, Hm - H, 0, Hm - H))  # W or the Cayley generator P [H, H]


def _unpad(p: torch.Tensor, name: str, H: int) -> torch.Tensor:
    """The first H units of a padded parameter (or of a stack of them)."""
    if name == "readout":
        return p[..., :H]
    if name == "rnn.weight_ih_l0":
        return p[..., :H, :]
    return p[..., :H, :H]


def train_models(task, seeds, widths, recurrents, cfg, checkpoints=None, progress: Progress = False,
                 backend: str = "auto") -> list[TanhRNN]:
    """Train len(seeds) TanhRNNs on `task` together, model k with seed seeds[k], width widths[k],
    construction recurrents[k] and settings cfg (or cfg[k]).

    Args:
        task: a Task. seeds, widths, recurrents: one entry per model.
        cfg: a TrainConfig for every model, or a sequence of one per model; they may differ in
            everything but engine and threads (`config.model_configs`).
        checkpoints: optional list of .pt paths, one per model, rewritten every epoch (a partly
            trained checkpoint of the same run resumes at its epoch).
        backend: the op's backend ("auto": the C++ kernel on CPU).
        progress: False (default), True (a tqdm bar) or a callable given progress lines.

    Returns:
        The trained models, in the order given.
    """
    n = len(seeds)
    if n == 0 or not len(widths) == len(recurrents) == n:
        raise ValueError(f"need one or more models with one width and one construction each, got {n} seeds, "
                         f"{len(widths)} widths, {len(recurrents)} constructions")
    if checkpoints is not None and len(checkpoints) != n:
        raise ValueError(f"need one checkpoint path per model, got {len(checkpoints)} for {n}")
    cfgs = model_configs(cfg, n)
    kernel_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # every small op (init, sampling, Cayley, Adam) on one thread: see the module doc
    try:
        return _train_models(task, seeds, widths, recurrents, cfgs, checkpoints, progress, backend, kernel_threads)
    finally:
        torch.set_num_threads(kernel_threads)


def _train_models(task, seeds, widths, recurrents, cfgs, checkpoints, progress, backend, kernel_threads):
    n = len(seeds)
    models = [TanhRNN(task.n_in, int(h), task.n_out, recurrent=r, generator=torch.Generator().manual_seed(int(s)),
                      **cayley_options(c, r))
              for s, h, r, c in zip(seeds, widths, recurrents, cfgs)]
    opts = [torch.optim.Adam(m.parameters(), lr=c.lr) for m, c in zip(models, cfgs)]
    losses = [[] for _ in range(n)]
    starts = [(resume(checkpoints[k], models[k], opts[k], task, int(seeds[k]), cfgs[k], losses[k]) if checkpoints
               else 0) for k in range(n)]
    todo = [k for k in range(n) if starts[k] < cfgs[k].epochs]
    if not todo:
        return models
    # a cohort: the models of equal settings resumed at the same epoch (one stacked tensor per parameter, one Adam)
    key = [(repr(replace(cfgs[k], seed=0)), starts[k]) for k in range(n)]
    Hm = max(models[k].n_hidden for k in todo)
    cohorts = [_Cohort([k for k in todo if key[k] == kc], cfgs, starts, models, opts, Hm)
               for kc in dict.fromkeys(key[k] for k in todo)]
    rep = reporter(progress, "symfast.schur")
    rounds = max(c.steps for c in cohorts)
    bar = rep.bar(rounds, desc=f"{task.name} x{len(todo)} models (fused)")
    bufs = {}  # per group of cohorts sharing a kernel call: [B, S, T, .] inputs, targets, mask, refilled every step
    for i in range(rounds):  # every cohort starts at round 0, at its own epoch
        active = [c for c in cohorts if i < c.steps]
        rows, drawn = _draw(task, seeds, active, i)
        calls = {}  # cohorts whose batches have the same shape share one kernel call
        for c in active:
            calls.setdefault(tuple(drawn[rows[c][0]][0].shape), []).append(c)
        bufs = {ids: v for ids, v in bufs.items() if ids in {tuple(map(id, g)) for g in calls.values()}}
        step_losses = []
        for group in calls.values():
            Ws = [c.weights() for c in group]
            st = _kernel_call(group, Ws, [drawn[r] for c in group for r in rows[c]], bufs, Hm, kernel_threads,
                              backend)
            j = 0
            for c, W in zip(group, Ws):
                sl = slice(j, j + len(c.members))
                c.step(i, W, st.dW[sl], st.dU[sl], st.dV[sl])
                for k, v in zip(c.members, st.loss[sl].tolist()):
                    losses[k].append(v)
                j = sl.stop
            step_losses.append(st.loss)
        for c in active:  # each cohort's epoch ends: its checkpoints, and its models once trained
            ep, b = c.position(i)
            if b == c.cfg.batches_per_epoch - 1 and (checkpoints or ep == c.cfg.epochs - 1):
                c.write_back(models, opts)
            if b == c.cfg.batches_per_epoch - 1 and checkpoints:
                for k in c.members:
                    save_checkpoint(checkpoints[k], models[k], task, replace(c.cfg, seed=int(seeds[k])),
                                    epoch=ep + 1, optimizer=opts[k], losses=losses[k])
        if rep:
            bar.set_postfix(loss=f"{float(torch.cat(step_losses).mean()):.4f}", refresh=False)
        bar.update(1)
    bar.close()
    return models


def _draw(task, seeds, active, i):
    """The batches of round i: ({cohort: one key per model}, {key: (x, y, mask, mask the same for every
    output)}), each distinct batch (task at the epoch, batch size, seed) drawn once."""
    rows, drawn = {}, {}
    for c in active:
        ep, b = c.position(i)
        tk = task_at(task, c.cfg, ep)
        rows[c] = [(repr(tk), c.cfg.batch, batch_seed(int(seeds[k]), ep, b)) for k in c.members]
        for r in rows[c]:
            if r not in drawn:
                x, y, m = tk.sample(r[1], seed=r[2])
                drawn[r] = (x, y, m, bool(torch.equal(m, m[..., :1].expand_as(m))))
    return rows, drawn


def _kernel_call(group, Ws, batch, bufs, Hm, kernel_threads, backend):
    """One kernel call for the cohorts of `group` (recurrent weights Ws), model by model on `batch`; the
    inputs are stacked into bufs[the group's ids], allocated again only when their shape changes."""
    ids = tuple(map(id, group))
    flat = all(d[3] for d in batch)  # one mask for all outputs: [S, T] per model (0/1 masks: the same sums)
    ts = [[d[0] for d in batch], [d[1] for d in batch], [d[2][..., 0] if flat else d[2] for d in batch]]
    if ids not in bufs or any(buf.shape[1:] != t[0].shape for buf, t in zip(bufs[ids], ts)):
        bufs[ids] = [torch.empty(len(batch), *t[0].shape, dtype=t[0].dtype) for t in ts]
    for buf, t in zip(bufs[ids], ts):
        torch.stack(t, out=buf)
    Hs = [h for c in group for h in c.Hs]
    torch.set_num_threads(kernel_threads)  # the kernel runs its models on kernel_threads threads
    try:
        return rnn_train_step(_cat(Ws), _cat([c.stacked[c.iU].detach() for c in group]),
                              _cat([c.stacked[c.iV].detach() for c in group]), *bufs[ids],
                              widths=torch.tensor(Hs, dtype=torch.int64) if min(Hs) != Hm else None, backend=backend)
    finally:
        torch.set_num_threads(1)


def _cat(ts: list[torch.Tensor]) -> torch.Tensor:
    return ts[0] if len(ts) == 1 else torch.cat(ts)


class _Cohort:
    """Models of one call with the same settings (`cfg`) resumed at the same epoch: their parameters
    stacked (zero-padded to the call's widest model Hm, leading dim = model) under one Adam, one
    learning rate and one clipping threshold per step; the same step count for all of them."""

    def __init__(self, members, cfgs, starts, models, opts, Hm):
        self.members, self.cfg, self.start = members, cfgs[members[0]], starts[members[0]]
        self.steps = (self.cfg.epochs - self.start) * self.cfg.batches_per_epoch
        # parameters by position (every construction lists V, U, then W or the Cayley generator P)
        self.names = [nm if nm in ("readout", "rnn.weight_ih_l0") else "W"
                      for nm, _ in models[members[0]].named_parameters()]
        self.iV, self.iU, self.iW = (self.names.index(nm) for nm in ("readout", "rnn.weight_ih_l0", "W"))
        self.Hs = [models[k].n_hidden for k in members]
        with torch.no_grad():
            self.stacked = [torch.stack([_pad(list(models[k].parameters())[i].detach(), nm, Hm) for k in members])
                            .requires_grad_() for i, nm in enumerate(self.names)]
        self.opt = torch.optim.Adam(self.stacked, lr=self.cfg.lr)
        states = [opts[k].state_dict()["state"] for k in members]
        if all(states):  # resumed: stack every model's Adam state (the same step count within a cohort)
            for i, (p, nm) in enumerate(zip(self.stacked, self.names)):
                self.opt.state[p] = {"step": states[0][i]["step"].clone(),
                                     **{key: torch.stack([_pad(st[i][key], nm, Hm) for st in states])
                                        for key in ("exp_avg", "exp_avg_sq")}}
        self.cay = [j for j, k in enumerate(members) if models[k].recurrent == "cayley"]
        self.ds = [models[k].cayley_d for k in members]  # the scaled Cayley map's fixed D (None: the plain map)
        self.by_width = {H: torch.tensor([j for j, h in enumerate(self.Hs) if h == H]) for H in sorted(set(self.Hs))}

    def position(self, i: int) -> tuple[int, int]:
        """(epoch, batch) of this cohort's models at round i of the call."""
        return divmod(self.start * self.cfg.batches_per_epoch + i, self.cfg.batches_per_epoch)

    def weights(self) -> torch.Tensor:
        """The models' recurrent weights W [n, Hm, Hm]: W = cayley(P, d) on each Cayley model's own width
        (the padding stays zero)."""
        W = self.stacked[self.iW].detach()
        if self.cay:
            W = W.clone()
            for j in self.cay:
                H = self.Hs[j]
                W[j, :H, :H] = cayley(W[j, :H, :H], self.ds[j])
        return W

    def step(self, i: int, W, dW, dU, dV) -> None:
        """One Adam step of round i from the kernel's gradients in W (dL/dP formed here for Cayley models)."""
        for j in self.cay:  # dL/dP from dL/dW, on each model's own width (zero beyond it)
            H = self.Hs[j]
            dW[j, :H, :H] = _cayley_grad(W[j, :H, :H], dW[j, :H, :H], self.ds[j])
        grads = [None] * 3
        grads[self.iW], grads[self.iU], grads[self.iV] = dW, dU, dV
        for p, g in zip(self.stacked, grads):
            p.grad = g
        if self.cfg.clip:
            clip_per_model(self.stacked, self.cfg.clip, self._sq_norms())
        ep, b = self.position(i)
        for pg in self.opt.param_groups:
            pg["lr"] = lr_at(self.cfg, ep * self.cfg.batches_per_epoch + b)
        self.opt.step()

    @torch.no_grad()
    def _sq_norms(self) -> torch.Tensor:
        """Each model's squared gradient norm, summed over its own width only: a sum over the padded
        entries (zeros) would round differently and make the clipping depend on the widest model."""
        out = torch.empty(len(self.members))
        for H, idx in self.by_width.items():
            out[idx] = sum(_unpad(p.grad[idx], nm, H).pow(2).sum(dim=(1, 2)) for p, nm in zip(self.stacked, self.names))
        return out

    def write_back(self, models, opts) -> None:
        """Copy each model's slice of the stacked parameters and Adam state into its own model and Adam."""
        opt = self.opt
        with torch.no_grad():
            for j, k in enumerate(self.members):
                H = models[k].n_hidden
                for q, nm, p in zip(models[k].parameters(), self.names, self.stacked):
                    q.copy_(_unpad(p[j], nm, H))
                sd = opts[k].state_dict()
                sd["state"] = {i: {"step": opt.state[p]["step"].clone(),
                                   **{key: _unpad(opt.state[p][key][j], nm, H).clone()
                                      for key in ("exp_avg", "exp_avg_sq")}}
                               for i, (nm, p) in enumerate(zip(self.names, self.stacked)) if p in opt.state}
                opts[k].load_state_dict(sd)


def _cayley_grad(W: torch.Tensor, G: torch.Tensor, d: torch.Tensor | None = None) -> torch.Tensor:
    """Gradient in the Cayley generator P of a loss with gradient G in W = cayley(P, d); W, G: [H, H],
    d: [H] of +-1 or None.

    With A = P - P^T and M = I + A, C = M^{-1} (I - A) = 2 M^{-1} - I, so M^{-1} = (C + I) / 2 and
    dL/dA = -2 M^{-T} G_C M^{-T} = -(C + I)^T G_C (C + I)^T / 2; dL/dP = dL/dA - (dL/dA)^T: two
    products, no second solve and no autograd graph. Scaled map W = C D: D^2 = I gives C = W D
    and G_C = dL/dC = G D.
    """
    if d is not None:
        W, G = W * d, G * d
    Wt = W.T + torch.eye(W.shape[-1], dtype=W.dtype)
    gA = -0.5 * (Wt @ G @ Wt)
    return gA - gA.T


@torch.no_grad()
def clip_per_model(stacked, max_norm: float, sq_norms: torch.Tensor | None = None) -> None:
    """torch.nn.utils.clip_grad_norm_ applied to each model's own slice of stacked gradients
    (leading dim = model): every model's gradient norm is clipped at max_norm on its own.
    Parameters without a gradient are left out, as clip_grad_norm_ does. sq_norms: each model's
    squared gradient norm [n] when computed elsewhere (default: summed over its whole slice)."""
    grads = [p.grad for p in stacked if p.grad is not None]
    if sq_norms is None:
        sq_norms = sum(g.pow(2).sum(dim=tuple(range(1, g.ndim))) for g in grads)
    norm = torch.sqrt(sq_norms)
    coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.ndim - 1))))
