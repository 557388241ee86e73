"""Second-order SDF training step (a loss on f and on grad_x f): symfast's fused step beside eager
PyTorch, torch.compile of a torch.func formulation, and JAX.

Workload W-eik: workload W (B = 256 models, N = 2048 points, DyadicAxisPE(12): d = 48,
48 -> 64 -> 64 -> 1 ReLU, fp32) with an eikonal term: per model
    loss = mean (f - sdf)^2 + 0.1 * mean (|grad_x f| - 1)^2
over the same N points, then Adam (PyTorch's fused Adam for every torch implementation, optax for
JAX). Implementations, all given the same weights, points and targets (first-step losses are
checked to agree before anything is timed):
  symfast           `fourier_mlp_eikonal_step`: forward, input gradient and double backward in one pass
  symfast autograd  the loop users write: f = fourier_mlp(x, ...), g = autograd.grad(f, x,
                    create_graph=True), loss.backward(): reaches the fused jet op
  eager             the same loop on the plain PyTorch reference (autograd double backward)
  compile           torch.compile of a torch.func formulation (vmap over points of func.grad in x,
                    func.grad in the weights)
  jax               jax.grad (in x) inside the loss, jax.vmap over models and points, jax.value_and_grad
                    in the weights, optax Adam, the whole step under jax.jit
and, in the same interleaved run, symfast's plain fused step (no eikonal term), for the FLOP-rate
ratio of the two steps (executed FLOPs: `eikonal_step_flops`, and the plain step's without dx). Ratios are measured side by side in one run (best of a few repeats).

Run as a script for a table: `python benchmarks/benchmarks/bench_eikonal.py [--repeat 5]`.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys

import numpy as np
import torch

try:
    import symfast as sf
except ImportError:  # run as a script from a source checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    import symfast as sf
from symfast.ops.fourier_mlp import fourier_mlp, fourier_mlp_eikonal_step, reference

try:
    from ._skip import raise_if_skipped, skip
    from .bench_fourier_mlp import (CPU_TIMES, W, executed_flops, make, make_step, matmul_peak_gflops,
                                    side_by_side)
except ImportError:  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _skip import raise_if_skipped, skip
    from bench_fourier_mlp import (CPU_TIMES, W, executed_flops, make, make_step, matmul_peak_gflops,
                                   side_by_side)

try:
    import jax
    import jax.numpy as jnp
    import optax
except ImportError:  # optional peer
    jax = None

LAMBDA = 0.1
D = 2


def eikonal_step_flops(B, N, d, H, depth):
    """FLOPs of the second-order step as the fused kernel executes it (reverse over reverse, no dx):
    per point, the first layer's d x H product 5 times (forward, the reverse pass for grad_x f, its
    adjoint's two products, the weight gradient), every other hidden layer's H x H product 6 times
    (the same plus the backward to its input), the output layer's H-vector 3 times. The same count
    is used for every implementation (the work of the step, whoever does it)."""
    return 2 * B * N * (5 * d * H + 6 * (depth - 1) * H * H + 3 * H)


def _loss_terms(f, g, t):
    return (f - t).pow(2).mean(1) + LAMBDA * (g.norm(dim=-1) - 1).pow(2).mean(1)


def torch_eikonal_step(impl, pe, x, t, ws, bs):
    """One training step (loss on f and grad_x f, backward, Adam) for a torch implementation."""
    f, p = pe.frequencies.float(), pe.phases.float()
    params = ws + bs
    L = len(ws)
    opt = torch.optim.Adam(params, lr=1e-3, fused=True)
    if impl == "symfast":
        def step():
            loss, _, gw, gb = fourier_mlp_eikonal_step(x, t, f, p, ws, bs, "relu", eikonal=LAMBDA)
            for q, g in zip(params, gw + gb):
                q.grad = g
            opt.step()
            return loss
        return step
    if impl == "compile":
        return _compiled_func_step(f, p, x, t, params, L, opt)
    backend = "auto" if impl == "symfast autograd" else "reference"

    def step():
        opt.zero_grad(set_to_none=True)
        xg = x.detach().requires_grad_(True)
        y = fourier_mlp(xg, f, p, ws, bs, "relu", backend=backend)
        g, = torch.autograd.grad(y.sum(), xg, create_graph=True)
        loss = _loss_terms(y, g, t)
        loss.sum().backward()
        opt.step()
        return loss.detach()
    return step


def _compiled_func_step(f, p, x, t, params, L, opt):
    """torch.compile of the step written with torch.func: grad in x per point (vmap over models and
    points), grad in the weights of the summed loss."""
    from torch.func import grad, vmap

    def field(ws, bs, xi):  # one model, one point [D] -> scalar
        u = xi @ f.T + p
        h = torch.stack((torch.sin(u), torch.cos(u)), -1).flatten()
        for l, (w, b) in enumerate(zip(ws, bs)):
            h = h @ w + b
            if l < L - 1:
                h = torch.relu(h)
        return h[0]

    def model_loss(ws, bs, xb, tb):  # one model: its N points
        fb = vmap(field, in_dims=(None, None, 0))(ws, bs, xb)
        gb = vmap(grad(field, argnums=2), in_dims=(None, None, 0))(ws, bs, xb)
        return (fb - tb).pow(2).mean() + LAMBDA * (gb.norm(dim=-1) - 1).pow(2).mean()

    def total(ps):
        return vmap(model_loss)(list(ps[:L]), list(ps[L:]), x, t).sum()

    value_and_grads = torch.compile(torch.func.grad_and_value(total))

    def step():
        grads, loss = value_and_grads(tuple(q.detach() for q in params))
        for q, g in zip(params, grads):
            q.grad = g.contiguous()
        opt.step()
        return loss
    return step


def jax_eikonal_step(pe, x, t, ws, bs, lr: float = 1e-3):
    """A jitted JAX second-order training step over B models and a function returning its last loss."""
    freq = jnp.asarray(pe.frequencies.float().numpy())
    phase = jnp.asarray(pe.phases.float().numpy())

    def field(params, xi):  # one model, one point [2] -> scalar
        u = xi @ freq.T + phase
        h = jnp.stack([jnp.sin(u), jnp.cos(u)], axis=-1).reshape(-1)
        for k, (w, b) in enumerate(params):
            h = h @ w + b
            if k < len(params) - 1:
                h = jax.nn.relu(h)
        return h[0]

    def model_loss(params, xi, ti):
        fi = jax.vmap(field, in_axes=(None, 0))(params, xi)
        gi = jax.vmap(jax.grad(field, argnums=1), in_axes=(None, 0))(params, xi)
        return jnp.mean((fi - ti) ** 2) + LAMBDA * jnp.mean((jnp.linalg.norm(gi, axis=-1) - 1) ** 2)

    def loss_all(params, xs, ts):
        return jax.vmap(model_loss)(params, xs, ts).sum()

    params = [(jnp.asarray(w.detach().numpy()), jnp.asarray(b.detach().numpy())) for w, b in zip(ws, bs)]
    opt = optax.adam(lr)
    state = {"params": params, "opt": opt.init(params), "loss": None}
    xs, ts = jnp.asarray(x.numpy()), jnp.asarray(t.numpy())

    @jax.jit
    def update(params, opt_state):
        loss, grads = jax.value_and_grad(loss_all)(params, xs, ts)
        upd, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, upd), opt_state, loss

    def step():
        state["params"], state["opt"], state["loss"] = update(state["params"], state["opt"])
        state["loss"].block_until_ready()
    return step, lambda: float(state["loss"])


def run(repeat: int = 5, peers=("eager", "compile", "jax")) -> dict:
    """Times (s) of every implementation at W-eik, interleaved; the plain fused step beside them."""
    args = make(**W)
    fns = {"symfast": torch_eikonal_step("symfast", *args),
           "symfast autograd": torch_eikonal_step("symfast autograd", *make(**W))}
    notes = {}
    if "eager" in peers:
        fns["eager"] = torch_eikonal_step("eager", *make(**W))
    if "compile" in peers:
        try:
            c = torch_eikonal_step("compile", *make(**W))
            c()
            fns["compile"] = c
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            notes["compile"] = f"torch.compile of the torch.func formulation failed: {type(e).__name__}: {e}"[:300]
    if "jax" in peers:
        if jax is None:
            notes["jax"] = "jax/optax not installed (pip install 'symfast[bench]')"
        else:
            fns["jax"], jax_loss = jax_eikonal_step(*make(**W))
            fns["jax"]()
            notes["jax first-step loss"] = f"{jax_loss():.6g}"
    fns["symfast plain step"] = make_step("symfast", *make(**W))
    # same inputs, same first-step loss (before timing): symfast fused vs eager reference
    a, b = make(**W), make(**W)
    l_fused = torch_eikonal_step("symfast", *a)().sum().item()
    l_eager = torch_eikonal_step("eager", *b)().sum().item()
    if not np.isclose(l_fused, l_eager, rtol=1e-4):
        raise AssertionError(f"first-step losses differ: symfast {l_fused} vs eager {l_eager}")
    t = side_by_side(fns, repeat=repeat)
    notes["symfast first-step loss"] = f"{l_fused:.6g} (eager {l_eager:.6g})"
    return {"t": t, "cpu": dict(CPU_TIMES), "notes": notes, "loss": l_fused}


class EikonalStepW:
    """W-eik: ratios vs eager, torch.compile(torch.func) and JAX; FLOP rate vs the plain fused step."""
    timeout = 1800

    def setup_cache(self):
        if not sf.cpp_available():
            return skip("symfast._C not built")
        out = run(repeat=3)
        out["peak"] = matmul_peak_gflops()
        return out

    def setup(self, r):
        raise_if_skipped(r)
        self.t = r["t"]

    def track_speedup_vs_eager(self, r):
        return self.t["eager"] / self.t["symfast"]

    def track_speedup_vs_compile(self, r):
        return self.t["compile"] / self.t["symfast"] if "compile" in self.t else float("nan")

    def track_speedup_vs_jax(self, r):
        return self.t["jax"] / self.t["symfast"] if "jax" in self.t else float("nan")

    def track_rate_over_plain_step(self, r):
        """The eikonal step's FLOP rate over the plain fused step's, both in this run."""
        fe = eikonal_step_flops(W["B"], W["N"], 48, W["H"], W["depth"])
        fp = executed_flops(W["B"], W["N"], 48, W["H"], W["depth"])
        return (fe / self.t["symfast"]) / (fp / self.t["symfast plain step"])

    track_speedup_vs_eager.unit = track_speedup_vs_compile.unit = track_speedup_vs_jax.unit = "x"
    track_rate_over_plain_step.unit = "fraction"


def main(repeat: int = 5):
    C = sf._ext.require_cpp()
    print(f"machine: {platform.processor() or platform.machine()}, threads {torch.get_num_threads()}, "
          f"C++ kernels on {C.fourier_mlp_isa('auto')}")
    r = run(repeat)
    peak = matmul_peak_gflops()
    fe = eikonal_step_flops(W["B"], W["N"], 48, W["H"], W["depth"])
    fp = executed_flops(W["B"], W["N"], 48, W["H"], W["depth"])
    t = r["t"]
    print(f"W-eik (B=256, N=2048, 48->64->64->1 ReLU, fp32, eikonal 0.1, step incl. Adam), best of {repeat} "
          f"interleaved; GFLOP/s of the executed products (eikonal_step_flops; the plain step's without dx):")
    for k, v in t.items():
        flops = fp if k == "symfast plain step" else fe
        print(f"  {k:20s} {v * 1e3:9.1f} ms  {flops / v / 1e9:6.1f} GFLOP/s  (CPU time {r['cpu'][k] * 1e3:9.1f} ms)")
    for k in ("eager", "symfast autograd", "compile", "jax"):
        if k in t:
            print(f"  symfast fused step vs {k}: {t[k] / t['symfast']:.2f}x  (CPU-time ratio "
                  f"{r['cpu'][k] / r['cpu']['symfast']:.2f}x)")
    for k, note in r["notes"].items():
        print(f"  {k}: {note}")
    rate = (fe / t["symfast"]) / (fp / t["symfast plain step"])
    print(f"  eikonal step FLOP rate / plain fused step's: {rate:.2f}; {fe / t['symfast'] / 1e9:.0f} GFLOP/s = "
          f"{fe / t['symfast'] / 1e9 / peak:.2f} of torch.mm 2048^2 ({peak:.0f} GFLOP/s, this run)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    main(ap.parse_args().repeat)
