"""gram_scores / gram: symfast vs the batched-einsum PyTorch reference.

M = 4096 models, d = 48, H = 64 (float64, as the readout uses), lift sets:
- sweep_paired: 360 rotations (1 degree), `sweep_lifts` (inverse = transposed lift: products shared);
- sweep_independent: 360 rotations, each fitted on its own as `symfast.readout.readout` does (no sharing);
- d4d6_<pe>: the readout's 16 candidates D4 ∪ D6 (exact lifts where liftable, Procrustes otherwise);
- exact_<pe>: only the exact (block-permutation) lifts among them (gather path).
Lifts are cached in the temp directory (fitting 360 Procrustes lifts takes a minute).
Under asv the sweeps keep every SWEEP_STRIDE-th rotation (45 of 360) and GramScoresRatio runs at
RATIO_M = 256 models, unless SYMFAST_BENCH_FULL=1 (all 360 rotations, RATIO_M = 1024; `_grid.py`).
Run as a script for a table: `PYTHONPATH=. python benchmarks/benchmarks/bench_gram_scores.py [--quick]`
(--quick: every 10th sweep element, M = 1024); `--gram`: only `gram`, at the shapes in GRAM_SHAPES,
float64 and float32, with torch's thread count and with one thread.
"""
import os
import sys
import tempfile
import time

import numpy as np
import torch

import symfast as sf
from symfast.groups import union
from symfast.ops.gram import gram
from symfast.ops.gram import reference as gram_reference
from symfast.ops.gram_scores import gram_scores, reference
from symfast.readout.observables import sweep_lifts

try:
    from ._grid import pick
except ImportError:  # run as a script
    from _grid import pick

M, D, H, NUM = 4096, 48, 64, 360
RATIO_M = pick(256, 1024)  # models in GramScoresRatio
SWEEP_STRIDE = pick(8, 1)  # every k-th rotation of a sweep in the asv benchmarks
GRAM_SHAPES = [(4096, 48, 64), (256, 64, 64), (32, 64, 64)]  # (M, d, H): the readout's, two small batches
LIFT_SETS = ["sweep_paired", "sweep_independent", "d4d6_triaxis", "d4d6_dyadic", "exact_triaxis", "exact_dyadic"]


def _pe(name):
    return {"triaxis": sf.TriAxisPE, "dyadic": sf.DyadicAxisPE}[name]()


def _fit(pe, g):
    r = pe.lift(g)
    return r if r is not None else pe.lift_lstsq(g, orthogonal=True)[0]


def _build(name):
    if name == "sweep_paired":
        return sweep_lifts(sf.TriAxisPE(), NUM)
    if name == "sweep_independent":
        pe = sf.TriAxisPE()
        return torch.tensor(np.stack([_fit(pe, g) for g in sf.rotation_sweep(NUM)]))
    kind, pe_name = name.split("_")
    pe = _pe(pe_name)
    els = list(union([sf.dihedral(4), sf.dihedral(6)]))
    if kind == "exact":
        return torch.tensor(np.stack([r for r in (pe.lift(g) for g in els) if r is not None]))
    return torch.tensor(np.stack([_fit(pe, g) for g in els]))


def lifts(name, stride=1):
    path = os.path.join(tempfile.gettempdir(), f"symfast_bench_gram_scores_{name}_{NUM}.pt")
    if os.path.exists(path):
        rho = torch.load(path)
    else:
        rho = _build(name).to(torch.float64).contiguous()
        torch.save(rho, path)
    return rho[::stride].contiguous() if name.startswith("sweep") else rho


def observables(m=M):
    w = torch.randn(m, D, H, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return w, gram_reference.gram(w)


def timed_ratio(ref_fn, fast_fn, ref_repeat=1, fast_repeat=3):
    """(reference seconds, symfast seconds): best of `repeat` calls each, interleaved, fast warmed up."""
    fast_fn()
    tr = tf = float("inf")
    for i in range(max(ref_repeat, fast_repeat)):
        if i < ref_repeat:
            t = time.perf_counter()
            ref_fn()
            tr = min(tr, time.perf_counter() - t)
        if i < fast_repeat:
            t = time.perf_counter()
            fast_fn()
            tf = min(tf, time.perf_counter() - t)
    return tr, tf


class GramScores:
    params = (["reference", "symfast"], LIFT_SETS)
    param_names = ["impl", "lifts"]
    timeout = 1800

    def setup(self, impl, name):
        if impl == "reference" and name.startswith("sweep"):
            # a minute or more per call; its time is in GramScoresRatio, measured beside symfast's
            raise NotImplementedError("the reference on a 360-rotation sweep is timed by GramScoresRatio")
        _, self.phi = observables()
        self.rho = lifts(name, SWEEP_STRIDE)
        self.time_scores(impl, name)  # warm-up

    def time_scores(self, impl, name):
        if impl == "reference":
            reference.gram_scores(self.phi, self.rho)
        else:
            gram_scores(self.phi, self.rho, backend="cpu")


class GramScoresRatio:
    """reference / symfast time, measured side by side in one run. Both sides are linear in the
    number of models and of lifts, so the ratio is taken at M = RATIO_M on every SWEEP_STRIDE-th
    rotation: at M = 4096 the reference takes over ten minutes per 360-rotation sweep on 2 cores
    (the script's table runs M = 4096 and all 360)."""
    params = LIFT_SETS
    param_names = ["lifts"]
    timeout = 1800

    def setup(self, name):
        _, self.phi = observables(RATIO_M)
        self.rho = lifts(name, SWEEP_STRIDE)

    def track_speedup(self, name):
        tr, tf = timed_ratio(lambda: reference.gram_scores(self.phi, self.rho),
                             lambda: gram_scores(self.phi, self.rho, backend="cpu"))
        return tr / tf

    track_speedup.unit = "x"


class GramRatio:
    def setup(self):
        self.w, _ = observables()

    def track_speedup(self):
        tr, tf = timed_ratio(lambda: gram_reference.gram(self.w), lambda: gram(self.w, backend="cpu"), 3, 3)
        return tr / tf

    track_speedup.unit = "x"


class GramShapesRatio:
    """gram: reference / symfast at GRAM_SHAPES in float64 and float32, side by side."""
    params = ([f"{m}x{d}x{h}" for m, d, h in GRAM_SHAPES], ["float64", "float32"])
    param_names = ["shape", "dtype"]

    def setup(self, shape, dtype):
        m, d, h = (int(x) for x in shape.split("x"))
        self.w = torch.randn(m, d, h, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(
            getattr(torch, dtype))

    def track_speedup(self, shape, dtype):
        repeat = 5 if self.w.shape[0] > 1000 else 50
        tr, tf = timed_ratio(lambda: gram_reference.gram(self.w), lambda: gram(self.w, backend="cpu"), repeat, repeat)
        return tr / tf

    track_speedup.unit = "x"


def gram_table():
    """gram at GRAM_SHAPES, float64 and float32, torch's thread count and one thread."""
    threads = torch.get_num_threads()
    print(f"{'gram M, d, H':<20}{'dtype':>8}{'threads':>8}{'reference s':>14}{'symfast s':>12}{'ratio':>9}")
    try:
        for n in dict.fromkeys((threads, 1)):
            torch.set_num_threads(n)
            for dtype in (torch.float64, torch.float32):
                for m, d, h in GRAM_SHAPES:
                    w = torch.randn(m, d, h, generator=torch.Generator().manual_seed(0), dtype=torch.float64).to(dtype)
                    repeat = 7 if m > 1000 else 50
                    tr, tf = timed_ratio(lambda: gram_reference.gram(w), lambda: gram(w, backend="cpu"), repeat, repeat)
                    print(f"{f'{m}, {d}, {h}':<20}{str(dtype)[6:]:>8}{n:>8}{tr:>14.5f}{tf:>12.5f}{tr / tf:>8.2f}x",
                          flush=True)
    finally:
        torch.set_num_threads(threads)


def main(argv):
    if "--gram" in argv:
        return gram_table()
    quick = "--quick" in argv
    stride, m = (10, 1024) if quick else (1, M)
    w, phi = observables(m)
    print(f"M = {m}, d = {D}, H = {H}, float64, {torch.get_num_threads()} threads"
          f"{' (quick: every 10th sweep element)' if quick else ''}")
    print(f"{'op':<31}{'E':>5}{'reference s':>14}{'symfast s':>12}{'ratio':>9}")
    tr, tf = timed_ratio(lambda: gram_reference.gram(w), lambda: gram(w, backend="cpu"), 3, 3)
    print(f"{'gram':<31}{'':>5}{tr:>14.3f}{tf:>12.3f}{tr / tf:>8.2f}x")
    for name in LIFT_SETS:
        rho = lifts(name, stride)
        ref = reference.gram_scores(phi[:4], rho)
        err = (gram_scores(phi[:4], rho, backend="cpu") - ref).abs().max().item()
        tr, tf = timed_ratio(lambda: reference.gram_scores(phi, rho), lambda: gram_scores(phi, rho, backend="cpu"))
        print(f"{'gram_scores ' + name:<31}{rho.shape[0]:>5}{tr:>14.3f}{tf:>12.3f}{tr / tf:>8.2f}x"
              f"   (max |diff| {err:.1e})", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
