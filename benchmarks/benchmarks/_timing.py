"""Side-by-side timing helpers: ratios are measured within one run, interleaved,
so drift on a shared machine affects both sides alike."""
from __future__ import annotations

import time


def best_time(fn, repeat: int = 5, number: int = 1) -> float:
    """Best wall time of `number` calls, over `repeat` repeats (seconds per call)."""
    fn()  # warm up (caches, lazy init, compilation)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - t) / number)
    return best


def ratio(reference, fast, repeat: int = 5, number: int = 1) -> float:
    """reference time / fast time, alternating the two so both see the same machine state."""
    ref = fst = float("inf")
    reference()
    fast()
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            reference()
        ref = min(ref, (time.perf_counter() - t) / number)
        t = time.perf_counter()
        for _ in range(number):
            fast()
        fst = min(fst, (time.perf_counter() - t) / number)
    return ref / fst
