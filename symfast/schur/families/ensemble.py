"""Training all seeds of one family construction at once, as one batched ensemble.

The seeds' models are stacked along a leading model dim M: every parameter becomes [M, ...], one
forward pass runs the M models through the same time loop with batched matmuls (torch.bmm), and
each model still gets what `symfast.schur.rnn.train.fit` gives it alone: its own init (built by the
family's own constructor), its own batches (`batch_seed` of its seed), its own masked MSE, its own
gradient-norm clipping and its own Adam state (Adam is elementwise, so one Adam over stacked
tensors is M independent Adams). Results equal the one-at-a-time path to float32 rounding (tested);
that path (`fit` on torch.nn.GRU / LSTM or the model's own forward) stays the reference.

Why: the per-step cost of these small models (H = 64, batch 64) is mostly per-op overhead of the
time loop, which M models share.
"""
from __future__ import annotations

import torch

from symfast._progress import Progress, reporter
from symfast.schur.families.gated import GatedRNN, cell_from_gates
from symfast.schur.families.ssm import LinearSSM, rotation_blocks
from symfast.schur.rnn.config import TrainConfig, batch_seed, lr_at, task_at
from symfast.schur.rnn.tasks import Task
from symfast.schur.rnn.train_fused import clip_per_model

__all__ = ["fit_ensemble", "ensemble_forward"]


def ensemble_forward(model, P: dict, x: torch.Tensor) -> torch.Tensor:
    """Outputs of M models of `model`'s kind and config with stacked parameters P {name: [M, ...]}:
    x [M, B, T, I] -> y [M, B, T, O] (float32 autograd, the same equations as the model's forward)."""
    xt = x.permute(2, 0, 1, 3)  # time first: each step's slice is contiguous
    if isinstance(model, GatedRNN):
        gi = xt @ P["rnn.weight_ih_l0"].transpose(1, 2)  # [T, M, B, G H]: the input part of every step at once
        if model.bias:
            gi = gi + P["rnn.bias_ih_l0"][:, None]
        w_hhT = P["rnn.weight_hh_l0"].transpose(1, 2)
        h = x.new_zeros(x.shape[0], x.shape[1], model.n_hidden)
        state = (h,) if model.kind == "gru" else (h, torch.zeros_like(h))
        hs = []
        for gi_t in gi.unbind(0):  # unbind, not gi[t]: a slice's backward would fill a full-size zero tensor
            gh = torch.baddbmm(P["rnn.bias_hh_l0"][:, None], state[0], w_hhT) if model.bias else state[0] @ w_hhT
            state = cell_from_gates(model.kind, gi_t, gh, *state)
            hs.append(state[0])
        V = P["readout"]
    elif isinstance(model, LinearSSM):
        if model.structure == "dense":
            A = P["A"]
        else:  # M small: each model's rotation blocks, as its own recurrent_weight builds them
            A = torch.stack([rotation_blocks(torch.exp(-torch.exp(nu)), torch.exp(th))
                             for nu, th in zip(P["nu_log"], P["theta_log"])])
        u = xt @ P["B"].transpose(1, 2)  # [T, M, B, H]
        At = A.transpose(1, 2)
        h = x.new_zeros(x.shape[0], x.shape[1], model.n_hidden)
        hs = []
        for u_t in u.unbind(0):
            h = torch.baddbmm(u_t, h, At)
            hs.append(h)
        V = P["C"]
    else:
        raise ValueError(f"no batched ensemble for {type(model).__name__}; expected a GatedRNN or LinearSSM")
    return torch.stack(hs, 2) @ V.transpose(1, 2).unsqueeze(1)


def fit_ensemble(models: list, task: Task, seeds, cfg: TrainConfig, losses: list | None = None,
                 progress: Progress = False, desc: str = "", opts: list | None = None, start=0,
                 on_epoch=None) -> list:
    """Train `models` (same class and config, one per seed) together; each as
    `fit(models[k], task, seeds[k], cfg, opt=opts[k], start=start)`.

    Args:
        models: GatedRNN or LinearSSM models of one config, freshly built (each with its own init) or
            resumed at epoch `start`.
        task, seeds, cfg: the task, one seed per model (its batches), the budget (cfg.seed ignored).
        losses: optional list that receives one list of per-batch losses per model (appended to the
            model's own list when it already holds one list per model: a resumed run).
        progress, desc: False, True (a tqdm bar) or a callable given progress lines; the bar's label.
        opts: optional per-model torch.optim.Adam over each model's parameters; their state (a resumed
            run's) is stacked into the ensemble's Adam, and each gets its slice back after every epoch.
        start: the first epoch of every model (a resumed run: every model done `start` epochs), or one
            per model. A model ahead of the others rides along, frozen (weights and Adam moments put
            back after every step), until the others reach its epoch: each model's arithmetic depends
            on the ensemble's size and its place in it (the batched products are blocked by shape), so
            a resumed run keeps every model in the ensemble of the uninterrupted run to end bit-identical
            to it.
        on_epoch: optional callable(ep), called after epoch ep once models and opts hold its result
            (checkpoints; the models that trained in ep are those with start <= ep).

    Returns:
        the models, trained in place.
    """
    seeds = [int(s) for s in seeds]
    if not models or len(models) != len(seeds):
        raise ValueError(f"need one seed per model, got {len(models)} models and {len(seeds)} seeds")
    conf = models[0].config()
    if any(type(m) is not type(models[0]) or m.config() != conf for m in models):
        raise ValueError("an ensemble needs models of one class and config")
    starts = [int(v) for v in start] if isinstance(start, (list, tuple)) else [int(start)] * len(models)
    if len(starts) != len(models) or not all(0 <= v <= cfg.epochs for v in starts):
        raise ValueError(f"need one start epoch in 0..{cfg.epochs} per model, got {start!r} for {len(models)} models")
    names = [n for n, _ in models[0].named_parameters()]
    P = {n: torch.stack([dict(m.named_parameters())[n].detach() for m in models]).clone().requires_grad_()
         for n in names}
    params = list(P.values())
    opt = torch.optim.Adam(params, lr=cfg.lr)
    if opts is not None and len(opts) != len(models):
        raise ValueError(f"need one optimiser per model, got {len(opts)} for {len(models)} models")
    first = min(starts)
    _stack_adam_state(opt, params, [o.state_dict()["state"] for o in opts] if opts is not None else [], starts)
    resumed = losses is not None and len(losses) == len(models) and all(isinstance(v, list) for v in losses)
    per = losses if resumed else [[] for _ in models]
    rep = reporter(progress, "symfast.schur")
    bar = rep.bar(cfg.epochs * cfg.batches_per_epoch, desc=desc, initial=first * cfg.batches_per_epoch)
    for ep in range(first, cfg.epochs):
        tk = task_at(task, cfg, ep)
        ahead = [k for k in range(len(models)) if starts[k] > ep]  # frozen this epoch
        kept = _freeze(opt, params, ahead)
        for b in range(cfg.batches_per_epoch):
            x, y, msk = (torch.stack(v) for v in zip(*(tk.sample(cfg.batch, seed=batch_seed(s, ep, b)) for s in seeds)))
            dims = tuple(range(1, y.ndim))
            loss = (((ensemble_forward(models[0], P, x) - y) ** 2) * msk).sum(dims) / msk.sum(dims).clamp_min(1)
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()  # the models are independent: each gets its own loss's gradient
            if cfg.clip:
                clip_per_model(params, cfg.clip)
            for group in opt.param_groups:
                group["lr"] = lr_at(cfg, ep * cfg.batches_per_epoch + b)
            opt.step()
            _restore(opt, params, kept)
            for k, v in enumerate(loss.tolist()):
                if starts[k] <= ep:
                    per[k].append(v)
            if rep:
                bar.set_postfix(loss=f"{max(p[-1] for p in per):.4f}", refresh=False)
            bar.update(1)
        if on_epoch is not None or ep == cfg.epochs - 1:
            _write_back(models, opts, P, opt, [k for k in range(len(models)) if starts[k] <= ep])
        if on_epoch is not None:
            on_epoch(ep)
    bar.close()
    if losses is not None and not resumed:
        losses.extend(per)
    return models


def _stack_adam_state(opt, params, states: list, starts: list) -> None:
    """Stack the models' own Adam states into the ensemble's `opt` (nothing when no model has one: Adam
    builds its zero state at the first step). The step count is that of the models that train first,
    which all share it; a model ahead keeps its own moments, and its step count is the ensemble's by
    the time it trains. A model without state gets the zero moments Adam would give it."""
    if not states or not any(states):
        return
    first = min(starts)
    lead = next(st for st, s0 in zip(states, starts) if s0 == first)
    for i, p in enumerate(params):
        step = lead[i]["step"].clone() if lead else torch.zeros((), dtype=torch.float32)
        opt.state[p] = {"step": step, **{key: torch.stack([st[i][key] if st else torch.zeros_like(p[0])
                                                          for st in states]).detach()
                                         for key in ("exp_avg", "exp_avg_sq")}}


@torch.no_grad()
def _freeze(opt, params, ahead: list) -> list:
    """Copies of the rows `ahead` of every stacked parameter and of its Adam moments, to put back after a
    step (`_restore`)."""
    if not ahead:
        return []
    idx = torch.tensor(ahead)
    return [(p, idx, p[idx].clone(), {key: opt.state[p][key][idx].clone() for key in ("exp_avg", "exp_avg_sq")
                                      if key in opt.state.get(p, {})}) for p in params]


@torch.no_grad()
def _restore(opt, params, kept: list) -> None:
    """Put back the frozen rows saved by `_freeze` (their models did not train this step)."""
    for p, idx, rows, moments in kept:
        p[idx] = rows
        for key, v in moments.items():
            opt.state[p][key][idx] = v


@torch.no_grad()
def _write_back(models, opts, P, opt, ks: list) -> None:
    """Copy models ks' slices of the stacked parameters (and of the Adam state, into opts) to the models."""
    for k in ks:
        m = models[k]
        for n, p in m.named_parameters():
            p.copy_(P[n][k])
        if opts is not None:
            sd = opts[k].state_dict()
            sd["state"] = {i: {"step": opt.state[p]["step"].clone(),
                               **{key: opt.state[p][key][k].clone() for key in ("exp_avg", "exp_avg_sq")}}
                           for i, p in enumerate(P.values()) if p in opt.state}
            opts[k].load_state_dict(sd)

