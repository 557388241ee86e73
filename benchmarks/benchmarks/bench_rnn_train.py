"""Fused tanh-RNN ensemble training step: symfast vs torch.nn.RNN one model at a time and a
batched torch.bmm loop.

Workload F (the Schur study's flip-flop step): B = 8 models, each its own batch of S = 64
sequences, T = 100 steps, H = 64, I = O = 3, fp32, masked MSE. One step = forward + loss +
gradients of W, U, V (Adam is the same elementwise update for every implementation and is
left out). Implementations:
  torch_rnn_loop     torch.nn.RNN + a linear readout, autograd, the B models one after another
                     (how the study trained before)
  torch_bmm_batched  all B models in one batched torch.bmm time loop, autograd
                     (`symfast.ops.rnn_train.reference.rnn_train_loss`)
  symfast            `symfast.ops.rnn_train.rnn_train_step` (the C++ kernel)
All at the same torch thread count (1 unless SYMFAST_BENCH_THREADS is set; the study trains
with 1). Ratios are measured side by side in one run (interleaved, best of a few repeats), and
the machine's torch.mm rate (2048^2, same threads) is measured in the same run.

Run as a script for a table: `python benchmarks/benchmarks/bench_rnn_train.py [--quick]`.
"""
from __future__ import annotations

import json
import os
import sys
import time

import torch

try:
    from symfast import _ext
except ImportError:  # run as a script from a source checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from symfast import _ext
from symfast.ops.rnn_train import reference, rnn_train_step

try:
    from ._timing import best_time, ratio
except ImportError:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _timing import best_time, ratio

F = dict(B=8, S=64, T=100, H=64, I=3, O=3)
THREADS = int(os.environ.get("SYMFAST_BENCH_THREADS", "1"))


def step_flops(B, S, T, H, I, O):
    """Dense FLOPs of one step: 3 x the forward's matmul FLOPs (the usual convention)."""
    return 3 * 2 * B * S * T * (H * H + H * I + H * O)


def make(B, S, T, H, I, O, seed=0):
    g = torch.Generator().manual_seed(seed)
    W = torch.linalg.qr(torch.randn(B, H, H, generator=g, dtype=torch.float64))[0].float()
    U = (torch.rand(B, H, I, generator=g) * 2 - 1) / H ** 0.5
    V = (torch.rand(B, O, H, generator=g) * 2 - 1) / H ** 0.5
    x = torch.where(torch.rand(B, S, T, I, generator=g) < 0.05, torch.sign(torch.randn(B, S, T, I, generator=g)), 0.0)
    y = torch.sign(torch.randn(B, S, T, O, generator=g))
    m = torch.ones(B, S, T, O)
    return W, U, V, x, y, m


def implementations(W, U, V, x, y, m):
    """name -> zero-argument function computing one step's losses and gradients."""
    B, H, I = U.shape
    rnns = []
    for b in range(B):
        r = torch.nn.RNN(I, H, nonlinearity="tanh", bias=False, batch_first=True)
        with torch.no_grad():
            r.weight_hh_l0.copy_(W[b])
            r.weight_ih_l0.copy_(U[b])
        rnns.append((r, V[b].clone().requires_grad_()))

    def torch_rnn_loop():
        for b, (r, Vb) in enumerate(rnns):
            r.zero_grad(set_to_none=True)
            Vb.grad = None
            hs, _ = r(x[b])
            loss = (((hs @ Vb.T - y[b]) ** 2) * m[b]).sum() / m[b].sum().clamp_min(1)
            loss.backward()

    leaves = [t.clone().requires_grad_() for t in (W, U, V)]

    def torch_bmm_batched():
        for t in leaves:
            t.grad = None
        reference.rnn_train_loss(*leaves, x, y, m).sum().backward()

    def symfast():
        rnn_train_step(W, U, V, x, y, m, backend="cpu")

    return {"torch_rnn_loop": torch_rnn_loop, "torch_bmm_batched": torch_bmm_batched, "symfast": symfast}


def best_cpu_time(fn, repeat: int) -> float:
    """Best process CPU time of one call (steadier than wall time on a loaded machine, 1 thread)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return best


def matmul_gflops(n: int = 2048, repeat: int = 3) -> float:
    """fp32 torch.mm rate of this machine now (n x n, the current torch thread count)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n ** 3 / best_time(lambda: a @ b, repeat) / 1e9


class _Threads:
    def setup(self, *args):
        self._prev = torch.get_num_threads()
        torch.set_num_threads(THREADS)

    def teardown(self, *args):
        torch.set_num_threads(self._prev)


class TrainStepF(_Threads):
    """Time of one workload-F step per implementation."""

    params = ["torch_rnn_loop", "torch_bmm_batched", "symfast"]
    param_names = ["implementation"]
    timeout = 600

    def setup(self, implementation):
        super().setup()
        self.fn = implementations(*make(**F))[implementation]
        self.fn()

    def time_step(self, implementation):
        self.fn()


class TrainStepFRatios:
    """Ratios measured within one run: speed-ups per model-step and fractions of torch.mm's rate.
    asv runs `setup_cache` once for the class, so the five tracks read one measurement."""

    timeout = 900

    def setup_cache(self):
        prev = torch.get_num_threads()
        torch.set_num_threads(THREADS)
        try:
            impl = implementations(*make(**F))
            op = step_flops(**F) / best_time(impl["symfast"], 5) / 1e9
            mm = max(matmul_gflops(), matmul_gflops())
            return {"speedup_vs_torch_rnn_loop": ratio(impl["torch_rnn_loop"], impl["symfast"], repeat=3),
                    "speedup_vs_torch_bmm_batched": ratio(impl["torch_bmm_batched"], impl["symfast"], repeat=3),
                    "symfast_gflops": op, "torch_mm_gflops": mm, "fraction_of_torch_mm": op / mm}
        finally:
            torch.set_num_threads(prev)

    def track_speedup_vs_torch_rnn_loop(self, r):
        return r["speedup_vs_torch_rnn_loop"]

    track_speedup_vs_torch_rnn_loop.unit = "x"

    def track_speedup_vs_torch_bmm_batched(self, r):
        return r["speedup_vs_torch_bmm_batched"]

    track_speedup_vs_torch_bmm_batched.unit = "x"

    def track_symfast_gflops(self, r):
        return r["symfast_gflops"]

    track_symfast_gflops.unit = "GFLOP/s"

    def track_torch_mm_gflops(self, r):
        return r["torch_mm_gflops"]

    track_torch_mm_gflops.unit = "GFLOP/s"

    def track_fraction_of_torch_mm(self, r):
        return r["fraction_of_torch_mm"]

    track_fraction_of_torch_mm.unit = "fraction"


def main(quick: bool = False) -> dict:
    torch.set_num_threads(THREADS)
    repeat = 3 if quick else 7
    impl = implementations(*make(**F))
    fl = step_flops(**F)
    times = {k: best_time(f, repeat) for k, f in impl.items()}
    cpu = {k: best_cpu_time(f, repeat) for k, f in impl.items()}
    out = {
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "threads": THREADS,
        "load_avg": os.getloadavg()[0],
        "isa": _ext.require_cpp().rnn_train_isa("auto"),
        "workload": F,
        "ms": {k: 1e3 * v for k, v in times.items()},
        "ms_per_model_step": {k: 1e3 * v / F["B"] for k, v in times.items()},
        "gflops": {k: fl / v / 1e9 for k, v in times.items()},
        "cpu_ms": {k: 1e3 * v for k, v in cpu.items()},
        "cpu_speedup_vs_torch_rnn_loop": cpu["torch_rnn_loop"] / cpu["symfast"],
        "cpu_speedup_vs_torch_bmm_batched": cpu["torch_bmm_batched"] / cpu["symfast"],
        "speedup_vs_torch_rnn_loop": ratio(impl["torch_rnn_loop"], impl["symfast"], repeat=repeat),
        "speedup_vs_torch_bmm_batched": ratio(impl["torch_bmm_batched"], impl["symfast"], repeat=repeat),
    }
    mm = max(matmul_gflops(repeat=repeat), matmul_gflops(repeat=repeat))
    op = fl / best_time(impl["symfast"], repeat) / 1e9
    out.update(torch_mm_gflops=mm, symfast_gflops=op, fraction_of_torch_mm=op / mm)
    return out


if __name__ == "__main__":
    res = main(quick="--quick" in sys.argv)
    w = max(len(k) for k in res["ms"])
    print(f"workload F {res['workload']}, {res['threads']} thread(s), ISA {res['isa']}, {res['date_utc']} UTC, "
          f"load average {res['load_avg']:.1f}")
    for k in res["ms"]:
        print(f"  {k:<{w}}  {res['ms'][k]:8.2f} ms/step  {res['ms_per_model_step'][k]:7.3f} ms/model-step  "
              f"{res['gflops'][k]:6.1f} GFLOP/s")
    print(f"  speed-up vs torch.nn.RNN loop  {res['speedup_vs_torch_rnn_loop']:.2f}x wall, "
          f"{res['cpu_speedup_vs_torch_rnn_loop']:.2f}x CPU time (goal >= 6)")
    print(f"  speed-up vs batched bmm loop   {res['speedup_vs_torch_bmm_batched']:.2f}x wall, "
          f"{res['cpu_speedup_vs_torch_bmm_batched']:.2f}x CPU time (goal >= 2)")
    print(f"  torch.mm 2048^2 {res['torch_mm_gflops']:.1f} GFLOP/s; symfast {res['symfast_gflops']:.1f} GFLOP/s = "
          f"{res['fraction_of_torch_mm']:.2f} of it (goal >= 0.35)")
    print(json.dumps(res))
