"""The fused training step beside a JAX peer: `jax.jit` + `jax.vmap`, optax Adam.

Workload W: B = 256 models, N = 2048 points each, DyadicAxisPE(12) (d = 48),
48 -> 64 -> 64 -> 1 ReLU, fp32; one step = forward + per-model MSE against a target +
backward + Adam. The JAX step is written the way JAX users batch neural fields: one model's
loss, `jax.vmap` over the stacked parameters and points, `jax.value_and_grad`, optax Adam,
the whole step under `jax.jit`. The same weights, points and targets are used by all three
implementations (symfast fused step, eager PyTorch, JAX), and the first-step losses are
checked to agree before anything is timed.

Optional: skipped (asv) or reported as absent (script) when jax/optax are not installed
(`pip install "symfast[bench]"`).

Run as a script: `python benchmarks/benchmarks/bench_jax_peer.py [--repeat 5]`.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys

import numpy as np
import torch

try:
    from ._skip import raise_if_skipped, skip
    from .bench_fourier_mlp import CPU_TIMES, W, make, make_step, side_by_side
except ImportError:  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _skip import raise_if_skipped, skip
    from bench_fourier_mlp import CPU_TIMES, W, make, make_step, side_by_side

try:
    import jax
    import jax.numpy as jnp
    import optax
except ImportError:  # optional peer
    jax = None


def jax_step(pe, x, t, ws, bs, lr: float = 1e-3):
    """A jitted JAX training step over B models, and a function returning its last loss.

    Args:
        pe: the Fourier encoding (frequencies [m, 2], phases [m]).
        x: [B, N, 2] points per model; t: [B, N] targets.
        ws, bs: weights [B, fan_in, fan_out] and biases [B, fan_out] per layer (torch).
    """
    freq = jnp.asarray(pe.frequencies.float().numpy())
    phase = jnp.asarray(pe.phases.float().numpy())

    def encode(xi):  # [N, 2] -> [N, 2m], sin/cos interleaved per frequency
        u = xi @ freq.T + phase
        return jnp.stack([jnp.sin(u), jnp.cos(u)], axis=-1).reshape(xi.shape[0], -1)

    def model_loss(params, xi, ti):  # one model: MSE over its N points
        h = encode(xi)
        for k, (w, b) in enumerate(params):
            h = h @ w + b
            if k < len(params) - 1:
                h = jax.nn.relu(h)
        return jnp.mean((h[:, 0] - ti) ** 2)

    def total_loss(params, xs, ts):  # sum of per-model losses: each model gets its own gradient
        losses = jax.vmap(model_loss)(params, xs, ts)
        return losses.sum(), losses

    opt = optax.adam(lr)

    @jax.jit
    def step(params, state, xs, ts):
        (_, losses), grads = jax.value_and_grad(total_loss, has_aux=True)(params, xs, ts)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, losses

    params = [(jnp.asarray(w.detach().numpy()), jnp.asarray(b.detach().numpy())) for w, b in zip(ws, bs)]
    box = {"params": params, "state": opt.init(params), "losses": None}
    xs, ts = jnp.asarray(x.numpy()), jnp.asarray(t.numpy())

    def run():
        box["params"], box["state"], box["losses"] = step(box["params"], box["state"], xs, ts)
        box["losses"].block_until_ready()
        return box["losses"]
    return run


def first_losses(impl, **sizes):
    """Per-model losses [B] of the first step ("symfast" or "jax"), from fresh identical weights."""
    args = make(**sizes)
    if impl == "jax":
        return torch.from_numpy(np.array(jax_step(*args)()))  # a writable copy
    return make_step("symfast", *args)().detach()


def compare(repeat: int = 5, **sizes) -> dict:
    """Best wall and CPU time per step for symfast, eager PyTorch and JAX, interleaved in one run."""
    sizes = sizes or W
    ref = first_losses("symfast", **sizes)
    jx = first_losses("jax", **sizes)
    err = ((ref - jx).abs().max() / ref.abs().max()).item()
    if err > 1e-4:
        raise AssertionError(f"JAX and symfast first-step losses differ: max rel. err {err:.2e}")
    fns = {k: make_step(k, *make(**sizes)) for k in ("symfast", "reference")}
    fns["jax"] = jax_step(*make(**sizes))
    wall = side_by_side(fns, repeat)
    return {"wall": wall, "cpu": dict(CPU_TIMES), "loss_rel_err": err}


class JaxPeerW:
    """Workload W: symfast's speed-up over the JAX peer and over eager PyTorch (one run)."""
    timeout = 900

    def setup_cache(self):  # once per class: both tracks read the same interleaved run
        return skip("jax/optax not installed (pip install 'symfast[bench]')") if jax is None else compare()

    def setup(self, r):
        raise_if_skipped(r)

    def track_speedup_vs_jax(self, r):
        return r["wall"]["jax"] / r["wall"]["symfast"]

    def track_speedup_vs_eager(self, r):
        return r["wall"]["reference"] / r["wall"]["symfast"]


def main(repeat: int) -> None:
    if jax is None:
        print("jax/optax not installed: pip install 'symfast[bench]'")
        return
    isa = "AVX-512" if "avx512f" in open("/proc/cpuinfo").read() else "no AVX-512"
    print(f"workload W {W}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"jax {jax.__version__} ({jax.devices()[0].platform}), {platform.machine()} {isa}, "
          f"load avg {os.getloadavg()[0]:.1f}, best of {repeat}")
    r = compare(repeat)
    print(f"first-step losses agree: max rel. err {r['loss_rel_err']:.1e}")
    print(f"{'implementation':<28}{'wall ms/step':>14}{'CPU ms/step':>14}{'vs symfast (wall)':>20}")
    names = {"symfast": "symfast fused step", "jax": "JAX jit+vmap, optax Adam", "reference": "eager PyTorch"}
    for k in ("symfast", "jax", "reference"):
        w, c = r["wall"][k], r["cpu"][k]
        print(f"{names[k]:<28}{w * 1e3:>14.1f}{c * 1e3:>14.1f}{w / r['wall']['symfast']:>19.2f}x")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="interleaved repeats; the best is kept")
    main(ap.parse_args().repeat)
