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
