"""Readout decision error rates at a small budget, on a calibration grid with known truth.

Seven shapes (regular, rotated, rectangular, irregular) x two encodings (TriAxisPE and the
five-axis MultiAxisPE, the hardest pair measured) x 8 seeds x 300 steps x 1024 points,
read out at alpha = 0.05; about a minute on an idle 2-core machine. Tracked: the per-element
false-positive and false-negative rates and the fraction of (shape, encoding) cells with a
missed true symmetry (what alpha bounds). The full table over budgets is in
docs/guide/readout-decisions.md.
"""
import symfast as sf
from symfast.readout import calibration

try:
    from ._grid import FULL
    from ._skip import raise_if_skipped, skip
except ImportError:  # run as a script
    from _grid import FULL
    from _skip import raise_if_skipped, skip


class CalibrationSmallBudget:
    timeout = 600

    def setup_cache(self):
        scored = calibration.run([(8, 300)], encodings=[sf.TriAxisPE(), sf.MultiAxisPE(5, K=5)], points=1024)
        return calibration.rates(scored).iloc[0].to_dict()

    def track_false_positive_rate(self, rates):
        return rates["FPR"]

    def track_false_negative_rate(self, rates):
        return rates["FNR"]

    def track_cells_with_missed_symmetry(self, rates):
        return rates["cells_with_FN"]

    track_false_positive_rate.unit = track_false_negative_rate.unit = "fraction"
    track_cells_with_missed_symmetry.unit = "fraction"


class AdaptiveVsFixedSmallBudget:
    """The adaptive budget's default policy against the fixed 16 seeds x 300 steps on the same
    models: TriAxisPE and MultiAxisPE(5) on the 7 shapes, one run per encoding read at 100, 200 and
    300 steps, the adaptive side replaying its members. Tracked side by side: FPR, FNR, and the
    training compute as a share of the fixed budget's (model-steps). A few minutes on 2 cores;
    the default-budget version is `benchmarks/calibration_default_budget.py` (about 45 min).
    Runs only under SYMFAST_BENCH_FULL=1 (it trains 2 x 7 x 16 models)."""
    params = ["fixed", "adaptive"]
    param_names = ["budget"]
    timeout = 1800

    def setup_cache(self):
        if not FULL:
            return skip("runs under SYMFAST_BENCH_FULL=1 only (trains 2 x 7 x 16 models)")
        import pandas as pd

        from symfast.readout import budget

        shapes = calibration.grid_shapes()
        cands = calibration.candidates_for(shapes)
        scored = {"fixed": [], "adaptive": []}
        model_steps = 0
        for pe in (sf.TriAxisPE(), sf.MultiAxisPE(5, K=5)):
            snaps = calibration.train_snapshots(shapes, pe, seeds=16, steps=[100, 200, 300], points=1024)
            scored["fixed"].append(calibration.score_pool(snaps[300], shapes, [16]))
            res = budget.adaptive_readout(shapes, pe, max_seeds=16, steps=300, points=1024, candidates=cands,
                                          train=calibration.replay_trainer(snaps))
            scored["adaptive"].append(calibration.score_table(res.readout.table, shapes)
                                      .assign(seeds="auto", steps=300, points=1024))
            model_steps += res.model_steps()
        out = {k: calibration.rates(pd.concat(v)).iloc[0].to_dict() for k, v in scored.items()}
        out["fixed"]["compute"] = 1.0
        out["adaptive"]["compute"] = model_steps / (2 * len(shapes) * 16 * 300)
        return out

    def setup(self, r, which):
        raise_if_skipped(r)

    def track_false_positive_rate(self, r, which):
        return r[which]["FPR"]

    def track_false_negative_rate(self, r, which):
        return r[which]["FNR"]

    def track_compute_share(self, r, which):
        return r[which]["compute"]

    track_false_positive_rate.unit = track_false_negative_rate.unit = track_compute_share.unit = "fraction"
