"""Batched training of PE+MLP neural fields on 2D signed distance functions.

`fit_sdf` trains len(shapes) x len(seeds) independent models at once: every
layer is one batched matmul over models and Adam is elementwise, so a batch
of B models equals B separate runs. Each model's initialisation and points
come from its own generator seeded by its seed, so a model's training does
not depend on which other models share the batch.
"""
from __future__ import annotations

import math
import os

import torch
from tqdm.auto import tqdm

from symfast.readout import samplers
from symfast.readout.encodings import FourierPE
from symfast.readout.ensemble import Ensemble
from symfast.ops.fourier_mlp.reference import ACTIVATIONS, fourier_mlp
from symfast.readout.shapes import Shape, by_name

__all__ = ["fit_sdf", "BACKENDS"]

BACKENDS = ("auto", "reference", "cpu", "triton")


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


def _as_seeds(seeds) -> list[int]:
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds must be a positive count or a list of seeds, got {seeds}")
        return list(range(seeds))
    seeds = [int(s) for s in seeds]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError("seeds must be a non-empty list of distinct integers")
    return seeds


def init_weights(seeds: list[int], dims: list[int], dtype=torch.float32) -> tuple[list, list]:
    """nn.Linear's default init (U(-1/sqrt(fan_in), 1/sqrt(fan_in))) per model, from its seed."""
    weights = [torch.empty(len(seeds), a, b, dtype=dtype) for a, b in zip(dims[:-1], dims[1:])]
    biases = [torch.empty(len(seeds), b, dtype=dtype) for b in dims[1:]]
    for i, seed in enumerate(seeds):
        g = torch.Generator().manual_seed(seed)
        for w, b in zip(weights, biases):
            bound = 1.0 / math.sqrt(w.shape[1])
            w[i] = (torch.rand(w.shape[1:], generator=g, dtype=torch.float64) * 2 - 1).mul_(bound)
            b[i] = (torch.rand(b.shape[1:], generator=g, dtype=torch.float64) * 2 - 1).mul_(bound)
    return weights, biases


def _resolve_backend(backend: str, device: torch.device) -> str:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    fused = _fused_step()
    if backend == "auto":  # the fused op picks C++ on CPU, Triton on CUDA, or warns and falls back
        return "auto" if fused is not None else "reference"
    if backend in ("cpu", "triton") and fused is None:
        raise ValueError(f"backend={backend!r} needs the fused kernels, which this build lacks")
    if backend == "cpu" and device.type != "cpu":
        raise ValueError(f"backend='cpu' needs device='cpu', got {device}")
    if backend == "triton" and device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError("backend='triton' needs a CUDA device (or TRITON_INTERPRET=1 on CPU)")
    return backend


def _fused_step():
    """The fused training step if this build has it, else None."""
    try:
        from symfast.ops.fourier_mlp import fourier_mlp_train_step
    except ImportError:
        return None
    return fourier_mlp_train_step


def fit_sdf(shapes, pe: FourierPE, seeds=32, hidden=(64, 64), activation: str = "relu", steps: int = 1500,
            points: int = 2048, lr: float = 2e-3, device="cpu", backend: str = "auto", sampler: str = "disk",
            radius: float = 1.0, dtype=torch.float32, checkpoint=None, checkpoint_every: int = 100,
            progress: bool | None = None) -> Ensemble:
    """Train len(shapes) x len(seeds) PE+MLP models on SDFs at once.

    Args:
        shapes: Shape objects or names (see `symfast.readout.shapes.NAMES`).
        pe: the Fourier encoding shared by all models.
        seeds: a count (seeds 0..n-1) or a list of distinct integer seeds.
        hidden: hidden widths, e.g. (64, 64) for d -> 64 -> 64 -> 1.
        activation: "relu", "tanh", "silu" or "sine".
        steps, points, lr: Adam steps, points per model per step, learning rate
            (defaults 1500 x 2048, 2e-3 separate true from false symmetries at 32 seeds,
            as measured).
        device: torch device for the models.
        backend: "auto" (fused kernels when built, else reference), "reference", "cpu", "triton".
        sampler: "disk" (default, O(2)-invariant) or "box"; radius: its size.
        dtype: float32 (default) or float64.
        checkpoint: optional path; the run is saved there every `checkpoint_every` steps and on
            Ctrl-C, and a rerun with the same settings resumes from it.
        progress: show a tqdm bar (default: when the run is long).

    Returns:
        An `Ensemble` with members ordered shape-major (all seeds of shapes[0] first).
    """
    shape_objs = _as_shapes(shapes)
    seed_list = _as_seeds(seeds)
    if not isinstance(pe, FourierPE):
        raise ValueError(f"pe must be a symfast FourierPE, got {type(pe).__name__}")
    hidden = tuple(int(h) for h in hidden)
    if not hidden or any(h < 1 for h in hidden):
        raise ValueError(f"hidden must be non-empty positive widths, got {hidden}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; choose from {sorted(ACTIVATIONS)}")
    for name, v in (("steps", steps), ("points", points)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v}")
    if not (lr > 0 and math.isfinite(lr)):
        raise ValueError(f"lr must be positive, got {lr}")
    if sampler not in samplers.SAMPLERS:
        raise ValueError(f"sampler must be one of {sorted(samplers.SAMPLERS)}, got {sampler!r}")
    device = torch.device(device)
    backend = _resolve_backend(backend, device)

    member_shapes = [s for s in shape_objs for _ in seed_list]
    member_seeds = [sd for _ in shape_objs for sd in seed_list]
    B = len(member_shapes)
    config = dict(shapes=[s.name for s in shape_objs], seeds=seed_list, hidden=list(hidden),
                  activation=activation, steps=int(steps), points=int(points), lr=float(lr),
                  sampler=sampler, radius=float(radius), dtype=str(dtype), pe=pe.name)

    weights, biases = init_weights(member_seeds, [pe.dim, *hidden, 1], dtype)
    params = [t.to(device).requires_grad_(True) for t in weights + biases]
    opt = make_adam(params, lr)
    # Points: one generator per model so a model's data does not depend on its batch mates.
    gens = [torch.Generator().manual_seed(1_000_003 * sd + 7) for sd in member_seeds]
    losses = torch.zeros(int(steps), B)
    start = 0
    if checkpoint is not None and os.path.exists(checkpoint):
        start = _resume(checkpoint, config, params, opt, gens, losses)

    L = len(hidden) + 1
    freq, phase = pe.frequencies.to(device, dtype), pe.phases.to(device, dtype)
    fused = _fused_step() if backend != "reference" else None
    show = progress if progress is not None else (steps - start) * B * points > 5e7
    bar = tqdm(range(start, steps), total=steps, initial=start, disable=not show,
               desc=f"fit_sdf {pe.name} B={B}", unit="step", leave=False)
    step = start
    try:
        for step in bar:
            x = _sample(sampler, gens, points, radius, dtype)
            target = torch.cat([s.sdf(x[i * len(seed_list):(i + 1) * len(seed_list)])
                                for i, s in enumerate(shape_objs)])
            x, target = x.to(device), target.to(device)
            opt.zero_grad(set_to_none=True)
            if fused is not None:
                loss_b, gw, gb = fused(x, target, freq, phase, params[:L], params[L:], activation,
                                       backend=backend)
                for p, g in zip(params, list(gw) + list(gb)):
                    p.grad = g
            else:
                pred = fourier_mlp(x, freq, phase, params[:L], params[L:], activation)
                loss_b = (pred - target).pow(2).mean(dim=1)
                loss_b.sum().backward()
            opt.step()
            losses[step] = loss_b.detach().float().cpu()
            if show and step % 50 == 0:
                bar.set_postfix(loss=f"{losses[step].mean().item():.2e}")
            if checkpoint is not None and (step + 1) % checkpoint_every == 0:
                _save_checkpoint(checkpoint, config, params, opt, gens, losses, step + 1)
    except KeyboardInterrupt:
        if checkpoint is not None:
            _save_checkpoint(checkpoint, config, params, opt, gens, losses, step)
            raise KeyboardInterrupt(f"fit_sdf interrupted; progress saved to {checkpoint}") from None
        raise
    finally:
        bar.close()
    if not all(torch.isfinite(p).all() for p in params):
        raise FloatingPointError("training diverged (NaN/Inf weights); lower lr")
    if checkpoint is not None:
        _save_checkpoint(checkpoint, config, params, opt, gens, losses, int(steps))
    out = [p.detach().cpu() for p in params]
    return Ensemble(pe, out[:L], out[L:], activation, [s.name for s in member_shapes], member_seeds,
                    losses, config)


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


def _save_checkpoint(path, config, params, opt, gens, losses, step):
    tmp = f"{path}.tmp-{os.getpid()}"
    torch.save({"config": config, "step": step, "params": [p.detach().cpu() for p in params],
                "opt": opt.state_dict(), "gens": [g.get_state() for g in gens], "losses": losses}, tmp)
    os.replace(tmp, path)  # atomic: an interrupted save never corrupts the previous checkpoint


def _resume(path, config, params, opt, gens, losses) -> int:
    ck = torch.load(path, map_location="cpu", weights_only=True)
    if ck["config"] != config:
        raise ValueError(f"checkpoint {path} was written with other settings; remove it or change the path")
    with torch.no_grad():
        for p, v in zip(params, ck["params"]):
            p.copy_(v)
    opt.load_state_dict(ck["opt"])
    for g, s in zip(gens, ck["gens"]):
        g.set_state(s)
    losses.copy_(ck["losses"])
    return int(ck["step"])
