"""Matching observable for many SDF MLPs at once: symfast.matching_scores vs the per-model reference.

M first layers W1 [M, 64, 48] (TriAxisPE, d = 48), the 12 D6 lifts: M x 12 signed-permutation
matchings of 64 neurons. Reference: one model and one lift at a time (scipy cdist + SciPy
linear_sum_assignment). symfast: all cost matrices from one batched matmul, all assignments in one
C++ call (OpenMP over problems). Two weight regimes: "random" (hard assignments) and "near"
(a planted D6-symmetric first layer plus 10% noise: most rows find their partner at once).
Weights are float32 like trained ensembles; the reference computes in float64, symfast's
GEMMs in float32 (the assignment in float64), agreeing to ~1e-6.
"""
import os
import sys

import numpy as np
import torch

try:
    import symfast as sf
except ImportError:  # run as a script from a source checkout
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))
    import symfast as sf
from symfast.ops.matching import assign
from symfast.ops.matching.reference import matching_scores_reference
from symfast.layerwise.planted import planted_mlp

try:
    from ._timing import ratio
except ImportError:  # run as a script
    from _timing import ratio


def _data(m: int, regime: str):
    pe = sf.TriAxisPE()
    lifts = [pe.lift(g) for g in sf.dihedral(6)]
    rng = np.random.default_rng(0)
    if regime == "random":
        W = rng.normal(size=(m, 64, pe.dim))
    else:
        gens = [pe.lift(sf.rotation(np.pi / 3)), pe.lift(sf.reflection(0.0))]
        W = []
        for s in range(min(m, 8)):
            net, _ = planted_mlp([pe.dim, 64, 1], gens, activation="tanh", seed=s, n_char=16)
            W.append(net.layers[0][0])
        W = np.stack([W[i % len(W)] for i in range(m)])
        W = W + 0.1 * W.std() * rng.normal(size=W.shape)
    return W.astype(np.float32), lifts  # trained ensembles are float32


class Matching:
    params = (["reference", "symfast"], [64, 512], ["random", "near"])
    param_names = ["impl", "models", "weights"]
    timeout = 300

    def setup(self, impl, models, weights):
        W, lifts = _data(models, weights)
        self.fn = (lambda: matching_scores_reference(W, lifts)) if impl == "reference" else (
            lambda: sf.matching_scores(torch.as_tensor(W), lifts, layout="HD"))
        self.fn()  # warm-up: op registration and lazy initialisation are not the timed work

    def time_matching(self, impl, models, weights):
        self.fn()


class MatchingRatio:
    """reference / symfast time for the whole observable, measured side by side in one run."""
    params = ([64, 512], ["random", "near"])
    param_names = ["models", "weights"]
    timeout = 600

    def setup(self, models, weights):
        self.W, self.lifts = _data(models, weights)
        self.Wt = torch.as_tensor(self.W)

    def track_speedup(self, models, weights):
        return ratio(lambda: matching_scores_reference(self.W, self.lifts),
                     lambda: sf.matching_scores(self.Wt, self.lifts, layout="HD"), repeat=3)

    track_speedup.unit = "x"


class AssignmentRatio:
    """SciPy linear_sum_assignment per problem vs symfast's batched C++ assignment (costs given)."""
    params = ([1024], ["random", "near"])
    param_names = ["problems", "weights"]

    def setup(self, problems, weights):
        from symfast.ops.matching import cost_matrices

        W, lifts = _data(max(problems // 12, 1), weights)
        Wt = torch.as_tensor(W, dtype=torch.float64)
        R = torch.as_tensor(np.stack(lifts))
        A = (Wt[:, None] @ R[None]).reshape(-1, *Wt.shape[1:])
        B = Wt[:, None].expand(-1, len(lifts), -1, -1).reshape(A.shape)
        self.cost = cost_matrices(A, B, "sign")[0].numpy()[:problems].copy()

    def track_speedup(self, problems, weights):
        if not sf.cpp_available():
            return float("nan")
        return ratio(lambda: assign(self.cost, "reference"), lambda: assign(self.cost, "cpu"), repeat=3)

    track_speedup.unit = "x"


if __name__ == "__main__":
    import time

    if len(sys.argv) > 1:  # optional thread count: python bench_matching.py 1
        torch.set_num_threads(int(sys.argv[1]))
    print(f"threads: {torch.get_num_threads()}, C++ extension: {sf.cpp_available()}")
    for weights in ["random", "near"]:
        for models in MatchingRatio.params[0]:
            b = MatchingRatio()
            b.setup(models, weights)
            t = time.perf_counter()
            sf.matching_scores(b.Wt, b.lifts, layout="HD")
            fast_s = time.perf_counter() - t
            r = b.track_speedup(models, weights)
            print(f"matching_scores M={models:4d} x 12 lifts, {weights:6s}: symfast {r:5.2f}x "
                  f"faster than per-model reference ({fast_s * 1e3:.0f} ms for symfast)")
        a = AssignmentRatio()
        a.setup(1024, weights)
        print(f"assignment only, 1024 problems 64x64, {weights:6s}: C++ {a.track_speedup(1024, weights):5.2f}x "
              f"faster than SciPy per problem")
