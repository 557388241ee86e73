"""The fused tanh-RNN ensemble training step beside a JAX peer: `jax.vmap` of a `jax.lax.scan`
RNN, `jax.jit`, optax Adam.

Workload F of `bench_rnn_train.py` (the Schur study's flip-flop step): B = 8 models, each its
own batch of S = 64 sequences, T = 100 steps, H = 64, I = O = 3, fp32. Model b:
h_t = tanh(W_b h_{t-1} + U_b x_t) from h_0 = 0, y_t = V_b h_t (no biases, linear readout),
loss_b = sum m (y - targets)^2 / max(sum m, 1) (masked MSE; the mask is all ones here, and
both sides multiply by it). One step, on both sides:

  forward over T steps + loss + gradients of W, U, V (not of x or h_0) + Adam (lr 1e-3,
  betas (0.9, 0.999), eps 1e-8) on each model's W, U, V.

  symfast  `symfast.ops.rnn_train.rnn_train_step` (C++ kernel) for loss and gradients, then one
           `torch.optim.Adam` over the stacked [B, ...] parameters (Adam is elementwise, so
           this is each model's own Adam) -- how `symfast.schur.rnn.train_fused` trains.
  JAX      one model's loss written with `jax.lax.scan` over time (U x_t for all t in one
           product before the scan, as the symfast reference does), `jax.vmap` over the
           stacked parameters and data of the B models, `jax.value_and_grad`, optax Adam,
           the whole step under `jax.jit` (compiled before timing; the warm-up call is not
           timed).

The work is the same on both sides: per model and sequence, T products with W [H, H] and with
U [H, I] and V [O, H] forward; in the backward the transposed product with W per step and the
three weight-gradient reductions -- 3 x the forward's matmul FLOPs,
3 * 2 * B * S * T * (H^2 + H I + H O) = 0.30 GFLOP per step (`bench_rnn_train.step_flops`),
plus the elementwise tanh, loss and Adam (36 k parameters). Neither side computes dx or dh_0.
Before anything is timed, the JAX and symfast first steps are checked to agree: losses and
gradients to 1e-4 relative, Adam-updated parameters to 0.05 lr (see `agreement`).

Threads: symfast and torch run on `SYMFAST_BENCH_THREADS` (1 unless set); XLA's CPU client
is asked for the same count through XLA_FLAGS when jax is imported here first (not when
something imported jax earlier). Process CPU time per step is reported beside wall time, so
a peer that spreads over more cores than asked is seen.

Optional: skipped (asv) or reported as absent (script) when jax/optax are not installed
(`pip install "symfast[bench]"`).

Run as a script: `python benchmarks/benchmarks/bench_rnn_jax_peer.py [--repeat 5]`.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import torch

try:
    from ._skip import raise_if_skipped, skip
    from .bench_rnn_train import F, THREADS, make, step_flops
except ImportError:  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _skip import raise_if_skipped, skip
    from bench_rnn_train import F, THREADS, make, step_flops

from symfast.ops.rnn_train import rnn_train_step

if "jax" not in sys.modules and THREADS == 1:  # one XLA thread, like symfast and torch here
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1").strip()
try:
    import jax
    import jax.numpy as jnp
    import optax
except ImportError:  # optional peer
    jax = None

LR = 1e-3


def jax_rnn_loss(params, x, targets, mask):
    """One model's masked MSE (JAX): params = (W [H, H], U [H, I], V [O, H]); x [S, T, I];
    targets, mask [S, T, O]. Returns a scalar."""
    W, U, V = params
    ux = jnp.einsum("hi,sti->tsh", U, x)  # [T, S, H]: U x_t for every step at once

    def cell(h, u):  # h [S, H] -> tanh(W h + U x_t) for every sequence
        h = jnp.tanh(h @ W.T + u)
        return h, h

    _, hs = jax.lax.scan(cell, jnp.zeros((x.shape[0], W.shape[0]), x.dtype), ux)  # hs [T, S, H]
    e = jnp.einsum("oh,tsh->sto", V, hs) - targets
    return jnp.sum(mask * e * e) / jnp.maximum(jnp.sum(mask), 1.0)


def jax_step(W, U, V, x, targets, mask, lr: float = LR):
    """A jitted JAX training step over B models, run on their own copy of the parameters.

    Args:
        W: [B, H, H], U: [B, H, I], V: [B, O, H] initial parameters (torch or numpy).
        x: [B, S, T, I]; targets, mask: [B, S, T, O].

    Returns:
        run(): one step (losses, gradients and Adam update, blocking until done); returns
        (losses [B], grads (dW, dU, dV), params after the update (W, U, V)) as numpy arrays.
    """
    opt = optax.adam(lr)

    def total_loss(params, xs, ys, ms):  # sum of per-model losses: each model gets its own gradient
        losses = jax.vmap(jax_rnn_loss)(params, xs, ys, ms)
        return losses.sum(), losses

    @jax.jit
    def step(params, state, xs, ys, ms):
        (_, losses), grads = jax.value_and_grad(total_loss, has_aux=True)(params, xs, ys, ms)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, losses, grads

    arr = lambda t: jnp.asarray(np.asarray(t, dtype=np.float32))  # noqa: E731
    params = tuple(arr(t) for t in (W, U, V))
    box = {"params": params, "state": opt.init(params)}
    data = tuple(arr(t) for t in (x, targets, mask))

    def run():
        box["params"], box["state"], losses, grads = step(box["params"], box["state"], *data)
        losses.block_until_ready()
        return np.array(losses), tuple(np.array(g) for g in grads), tuple(np.array(p) for p in box["params"])
    return run


def symfast_step(W, U, V, x, targets, mask, lr: float = LR):
    """The symfast step on its own copy of the parameters: fused loss + gradients, then torch Adam.

    Returns:
        run(): one step; returns (losses [B], grads (dW, dU, dV), params (W, U, V)), torch tensors.
    """
    params = [t.detach().clone().requires_grad_() for t in (W, U, V)]
    opt = torch.optim.Adam(params, lr=lr)

    def run():
        st = rnn_train_step(*[p.detach() for p in params], x, targets, mask, backend="cpu")
        params[0].grad, params[1].grad, params[2].grad = st.dW, st.dU, st.dV
        opt.step()
        return st.loss, (st.dW, st.dU, st.dV), tuple(p.detach() for p in params)
    return run


def agreement_of(W, U, V, x, targets, mask) -> dict:
    """How far the first JAX and symfast steps from these weights and data are apart.

    Args: as `jax_step` (torch tensors, float32).

    Returns:
        {"grad": max relative error over the losses and the gradients dW, dU, dV (each relative
        to its own max magnitude), "update": max difference of the Adam-updated parameters in
        units of the learning rate}. Adam's first update is lr * g / (|g| + eps) elementwise,
        so a gradient entry near eps = 1e-8 turns float32 rounding of g into an update
        difference of a few percent of lr; the updates are compared in units of lr for that reason.
    """
    args = (W, U, V, x, targets, mask)
    ref, jx = symfast_step(*args)(), jax_step(*args)()
    grad = 0.0
    for r, j in zip([ref[0], *ref[1]], [jx[0], *jx[1]]):
        r = r.double().numpy()
        grad = max(grad, float(np.abs(r - j).max() / max(np.abs(r).max(), 1e-30)))
    update = max(float(np.abs(r.double().numpy() - j).max()) / LR for r, j in zip(ref[2], jx[2]))
    return {"grad": grad, "update": update}


def agreement(**sizes) -> dict:
    """`agreement_of` on the benchmark's data (`bench_rnn_train.make`) at these sizes."""
    return agreement_of(*make(**sizes))


def compare(repeat: int = 5, **sizes) -> dict:
    """Best wall and process CPU time per step for symfast and JAX, interleaved in one run."""
    sizes = sizes or F
    err = agreement(**sizes)
    if err["grad"] > 1e-4 or err["update"] > 0.05:
        raise AssertionError(f"JAX and symfast first steps differ: losses/gradients max rel. err {err['grad']:.2e}, "
                             f"Adam updates {err['update']:.2e} lr")
    fns = {"symfast": symfast_step(*make(**sizes)), "jax": jax_step(*make(**sizes))}
    for fn in fns.values():  # warm-up: compilation (JAX), lazy init and Adam state (torch)
        fn()
    wall = {k: float("inf") for k in fns}
    cpu = dict(wall)
    for _ in range(repeat):
        for k, fn in fns.items():
            t, c = time.perf_counter(), time.process_time()
            fn()
            wall[k] = min(wall[k], time.perf_counter() - t)
            cpu[k] = min(cpu[k], time.process_time() - c)
    return {"wall": wall, "cpu": cpu, "agreement": err, "gflop": step_flops(**sizes) / 1e9}


class RnnTrainJaxPeerF:
    """Workload F: symfast's speed-up over the JAX peer (> 1: symfast faster), one run, interleaved."""

    timeout = 900

    def setup_cache(self):  # once per class: both tracks read the same interleaved run
        if jax is None:
            return skip("jax/optax not installed (pip install 'symfast[bench]')")
        prev = torch.get_num_threads()
        torch.set_num_threads(THREADS)
        try:
            return compare()
        finally:
            torch.set_num_threads(prev)

    def setup(self, r):
        raise_if_skipped(r)

    def track_speedup_vs_jax(self, r):
        return r["wall"]["jax"] / r["wall"]["symfast"]

    track_speedup_vs_jax.unit = "x"

    def track_speedup_vs_jax_cpu_time(self, r):
        return r["cpu"]["jax"] / r["cpu"]["symfast"]

    track_speedup_vs_jax_cpu_time.unit = "x"


def main(repeat: int) -> dict | None:
    if jax is None:
        print("jax/optax not installed: pip install 'symfast[bench]'")
        return None
    torch.set_num_threads(THREADS)
    isa = "AVX-512" if "avx512f" in open("/proc/cpuinfo").read() else "no AVX-512"
    print(f"workload F {F}, torch {torch.__version__} ({THREADS} thread(s)), jax {jax.__version__} "
          f"({jax.devices()[0].platform}), {isa}, {time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, "
          f"load avg {os.getloadavg()[0]:.1f}, best of {repeat} interleaved")
    r = compare(repeat)
    a = r["agreement"]
    print(f"first step agrees: losses and gradients max rel. err {a['grad']:.1e}, "
          f"Adam-updated parameters within {a['update']:.1e} lr")
    print(f"{'implementation':<34}{'wall ms/step':>14}{'CPU ms/step':>14}{'GFLOP/s (wall)':>16}")
    names = {"symfast": "symfast fused step + torch Adam", "jax": "JAX jit(vmap(scan)), optax Adam"}
    for k in ("symfast", "jax"):
        w, c = r["wall"][k], r["cpu"][k]
        print(f"{names[k]:<34}{w * 1e3:>14.2f}{c * 1e3:>14.2f}{r['gflop'] / w:>16.1f}")
    print(f"speed-up vs JAX: {r['wall']['jax'] / r['wall']['symfast']:.2f}x wall, "
          f"{r['cpu']['jax'] / r['cpu']['symfast']:.2f}x CPU time (goal >= 5)")
    return r


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="interleaved repeats; the best is kept")
    main(ap.parse_args().repeat)
