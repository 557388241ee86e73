"""Training many TanhRNNs at once through the fused ensemble kernel (`symfast.ops.rnn_train`).

Each model keeps what one-at-a-time training gives it: its own init (TanhRNN from its seed),
its own batches (seeded by (seed, epoch, batch)), its own loss (masked MSE) and Adam with
the same hyper-parameters. Adam is elementwise, so one torch.optim.Adam over the models'
stacked parameters is each model's own Adam (step counts agree: models that start together
step together), and so is the learning rate of each step (`config.lr_at`). Gradient clipping, when asked, clips each model's norm separately. Models of
different widths share one call: parameters are zero-padded to the widest, and `widths`
makes the kernel ignore the padding (which therefore stays exactly zero, Cayley included).
Per-model checkpoints (model, Adam state and losses) are written in the format of the
one-at-a-time path, so either path resumes the other's checkpoints.

Per step, each distinct seed's batch is drawn once and shared by every model with that seed
(the copy grid's 36 models draw 3 batches, not 36), written into buffers allocated once; a mask
that is the same for every output channel is passed as [B, S, T]. The Cayley models' W and
its gradient are formed on each model's own width (one solve, two products: `_cayley_grad`), and
the kernel ignores the padding, so a model's result does not depend on the models it is trained
with (bit for bit): a run resumed with its models split over several groups ends where an
uninterrupted one ends.

Threads: only the kernel call runs on the caller's torch thread count (`cfg.threads` under
`train_seeds`; the kernel puts one thread on each model); everything else in the step runs on one
thread. Small ops spread over two threads of a busy machine wait for both to be scheduled: a
72 x 72 product measured 60 ms on 2 threads at load average 6.7 against 0.13 ms on one.
"""
from __future__ import annotations

import torch

from symfast._progress import Progress, reporter
from symfast.ops.rnn_train import rnn_train_step
from symfast.schur.rnn.checkpoint import resume, save_checkpoint
from symfast.schur.rnn.config import TrainConfig, batch_seed, cayley_options, lr_at, task_at
from symfast.schur.rnn.model import TanhRNN, cayley

__all__ = ["train_models"]


def _pad(p: torch.Tensor, name: str, Hm: int) -> torch.Tensor:
    H = p.shape[-1] if name == "readout" else p.shape[0]
    if name == "readout":  # V [O, H]
        return torch.nn.functional.pad(p, (0, Hm - H))
    if name == "rnn.weight_ih_l0":  # U [H, I]
        return torch.nn.functional.pad(p, (0, 0, 0, Hm - H))
    return torch.nn.functional.pad(p, (0, Hm - H, 0, Hm - H))  # W or the Cayley generator P [H, H]


def _unpad(p: torch.Tensor, name: str, H: int) -> torch.Tensor:
    if name == "readout":
        return p[:, :H]
    if name == "rnn.weight_ih_l0":
        return p[:H]
    return p[:H, :H]


def train_models(task, seeds, widths, recurrents, cfg, checkpoints=None, progress: Progress = False,
                 backend: str = "auto") -> list[TanhRNN]:
    """Train len(seeds) TanhRNNs on `task` together, model k with seed seeds[k], width widths[k]
    and construction recurrents[k].

    Args:
        task: a Task. seeds, widths, recurrents: one entry per model. cfg: TrainConfig.
        checkpoints: optional list of .pt paths, one per model, rewritten every epoch (a partly
            trained checkpoint of the same run resumes at its epoch).
        backend: the op's backend ("auto": the C++ kernel on CPU).
        progress: False (default), True (a tqdm bar) or a callable given progress lines.

    Returns:
        The trained models, in the order given.
    """
    kernel_threads = torch.get_num_threads()
    torch.set_num_threads(1)  # every small op (init, sampling, Cayley, Adam) on one thread: see the module doc
    try:
        return _train_models(task, seeds, widths, recurrents, cfg, checkpoints, progress, backend, kernel_threads)
    finally:
        torch.set_num_threads(kernel_threads)


def _train_models(task, seeds, widths, recurrents, cfg, checkpoints, progress, backend, kernel_threads):
    n = len(seeds)
    models = [TanhRNN(task.n_in, int(h), task.n_out, recurrent=r, generator=torch.Generator().manual_seed(int(s)),
                      **cayley_options(cfg, r))
              for s, h, r in zip(seeds, widths, recurrents)]
    opts = [torch.optim.Adam(m.parameters(), lr=cfg.lr) for m in models]
    losses = [[] for _ in range(n)]
    starts = [(resume(checkpoints[k], models[k], opts[k], task, int(seeds[k]), cfg, losses[k]) if checkpoints
               else 0) for k in range(n)]
    for start in sorted(set(starts)):  # models resumed at the same epoch step together
        group = [k for k in range(n) if starts[k] == start]
        _train_group(task, group, start, models, opts, losses, seeds, cfg, checkpoints, progress, backend,
                     kernel_threads)
    return models


def _train_group(task, group, start, models, opts, losses, seeds, cfg, checkpoints, progress, backend,
                 kernel_threads):
    # Parameters by position (every construction lists V, U, then W or the Cayley generator P).
    names = [nm if nm in ("readout", "rnn.weight_ih_l0") else "W" for nm, _ in models[group[0]].named_parameters()]
    Hs = [models[k].n_hidden for k in group]
    Hm = max(Hs)
    widths = torch.tensor(Hs, dtype=torch.int64) if min(Hs) != Hm else None
    with torch.no_grad():
        stacked = [torch.stack([_pad(list(models[k].parameters())[i].detach(), nm, Hm) for k in group])
                   .requires_grad_() for i, nm in enumerate(names)]
    opt = torch.optim.Adam(stacked, lr=cfg.lr)
    states = [opts[k].state_dict()["state"] for k in group]
    if all(states):  # resumed: stack every model's Adam state (same step count within a group)
        for i, (p, nm) in enumerate(zip(stacked, names)):
            opt.state[p] = {"step": states[0][i]["step"].clone(),
                            **{key: torch.stack([_pad(st[i][key], nm, Hm) for st in states])
                               for key in ("exp_avg", "exp_avg_sq")}}
    iV, iU, iW = names.index("readout"), names.index("rnn.weight_ih_l0"), names.index("W")
    useeds = sorted({int(seeds[k]) for k in group})  # each distinct seed's batch is drawn once per step
    inv = [useeds.index(int(seeds[k])) for k in group]
    bufs = None  # [B, S, T, .] inputs, targets, mask: filled in place every step
    cay_idx = [j for j, k in enumerate(group) if models[k].recurrent == "cayley"]
    ds = [models[k].cayley_d for k in group]  # the scaled Cayley map's fixed D (None: the plain map)
    rep = reporter(progress, "symfast.schur")
    bar = rep.bar((cfg.epochs - start) * cfg.batches_per_epoch, desc=f"{task.name} x{len(group)} models (fused)")
    for ep in range(start, cfg.epochs):
        for b in range(cfg.batches_per_epoch):
            drawn = [task_at(task, cfg, ep).sample(cfg.batch, seed=batch_seed(s, ep, b)) for s in useeds]
            if all(torch.equal(m, m[..., :1].expand_as(m)) for _, _, m in drawn):
                drawn = [(x, y, m[..., 0]) for x, y, m in drawn]  # one mask for all outputs: [S, T]
            if bufs is None or any(buf.shape[1:] != t.shape for buf, t in zip(bufs, drawn[0])):
                bufs = [torch.empty(len(group), *t.shape, dtype=t.dtype) for t in drawn[0]]
            for buf, ts in zip(bufs, zip(*drawn)):
                torch.stack([ts[u] for u in inv], out=buf)
            x, y, m = bufs
            Wc = stacked[iW].detach()
            if cay_idx:  # W = cayley(P, d) on each model's own width (the padding of Wc stays zero)
                Wc = Wc.clone()
                for j in cay_idx:
                    Wc[j, :Hs[j], :Hs[j]] = cayley(Wc[j, :Hs[j], :Hs[j]], ds[j])
            torch.set_num_threads(kernel_threads)  # the kernel runs its models on kernel_threads threads
            try:
                st = rnn_train_step(Wc, stacked[iU].detach(), stacked[iV].detach(), x, y, m, widths=widths,
                                    backend=backend)
            finally:
                torch.set_num_threads(1)
            for j in cay_idx:  # dL/dP from dL/dW, on each model's own width (zero beyond it)
                st.dW[j, :Hs[j], :Hs[j]] = _cayley_grad(Wc[j, :Hs[j], :Hs[j]], st.dW[j, :Hs[j], :Hs[j]], ds[j])
            stacked[iW].grad, stacked[iU].grad, stacked[iV].grad = st.dW, st.dU, st.dV
            if cfg.clip:
                clip_per_model(stacked, cfg.clip)
            for pg in opt.param_groups:
                pg["lr"] = lr_at(cfg, ep * cfg.batches_per_epoch + b)
            opt.step()
            for k, v in zip(group, st.loss.tolist()):
                losses[k].append(v)
            if rep:
                bar.set_postfix(loss=f"{float(st.loss.mean()):.4f}", refresh=False)
            bar.update(1)
        if checkpoints or ep == cfg.epochs - 1:
            _write_back(group, models, opts, stacked, opt, names, Hm)
        if checkpoints:
            for k in group:
                save_checkpoint(checkpoints[k], models[k], task, TrainConfig(**{**vars(cfg), "seed": int(seeds[k])}),
                                epoch=ep + 1, optimizer=opts[k], losses=losses[k])
    bar.close()


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


def _write_back(group, models, opts, stacked, opt, names, Hm):
    """Copy each model's slice of the stacked parameters and Adam state into its own model and Adam."""
    with torch.no_grad():
        for j, k in enumerate(group):
            H = models[k].n_hidden
            for q, nm, p in zip(models[k].parameters(), names, stacked):
                q.copy_(_unpad(p[j], nm, H))
            sd = opts[k].state_dict()
            sd["state"] = {i: {"step": opt.state[p]["step"].clone(),
                               **{key: _unpad(opt.state[p][key][j], nm, H).clone()
                                  for key in ("exp_avg", "exp_avg_sq")}}
                           for i, (nm, p) in enumerate(zip(names, stacked)) if p in opt.state}
            opts[k].load_state_dict(sd)


@torch.no_grad()
def clip_per_model(stacked, max_norm: float) -> None:
    """torch.nn.utils.clip_grad_norm_ applied to each model's own slice of stacked gradients
    (leading dim = model): every model's gradient norm is clipped at max_norm on its own.
    Parameters without a gradient are left out, as clip_grad_norm_ does."""
    grads = [p.grad for p in stacked if p.grad is not None]
    norm = torch.sqrt(sum(g.pow(2).sum(dim=tuple(range(1, g.ndim))) for g in grads))
    coef = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(coef.view(-1, *([1] * (g.ndim - 1))))
