"""3D readout figures say what they show: the heatmap is coloured by p-value like the 2D one, its 144
columns grouped into O_h / I_h blocks and classes with readable labels; a fitted field with no zero
crossing is flagged; the 2D sweep draws the decision threshold on shared y axes."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402

import symfast as sf  # noqa: E402
from symfast.plotting import SMALL  # noqa: E402
from symfast.readout import plots3d  # noqa: E402
from symfast.readout.readout import default_candidates  # noqa: E402


def _table3d() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rows = []
    for pe in ("dyadic3", "ico6"):
        for shape in ("cube", "icosahedron"):
            for g in default_candidates(3):
                p = float(rng.uniform(1e-7, 1))
                rows.append(dict(shape=shape, pe=pe, observable="gram", element=g.name, liftable=bool(rng.random() < .5),
                                 true_symmetry=bool(rng.random() < .3), observed=p > 0.05, p_adjusted=p,
                                 p_adjusted_all=p, score=1 - p, alpha=0.05))
    return pd.DataFrame(rows)


def test_heatmap3d_groups_columns_by_block_and_class_with_p_value_colours():
    fig = plots3d.plot_score_heatmap(_table3d())
    try:
        ax = fig.axes[0]
        labels = [t.get_text() for t in ax.get_xticklabels()]
        assert len(labels) < 40  # class labels, not 144 element names
        assert sum(int(lab.rsplit("(", 1)[1].rstrip(")")) for lab in labels) == 144
        assert all(t.get_fontsize() >= SMALL for t in ax.get_xticklabels() + ax.get_yticklabels())
        assert ax.get_xlabel().startswith("candidate element g")
        blocks = [t.get_text() for t in ax.texts]
        assert blocks == ["O_h ∩ I_h", "O_h only", "I_h only"]
        assert "Holm-adjusted p-value" in fig.axes[-1].get_ylabel()  # the colour bar, as in 2D
        assert sum(line.get_color() == "k" for line in ax.lines) == 2  # two block separators
    finally:
        plt.close(fig)


def test_fitted_fields_without_zero_crossing_are_flagged():
    ens = sf.fit_sdf(["cube"], sf.DyadicAxisPE(K=2, dim=3), seeds=1, hidden=(8,), steps=1, points=16, progress=False)
    with torch.no_grad():
        ens.biases[-1] += 100.0  # f > 0 everywhere: no surface to draw
    fig = plots3d.plot_sdf_slices(ens, resolution=12)
    try:
        texts = [t.get_text() for ax in fig.axes for t in ax.texts]
        assert texts == ["no zero crossing\n(f > 0 everywhere)"]  # the fitted panel only, not the true one
    finally:
        plt.close(fig)

    from symfast.readout.plots import plot_zero_level_sets as zero_level_sets

    ens2 = sf.fit_sdf(["square"], sf.DyadicAxisPE(K=2), seeds=2, hidden=(4,), steps=1, points=16, progress=False)
    with torch.no_grad():
        ens2.biases[-1][0] -= 100.0  # member 1: f < 0 everywhere
    fig = zero_level_sets([ens2], members=2, resolution=33)
    try:
        texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
        assert "member 1: no zero crossing (f < 0)" in texts
    finally:
        plt.close(fig)


def test_sweep_draws_the_decision_threshold_on_shared_axes():
    ens = sf.fit_sdf(["square", "triangle"], sf.DyadicAxisPE(K=2), seeds=4, hidden=(8,), steps=3, points=32,
                     progress=False)
    ens2 = sf.fit_sdf(["square", "triangle"], sf.TriAxisPE(K=2), seeds=4, hidden=(8,), steps=3, points=32,
                      progress=False)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = sf.readout([ens, ens2], sweep=12)
    fig = r.plot_sweep()
    try:
        panels = [ax for ax in fig.axes if ax.get_title()]
        assert len(panels) == 2 and panels[0].get_ylim() == panels[1].get_ylim()
        dotted = [line for ax in panels for line in ax.lines if line.get_linestyle() == ":"]
        assert len(dotted) == 4  # one threshold per (encoding, shape)
        legend = " ".join(t.get_text() for ax in panels for t in ax.get_legend().get_texts())
        assert "decision threshold" in legend
    finally:
        plt.close(fig)
