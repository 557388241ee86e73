"""Fused PE+MLP training step: symfast vs eager and torch.compile'd reference.

Workload W: B = 256 models, N = 2048 points each, DyadicAxisPE (d = 48),
48 -> 64 -> 64 -> 1 ReLU, fp32; one step = forward + per-model MSE + backward + Adam
(PyTorch's fused Adam, the same optimizer for every implementation).
Workload W3D: the same sizes with 3D points (x [B, N, 3], a sphere SDF) and 3 x 8 dyadic axis
frequencies 2^k pi e_i (d = 48 again, so the step's FLOPs equal W's); its 2D step is timed in
the same interleaved run, giving the 3D / 2D FLOP-rate ratio.
Ratios are measured side by side in one run (interleaved, best of a few repeats).

Peak memory: tracemalloc does not see torch's allocator, so each implementation runs two
training steps in a fresh subprocess and reports the growth of the process's peak RSS
(VmHWM from /proc/self/status; ru_maxrss elsewhere) over the peak after setup; the saved-tensor bytes of the
reference's autograd graph are also counted exactly (saved_tensors_hooks).

Run as a script for a table: `python benchmarks/benchmarks/bench_fourier_mlp.py [--quick] [--plot scaling.png]`
(--plot: the scaling curves as a PNG).
"""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import torch

try:
    import symfast as sf
except ImportError:  # run as a script from a source checkout
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    import symfast as sf
from symfast.ops.fourier_mlp import fourier_mlp, fourier_mlp_train_step, reference

try:
    from ._grid import pick
    from ._skip import raise_if_skipped, skip
except ImportError:  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from _grid import pick
    from _skip import raise_if_skipped, skip


def matmul_peak_gflops(n: int = 2048, repeat: int = 5) -> float:
    """fp32 matmul rate of this machine (torch.mm, n x n, all torch threads), measured now:
    the "peak" the fused step is compared with (machines differ, so every run measures
    its own)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    a @ b
    return 2 * n ** 3 / best_of(lambda: a @ b, repeat) / 1e9


W = dict(B=256, N=2048, H=64, depth=2)


def step_flops(B, N, d, H, depth):
    """Dense FLOPs of forward + backward (3 x forward matmul FLOPs, the usual convention)."""
    fwd = 2 * (d * H + (depth - 1) * H * H + H)
    return 3 * fwd * B * N


def executed_flops(B, N, d, H, depth):
    """FLOPs the fused step executes: the convention less the gradient to the input features,
    which the step does not need (no dx); the fraction of peak is computed from these."""
    return step_flops(B, N, d, H, depth) - 2 * d * H * B * N


def axis_encoding_3d(K: int = 8):
    """Dyadic axis frequencies 2^k pi e_i in 3D (k < K, i < 3; zero phases): d = 6K features."""
    f = torch.cat([2.0 ** k * math.pi * torch.eye(3, dtype=torch.float64) for k in range(K)])
    return SimpleNamespace(frequencies=f, phases=torch.zeros(len(f), dtype=torch.float64), dim=2 * len(f))


def make(B, N, H, depth, seed=0, dim=2):
    """(pe, x [B, N, dim], targets [B, N], weights, biases): 2D DyadicAxisPE(12) or 3D 3 x 8 axis
    frequencies (d = 48 either way), targets the circle / sphere SDF."""
    g = torch.Generator().manual_seed(seed)
    pe = sf.DyadicAxisPE(12) if dim == 2 else axis_encoding_3d(8)
    dims = [pe.dim] + [H] * depth + [1]
    ws = [((torch.rand(B, a, b, generator=g) * 2 - 1) / a ** 0.5).requires_grad_()
          for a, b in zip(dims[:-1], dims[1:])]
    bs = [((torch.rand(B, b, generator=g) * 2 - 1) / a ** 0.5).requires_grad_() for a, b in zip(dims[:-1], dims[1:])]
    x = torch.rand(B, N, dim, generator=g) * 2 - 1
    t = x.norm(dim=-1) - 0.5  # circle / sphere SDF
    return pe, x, t, ws, bs


def make_step(impl, pe, x, t, ws, bs):
    """One training step (forward + loss + backward + Adam) for impl in reference/compile/symfast."""
    f, p = pe.frequencies.float(), pe.phases.float()
    params = ws + bs
    opt = torch.optim.Adam(params, lr=1e-3, fused=True)  # the same optimizer for every impl
    L = len(ws)
    if impl == "symfast":
        def step():
            loss, gw, gb = fourier_mlp_train_step(x, t, f, p, ws, bs, "relu")
            for q, g in zip(params, gw + gb):
                q.grad = g
            opt.step()
            return loss
        return step

    def loss_fn(x, t, *params):
        return reference.mse_loss(reference.fourier_mlp(x, f, p, list(params[:L]), list(params[L:]), "relu"), t).sum()

    fn = torch.compile(loss_fn) if impl == "compile" else loss_fn

    def step():
        opt.zero_grad(set_to_none=True)
        loss = fn(x, t, *params)
        loss.backward()
        opt.step()
        return loss
    return step


def best_of(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        s = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - s)
    return best


CPU_TIMES: dict = {}  # best process CPU time per implementation of the last side_by_side call


def side_by_side(fns: dict, repeat=5) -> dict:
    """Best wall time per implementation, interleaved so machine drift hits all alike.

    Also records the best process CPU time (all threads) in CPU_TIMES: on a machine shared
    with other jobs the CPU-time ratio is the steadier estimate of the uncontended one.
    """
    for fn in fns.values():
        fn()
        fn()  # warm-up (compilation, caches)
    best = {k: float("inf") for k in fns}
    CPU_TIMES.clear()
    CPU_TIMES.update(best)
    for _ in range(repeat):
        for k, fn in fns.items():
            c = time.process_time()
            best[k] = min(best[k], best_of(fn, 1))
            CPU_TIMES[k] = min(CPU_TIMES[k], time.process_time() - c)
    return best


class _Measured:
    """Every track of a class reads one measurement: asv runs `setup_cache` once per class (not once
    per track), so the tracks agree with each other and `--quick` pays for compilation once."""

    def setup(self, run):
        raise_if_skipped(run)
        self.t, self.cpu, self.peak = run["t"], run["cpu"], run.get("peak")


class TrainStepW(_Measured):
    """Workload W: ratios vs eager and torch.compile, GFLOP/s and fraction of peak (one run)."""
    timeout = 900

    def setup_cache(self):
        if not sf.cpp_available():
            return skip("symfast._C not built")
        args = make(**W)
        t = side_by_side({k: make_step(k, *args) for k in ("reference", "compile", "symfast")})
        return {"t": t, "cpu": dict(CPU_TIMES), "peak": matmul_peak_gflops()}

    def track_speedup_vs_eager(self, run):
        return self.t["reference"] / self.t["symfast"]

    def track_speedup_vs_compile(self, run):
        return self.t["compile"] / self.t["symfast"]

    def track_symfast_gflops(self, run):
        return step_flops(W["B"], W["N"], 48, W["H"], W["depth"]) / self.t["symfast"] / 1e9

    def track_fraction_of_peak(self, run):
        """Executed FLOP/s of the symfast step over this machine's measured matmul rate."""
        return executed_flops(W["B"], W["N"], 48, W["H"], W["depth"]) / self.t["symfast"] / 1e9 / self.peak

    track_speedup_vs_eager.unit = track_speedup_vs_compile.unit = "x"
    track_symfast_gflops.unit = "GFLOP/s"
    track_fraction_of_peak.unit = "fraction"


class TrainStepW3D(_Measured):
    """Workload W3D (W with 3D points, d = 48): ratios vs eager and torch.compile, and the 3D step's
    FLOP rate over the 2D step's (W), all interleaved in one run."""
    timeout = 900

    def setup_cache(self):
        if not sf.cpp_available():
            return skip("symfast._C not built")
        a3, a2 = make(**W, dim=3), make(**W, dim=2)
        fns = {k: make_step(k, *a3) for k in ("reference", "compile", "symfast")}
        fns["symfast 2D"] = make_step("symfast", *a2)
        return {"t": side_by_side(fns), "cpu": dict(CPU_TIMES)}

    def track_speedup_vs_eager(self, run):
        return self.t["reference"] / self.t["symfast"]

    def track_speedup_vs_compile(self, run):
        return self.t["compile"] / self.t["symfast"]

    def track_rate_3d_over_2d(self, run):
        """3D step GFLOP/s over the 2D step's (same FLOPs by construction, so a time ratio)."""
        return self.t["symfast 2D"] / self.t["symfast"]

    track_speedup_vs_eager.unit = track_speedup_vs_compile.unit = "x"
    track_rate_3d_over_2d.unit = "fraction"


_MEM_SCRIPT = """
import resource, sys, json, torch
sys.path.insert(0, {here!r})
sys.path.append({root!r})  # the source tree only as a last resort: an installed symfast (with _C) wins
from bench_fourier_mlp import make, make_step, W

def peak():  # VmHWM is per address space (ru_maxrss survives fork+exec from a big parent)
    try:
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) for l in f if l.startswith("VmHWM"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
args = make(**W)
step = make_step({impl!r}, *args)
base = peak()
step(); step()
print(json.dumps((peak() - base) * 1024))
"""


def peak_step_bytes(impl: str) -> int:
    """Growth of peak RSS during two training steps, in a fresh process."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    code = _MEM_SCRIPT.format(here=here, root=root, impl=impl)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(json.loads(out.stdout.strip().splitlines()[-1]))


def reference_saved_bytes() -> int:
    """Bytes of tensors the reference's autograd graph saves for backward at workload W."""
    pe, x, t, ws, bs = make(**W)
    seen, total = set(), 0

    def pack(tensor):
        nonlocal total
        key = (tensor.untyped_storage().data_ptr(), tensor.untyped_storage().nbytes())
        if key not in seen:
            seen.add(key)
            total += key[1]
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda v: v):
        reference.mse_loss(reference.fourier_mlp(x, pe.frequencies.float(), pe.phases.float(), ws, bs, "relu"),
                           t).sum()
    return total


class TrainStepMemory:
    """Peak extra memory of one training step (bytes) and symfast / reference ratio."""
    timeout = 600

    def track_peak_ratio_symfast_over_reference(self):
        return peak_step_bytes("symfast") / peak_step_bytes("reference")

    def track_reference_saved_tensor_bytes(self):
        return reference_saved_bytes()

    track_peak_ratio_symfast_over_reference.unit = "fraction"
    track_reference_saved_tensor_bytes.unit = "bytes"


class InferenceGrid:
    """Forward only: a 512 x 512 grid evaluated by all B models (reference chunked to fit memory).
    B = 256 (minutes per reference call on 2 cores) only under SYMFAST_BENCH_FULL=1."""
    params = [pick([16], [16, 256])]
    param_names = ["B"]
    timeout = 900

    def setup(self, B):
        pe, _, _, ws, bs = make(B, 1, 64, 2)
        lin = torch.linspace(-1, 1, 512)
        self.grid = torch.stack(torch.meshgrid(lin, lin, indexing="ij"), -1).reshape(-1, 2).contiguous()
        self.args = (pe.frequencies.float(), pe.phases.float(), [w.detach() for w in ws], [b.detach() for b in bs])

    def _reference(self):
        f, p, ws, bs = self.args
        with torch.no_grad():
            return torch.cat([reference.fourier_mlp(c, f, p, ws, bs, "relu") for c in self.grid.split(16384)], 1)

    def _symfast(self):
        f, p, ws, bs = self.args
        with torch.no_grad():
            return fourier_mlp(self.grid, f, p, ws, bs, "relu")

    def track_speedup(self, B):
        t = side_by_side({"reference": self._reference, "symfast": self._symfast}, repeat=1)
        return t["reference"] / t["symfast"]

    track_speedup.unit = "x"


class TrainStepScaling:
    """symfast training step (no Adam) over B x N x H, two hidden layers: 8 settings spanning 64x in
    B x N and 4x in H, each at most a few seconds a step on 2 cores (so `asv run --quick` finishes)."""
    params = [[16, 256], [2048, 16384], [32, 128]]
    param_names = ["B", "N", "H"]
    timeout = 300

    def setup(self, B, N, H):
        pe, x, t, ws, bs = make(B, N, H, 2)
        self.call = lambda: fourier_mlp_train_step(x, t, pe.frequencies, pe.phases, ws, bs, "relu")
        self.call()  # warm-up: the first call pays for lazy initialisation, not the kernel

    def time_train_step(self, B, N, H):
        self.call()


def main(quick: bool = False, plot: str | None = None):
    print(f"threads: {torch.get_num_threads()}, isa: {sf._ext.require_cpp().fourier_mlp_isa('auto')}")
    b = TrainStepW()
    run = b.setup_cache()
    b.setup(run)
    fl = step_flops(W["B"], W["N"], 48, W["H"], W["depth"])
    print("Workload W (B=256, N=2048, 48->64->64->1 ReLU, fp32, step incl. Adam), best of 5 interleaved; "
          "GFLOP/s by the 3 x forward convention:")
    for k, v in b.t.items():
        pts = W["B"] * W["N"] / v / 1e6
        print(f"  {k:10s} {v * 1e3:8.1f} ms  {fl / v / 1e9:6.1f} GFLOP/s  {pts:5.2f} M model-pts/s"
              f"   (CPU time {b.cpu[k] * 1e3:8.1f} ms)")
    print(f"  CPU-time ratios: {b.cpu['reference'] / b.cpu['symfast']:.2f}x vs eager, "
          f"{b.cpu['compile'] / b.cpu['symfast']:.2f}x vs torch.compile")
    print(f"  symfast speedup: {b.track_speedup_vs_eager(None):.2f}x vs eager, {b.track_speedup_vs_compile(None):.2f}x vs "
          f"torch.compile")
    print(f"  executed {executed_flops(W['B'], W['N'], 48, W['H'], W['depth']) / b.t['symfast'] / 1e9:.0f} GFLOP/s "
          f"(no dx GEMM) = {b.track_fraction_of_peak(None):.2f} of this machine's {b.peak:.0f} GFLOP/s fp32 matmul "
          f"rate (torch.mm 2048^2, measured in this run)")
    b3 = TrainStepW3D()
    b3.setup(b3.setup_cache())
    print("Workload W3D (W with 3D points, 3 x 8 axis frequencies, d = 48: same FLOPs), best of 5 interleaved:")
    for k, v in b3.t.items():
        print(f"  {k:10s} {v * 1e3:8.1f} ms  {fl / v / 1e9:6.1f} GFLOP/s   (CPU time {b3.cpu[k] * 1e3:8.1f} ms)")
    print(f"  symfast 3D speedup: {b3.track_speedup_vs_eager(None):.2f}x vs eager, {b3.track_speedup_vs_compile(None):.2f}x "
          f"vs torch.compile (CPU-time ratios {b3.cpu['reference'] / b3.cpu['symfast']:.2f}x, "
          f"{b3.cpu['compile'] / b3.cpu['symfast']:.2f}x)")
    print(f"  3D step GFLOP/s vs 2D step GFLOP/s: {fl / b3.t['symfast'] / 1e9:.1f} vs "
          f"{fl / b3.t['symfast 2D'] / 1e9:.1f} = {b3.track_rate_3d_over_2d(None):.3f} "
          f"(CPU time: {b3.cpu['symfast 2D'] / b3.cpu['symfast']:.3f})")
    ps, pr = peak_step_bytes("symfast"), peak_step_bytes("reference")
    ratio = f"{ps / pr:.3f}" if pr > 0 else "n/a"
    print(f"Peak RSS growth of a step: symfast {ps / 2**20:.0f} MiB, reference {pr / 2**20:.0f} MiB "
          f"(ratio {ratio}); reference autograd saves {reference_saved_bytes() / 2**20:.0f} MiB")
    for B in InferenceGrid.params[0][: 1 if quick else 2]:
        g = InferenceGrid()
        g.setup(B)
        t = side_by_side({"reference": g._reference, "symfast": g._symfast}, repeat=1)
        print(f"Inference 512x512 grid, B={B}: reference {t['reference']:.2f} s, symfast {t['symfast']:.2f} s "
              f"({t['reference'] / t['symfast']:.2f}x)")
    print("Scaling (symfast train step, no Adam; one factor varied around W):")
    grid = [(B, 2048, 64) for B in (16, 256, 1024)] + [(256, N, 64) for N in (256, 16384)] + \
        [(256, 2048, H) for H in (32, 128)]
    rates = {}
    for B, N, H in grid[: 3 if quick else None]:
        s = TrainStepScaling()
        s.setup(B, N, H)
        s.call()
        c = time.process_time()
        dt = best_of(s.call, 3)
        cpu = (time.process_time() - c) / 3
        rates[B, N, H] = step_flops(B, N, 48, H, 2) / dt / 1e9
        print(f"  B={B:5d} N={N:6d} H={H:4d}: {dt * 1e3:9.1f} ms  {rates[B, N, H]:6.1f} "
              f"GFLOP/s  ({cpu / (B * N) * 1e9:5.0f} CPU-ns per model-point)")
    if plot:
        plot_scaling(rates, b.peak, plot)
        print(f"scaling curves: {plot}")


def plot_scaling(rates: dict, peak: float, path: str) -> None:
    """One panel per factor (B, N, H), the other two held at W; GFLOP/s by the convention."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.4), sharey=True)
    for ax, (k, name) in zip(axes, enumerate("BNH")):
        pts = sorted((key[k], r) for key, r in rates.items()
                     if all(key[j] == (W["B"], W["N"], W["H"])[j] for j in range(3) if j != k))
        ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label="symfast fused step")
        ax.axhline(peak, color="gray", ls="--", label="torch.mm 2048$^2$ (this run)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(name)
        ax.set_title(f"{name} varied, others at W")
    axes[0].set_ylabel("GFLOP/s (3 x forward)")
    axes[0].set_ylim(bottom=0)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(quick="--quick" in args, plot=args[args.index("--plot") + 1] if "--plot" in args else None)
