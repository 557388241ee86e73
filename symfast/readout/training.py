"""Batched training of PE+MLP neural fields on 2D and 3D signed distance functions.

`fit_sdf` trains len(shapes) x len(seeds) independent models at once: every
layer is one batched matmul over models and Adam is elementwise, so a batch
of B models equals B separate runs up to rounding. Each model's initialisation and points
come from its own generator seeded by its seed, so a model's training does
not depend on which other models share the batch. What can differ is rounding:
batched matrix products (torch.baddbmm in the reference; the fused CPU kernel
splits a model's points into chunks whose size depends on the batch size B when
B < 64) and PyTorch's vectorised Adam update round differently with B and a
model's position in the batch. Measured: a model trained with 8 batch mates
agrees with it trained alone to about 1e-7 relative (float32, 100 steps,
reference backend) and 1e-15 (float64, fused CPU); runs with the same batch
are bit-identical.

Returns an `Ensemble` (see `symfast.nn.ensemble` for the data model) whose
members carry the Shape objects they were fitted to.

Checkpoints (`checkpoint=path`) hold parameters, Adam state, per-model generator
states and losses of one step boundary, written atomically. A Ctrl-C inside a step
is saved at a boundary: before the optimiser update it undoes the step's point draws
(parameters and Adam are untouched until then); a Ctrl-C signal during the update
is held until the update and its loss record are done; an interrupt raised after
the update completes the step's bookkeeping. A resumed run is bit-identical to an
uninterrupted one. (No per-step copy of parameters or Adam state is needed.)
"""
from __future__ import annotations

import math
import numbers
import os
import warnings

import torch

from symfast._io import sigint_deferred
from symfast._progress import Progress, reporter
from symfast.nn.encodings import FourierPE
from symfast.nn.ensemble import Ensemble
from symfast.nn.fields import init_weights
from symfast.ops import _dispatch
from symfast.readout.checkpoint import adam_steps, resume, save_checkpoint
from symfast.ops.fourier_mlp import ACTIVATIONS, fourier_mlp_eikonal_step, fourier_mlp_train_step, resolve_backend
from symfast.shapes import Shape, by_name, samplers

__all__ = ["fit_sdf", "check_backend", "DOMAINS", "MAX_SEED"]

# Training samplers per input dimension, the default first. The default domains (disk, ball) are
# invariant under all of O(D); a box breaks every candidate outside its own group (O_h in 3D),
# and "near_surface" concentrates points on the zero level set (x projected along the SDF gradient).
DOMAINS = {2: ("disk", "box"), 3: ("ball", "box", "near_surface")}


def _as_shapes(shapes) -> list[Shape]:
    if isinstance(shapes, (Shape, str)):
        shapes = [shapes]
    out = [by_name(s) if isinstance(s, str) else s for s in shapes]
    if not out:
        raise ValueError("need at least one shape")
    for s in out:
        if not isinstance(s, Shape):
            raise ValueError(f"shapes must be symfast Shape objects or names, got {type(s).__name__}")
    return out


# Largest seed: a model's point generator is seeded with 1_000_003 * seed + 7, which
# torch.Generator.manual_seed must accept (below 2^64).
MAX_SEED = (2**64 - 1 - 7) // 1_000_003


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def as_seeds(seeds) -> list[int]:
    if _is_int(seeds):
        if not 1 <= seeds <= 10**6:
            raise ValueError(f"seeds must be a positive count (at most 10^6) or a list of seeds, got {seeds}")
        return list(range(int(seeds)))
    if isinstance(seeds, (str, bytes, bool)) or not hasattr(seeds, "__iter__"):
        raise ValueError(f"seeds must be a positive count or a list of integers, got {seeds!r}")
    seeds = list(seeds)
    for s in seeds:
        if not _is_int(s) or not 0 <= s <= MAX_SEED:
            raise ValueError(f"seeds must be integers in 0..{MAX_SEED}, got {s!r}")
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be a non-empty list of distinct integers")
    return seeds


def _as_hidden(hidden) -> tuple:
    if isinstance(hidden, (str, bytes)) or not hasattr(hidden, "__iter__"):
        raise ValueError(f"hidden must be a sequence of positive integer widths, got {hidden!r}")
    hidden = tuple(hidden)
    if not hidden or not all(_is_int(h) and h >= 1 for h in hidden):
        raise ValueError(f"hidden must be non-empty positive integer widths, got {hidden}")
    return tuple(int(h) for h in hidden)


def _as_device(device) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise ValueError(f"unknown device {device!r}; use 'cpu' or 'cuda[:N]'") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r}: this torch build or machine has no CUDA device; use 'cpu'")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise ValueError(f"device {device!r}: only {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type != "cpu":
        raise ValueError(f"unsupported device {device!r}; use 'cpu' or 'cuda[:N]'")
    return dev


def check_backend(backend: str, device, hidden=None, pe_dim: int | None = None, dtype=torch.float32) -> str:
    """The backend that will train, by the fused op's own rule (`symfast.ops.fourier_mlp.resolve_backend`).

    Rejects a backend this build or device cannot run and, given `hidden` widths (and `pe_dim`),
    an architecture an explicit kernel cannot train (ValueError naming backend='reference');
    "auto" then falls back to the reference with the op's one-time RuntimeWarning."""
    dev = _as_device(device)
    if hidden is None:
        return _dispatch.resolve("fourier_mlp_train_step", backend, dev, triton=True)
    hidden = _as_hidden(hidden)
    dims = [1 if pe_dim is None else pe_dim, *hidden, 1]
    ws = [torch.empty(1, a, b, device="meta") for a, b in zip(dims[:-1], dims[1:])]
    try:
        return resolve_backend(backend, dev, dtype, ws)
    except ValueError as e:
        raise ValueError(f"hidden widths {list(hidden)}: {e}") from None


def fit_sdf(shapes, pe: FourierPE, seeds=32, hidden=(64, 64), activation: str = "relu", steps: int = 1500,
            points: int = 2048, lr: float = 2e-3, device="cpu", backend: str = "auto", sampler: str | None = None,
            radius: float = 1.0, dtype=torch.float32, checkpoint=None, checkpoint_every: int = 100,
            progress: Progress = False, eikonal: float = 0.0, normals: float = 0.0) -> Ensemble:
    """Train len(shapes) x len(seeds) PE+MLP models on SDFs at once.

    Args:
        shapes: Shape objects or names (see `symfast.shapes.NAMES`), 2D or 3D; all of
            the encoding's input dimension (`shape.dim == pe.input_dim`).
        pe: the Fourier encoding shared by all models.
        seeds: a count (seeds 0..n-1) or a list of distinct integer seeds.
        hidden: hidden widths, e.g. (64, 64) for d -> 64 -> 64 -> 1.
        activation: "relu", "tanh", "silu" or "sine".
        steps, points, lr: Adam steps, points per model per step, learning rate
            (defaults 1500 x 2048, 2e-3 separate true from false symmetries at 32 seeds,
            as measured).
        device: torch device for the models.
        backend: "auto" (fused kernels when built and able to take the model, else the reference
            with a one-time warning: e.g. widths above `symfast.ops.fourier_mlp.MAX_WIDTH` on the
            C++ kernel), "reference", "cpu", "triton" (these refuse a model they cannot train).
        sampler: 2D: "disk" (default, O(2)-invariant) or "box"; 3D: "ball" (default,
            O(3)-invariant), "box" or "near_surface" (see `DOMAINS`); radius: the domain's size.
        dtype: float32 (default) or float64.
        checkpoint: optional path; the run is saved there every `checkpoint_every` steps
            (a positive integer) and on Ctrl-C (at the boundary of the interrupted step), and a
            rerun with the same settings resumes from it exactly. A rerun with more `steps` (all
            else the same) continues a finished run: the learning rate is constant and each
            model's points come from its own generator, so the result is exactly what one run
            with the larger step count trains (what an adaptive budget adds steps with).
        progress: False (default), True (a tqdm bar over the steps) or a callable given a line
            about every tenth of the run (see the API index's conventions).
        eikonal: weight of the eikonal term mean (|grad_x f| - 1)^2 (as in IGR, SIREN, NeuS), on
            the same points as the fit (drawn over the whole domain, so mostly off the surface);
            0 (default) trains the plain fit. normals: weight of mean |grad_x f - grad sdf|^2, the
            shape's exact normals (the gradient of its SDF, by autograd). Either > 0 trains through
            the fused second-order step (`symfast.ops.fourier_mlp.fourier_mlp_eikonal_step`); the
            recorded loss is the weighted total.

    Returns:
        An `Ensemble` with members ordered shape-major (all seeds of shapes[0] first), each
        carrying its Shape object.
    """
    shape_objs = _as_shapes(shapes)
    seed_list = as_seeds(seeds)
    if not isinstance(pe, FourierPE):
        raise ValueError(f"pe must be a symfast FourierPE, got {type(pe).__name__}")
    hidden = _as_hidden(hidden)
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose from {sorted(ACTIVATIONS)}")
    for name, v in (("steps", steps), ("points", points), ("checkpoint_every", checkpoint_every)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be positive, got {lr}")
    dim = pe.input_dim
    for s in shape_objs:
        if _shape_dim(s) != dim:
            raise ValueError(f"shape {s.name!r} is {_shape_dim(s)}D but the encoding {pe.name!r} encodes "
                             f"{dim}D points")
    sampler = DOMAINS[dim][0] if sampler is None else sampler
    if sampler not in DOMAINS[dim]:
        raise ValueError(f"sampler must be one of {list(DOMAINS[dim])} for {dim}D shapes, got {sampler!r}")
    if not (radius > 0 and math.isfinite(radius)):
        raise ValueError(f"radius must be positive and finite, got {radius}")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    for name, v in (("eikonal", eikonal), ("normals", normals)):
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{name} must be a finite weight >= 0, got {v!r}")
    device = _as_device(device)
    backend = check_backend(backend, device, hidden, pe.dim, dtype)  # "auto" resolved once, warning once

    member_shapes = [s for s in shape_objs for _ in seed_list]
    member_seeds = [sd for _ in shape_objs for sd in seed_list]
    B = len(member_shapes)
    config = dict(shapes=[s.name for s in shape_objs], seeds=seed_list, hidden=list(hidden),
                  activation=activation, steps=int(steps), points=int(points), lr=float(lr),
                  sampler=sampler, radius=float(radius), dtype=str(dtype), pe=pe.name)
    second_order = eikonal > 0 or normals > 0
    if second_order:  # (only then: plain runs keep the config, and checkpoints, they always had)
        config.update(eikonal=float(eikonal), normals=float(normals))

    weights, biases = init_weights(member_seeds, [pe.dim, *hidden, 1], dtype)
    params = [t.to(device).requires_grad_(True) for t in weights + biases]
    opt = make_adam(params, lr)
    # Points: one generator per model so a model's data does not depend on its batch mates.
    gens = [torch.Generator().manual_seed(1_000_003 * sd + 7) for sd in member_seeds]
    losses = torch.zeros(int(steps), B)
    # The shapes themselves (recipes and groups), so a checkpoint of another shape of the same name is refused.
    targets = [s.to_dict() for s in shape_objs]
    start = 0
    if checkpoint is not None and os.path.exists(checkpoint):
        start = resume(checkpoint, config, targets, params, opt, gens, losses)

    L = len(hidden) + 1
    # fit_sdf trains the weights; the encoding stays as given (learned frequencies: train your own
    # FourierMLPEnsemble, whose autograd path updates them), read detached
    if pe.frequencies.requires_grad or pe.phases.requires_grad:
        warnings.warn(f"fit_sdf keeps the frequencies and phases of {pe.name!r} fixed although they require grad; "
                      "to learn them, train a symfast.nn.FourierMLPEnsemble in your own loop", stacklevel=2)
    freq, phase = pe.frequencies.detach().to(device, dtype), pe.phases.detach().to(device, dtype)
    rep = reporter(progress, "symfast.readout")
    bar = rep.bar(int(steps), desc=f"fit_sdf {pe.name} B={B}", initial=start, unit="step")
    boundary, step, drawn_from = start, start, None  # last completed step; generator states it began with
    try:
        for step in range(start, int(steps)):
            if checkpoint is not None:  # only needed to roll an interrupted step back
                drawn_from = [g.get_state() for g in gens]
            x = _sample(sampler, gens, points, radius, dtype) if dim == 2 else \
                _sample3(sampler, gens, member_shapes, points, radius, dtype)
            target = torch.cat([s.sdf(x[i * len(seed_list):(i + 1) * len(seed_list)])
                                for i, s in enumerate(shape_objs)])
            x, target = x.to(device), target.to(device)
            opt.zero_grad(set_to_none=True)
            if second_order:
                n_true = _sdf_normals(shape_objs, x, len(seed_list)) if normals > 0 else None
                loss_b, _, gw, gb = fourier_mlp_eikonal_step(x, target, freq, phase, params[:L], params[L:],
                                                             activation, eikonal=float(eikonal), normals=n_true,
                                                             normal=float(normals), backend=backend)
            else:
                loss_b, gw, gb = fourier_mlp_train_step(x, target, freq, phase, params[:L], params[L:],
                                                        activation, backend=backend)
            for p, g in zip(params, list(gw) + list(gb)):
                p.grad = g.contiguous()  # PyTorch's fused Adam mis-steps on gradients strided unlike the parameter
            with sigint_deferred():  # the update and its bookkeeping happen together
                opt.step()
                losses[step] = loss_b.detach().float().cpu()
                boundary, drawn_from = step + 1, None
            if rep and step % 50 == 0:
                bar.set_postfix(loss=f"{losses[step].mean().item():.2e}", refresh=False)
            bar.update(1)
            if checkpoint is not None and boundary % checkpoint_every == 0:
                save_checkpoint(checkpoint, config, targets, params, opt, gens, losses, boundary)
    except KeyboardInterrupt:
        if checkpoint is not None:
            if boundary == step and adam_steps(opt, params) == step + 1:
                # raised after opt.step() completed: only the loss record was missing
                losses[step] = loss_b.detach().float().cpu()
                boundary = step + 1
            elif drawn_from is not None:  # parameters and Adam untouched: undo this step's draws
                for g, s in zip(gens, drawn_from):
                    g.set_state(s)
            save_checkpoint(checkpoint, config, targets, params, opt, gens, losses, boundary)
            raise KeyboardInterrupt(f"fit_sdf interrupted; progress saved to {checkpoint}") from None
        raise
    finally:
        bar.close()
    if not all(torch.isfinite(p).all() for p in params):
        raise FloatingPointError("training diverged (NaN/Inf weights); lower lr")
    if checkpoint is not None:
        save_checkpoint(checkpoint, config, targets, params, opt, gens, losses, int(steps))
    out = [p.detach().cpu() for p in params]
    return Ensemble(pe, out[:L], out[L:], activation, member_shapes, member_seeds, losses, config)


def _sdf_normals(shapes, x, per_shape: int) -> torch.Tensor:
    """[B, N, D] gradients of each member's exact SDF at its points (autograd through `Shape.sdf`)."""
    out = []
    for i, s in enumerate(shapes):
        xs = x[i * per_shape:(i + 1) * per_shape].detach().requires_grad_(True)
        with torch.enable_grad():
            g, = torch.autograd.grad(s.sdf(xs).sum(), xs, allow_unused=True)
        if g is None or not torch.isfinite(g).all():
            raise ValueError(f"shape {s.name!r} gives no finite SDF gradient for normals=; train it with eikonal= "
                             f"instead")
        out.append(g)
    return torch.cat(out).to(x.dtype)


def make_adam(params, lr: float) -> torch.optim.Adam:
    """PyTorch's fused Adam (one kernel over all tensors; ~4x faster than foreach on CPU at
    workload W of the benchmarks), or foreach Adam where the device has no fused kernel."""
    try:
        return torch.optim.Adam(params, lr=lr, fused=True)
    except RuntimeError:
        return torch.optim.Adam(params, lr=lr, foreach=True)


def _sample(sampler, gens, n, radius, dtype) -> torch.Tensor:
    u = torch.empty(len(gens), n, 2, dtype=dtype)
    for i, g in enumerate(gens):
        torch.rand(n, 2, generator=g, dtype=dtype, out=u[i])
    if sampler == "disk":
        r, t = radius * u[..., 0].sqrt(), 2 * math.pi * u[..., 1]
        x = torch.stack((r * torch.cos(t), r * torch.sin(t)), -1)
    else:
        x = (2 * u - 1) * radius
    return x


def _shape_dim(shape) -> int:
    return int(getattr(shape, "dim", 2))


def _sample3(sampler, gens, shapes, n, radius, dtype) -> torch.Tensor:
    """[B, n, 3] training points, model i's from its own generator (and its shape for near_surface)."""
    out = torch.empty(len(gens), n, 3, dtype=dtype)
    for i, g in enumerate(gens):
        if sampler == "ball":
            out[i] = samplers.sample_ball(n, radius, generator=g, dtype=dtype)
        elif sampler == "box":
            out[i] = samplers.sample_box(n, radius, generator=g, dtype=dtype, dim=3)
        else:
            out[i] = samplers.sample_near_surface(shapes[i], n, radius=radius, generator=g, dtype=dtype)
    return out
