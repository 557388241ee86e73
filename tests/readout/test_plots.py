"""Readout figures: each draws into the caller's axes, writes its file when asked, and leaves the
matplotlib backend alone (only the CLI selects one)."""
import matplotlib.pyplot as plt
import pytest

from symfast.readout import plots


@pytest.fixture(scope="module")
def result():
    import symfast as sf
    from symfast.readout.readout import readout

    ens = sf.fit_sdf(["square", "triangle"], sf.DyadicAxisPE(), seeds=4, hidden=(8,), steps=3, points=32,
                     progress=False)
    return ens, readout([ens], sweep=8)



def _calls(ens, r):
    """(name, function of (path, axes) -> figure, number of axes it draws into)."""
    n_panels = len(set(zip(r.table["pe"], r.table["observable"])))
    return [
        ("heatmap", lambda p, a: plots.plot_heatmap(r.table, p, axes=a), n_panels),
        ("sweep", lambda p, a: plots.plot_sweep_curves(r.sweep, p, axes=a), r.sweep["pe"].nunique()),
        ("summary", lambda p, a: plots.plot_sweep_summary(r.summary(), p, ax=a[0] if a else None), 1),
        ("fields", lambda p, a: plots.plot_zero_level_sets([ens], p, axes=a), 2),
        ("loss", lambda p, a: plots.plot_loss_curves([ens], p, ax=a[0] if a else None), 1),
    ]


@pytest.mark.parametrize("k", range(5))
def test_readout_plot_draws_into_given_axes_and_writes_file(result, tmp_path, no_backend_switch, k):
    ens, r = result
    name, draw, n = _calls(ens, r)[k]
    fig, axes = plt.subplots(1, n, squeeze=False)
    try:
        assert draw(None, list(axes[0])) is fig
        assert all(ax.has_data() or ax.patches or ax.texts for ax in axes[0]), name
    finally:
        plt.close(fig)
    path = tmp_path / f"{name}.png"
    out = draw(str(path), None)
    assert path.stat().st_size > 0 and out is not fig


def test_heatmap_marks_the_decision_level_and_hidden_true_symmetries(result):
    from matplotlib.patches import Rectangle

    _, r = result
    fig = plots.plot_heatmap(r.table)
    try:
        ax = fig.axes[0]
        hatched = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_hatch()]
        t = r.table[(r.table["pe"] == "dyadic") & (r.table["observable"] == r.table["observable"].iloc[0])]
        assert len(hatched) == int((~t["liftable"].astype(bool)).sum())
        colorbar = fig.axes[-1]
        assert "alpha = 0.05" in colorbar.get_ylabel()
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert "no exact lift (not in G_lift)" in labels and "true symmetry of the shape (G_true)" in labels
    finally:
        plt.close(fig)


def test_sweep_legend_names_the_lift_residual(result):
    _, r = result
    fig = plots.plot_sweep_curves(r.sweep)
    try:
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert any("lift residual" in s for s in labels)
    finally:
        plt.close(fig)


def test_heatmap_rejects_a_table_without_decisions():
    import pandas as pd

    with pytest.raises(ValueError, match="lacks columns"):
        plots.plot_heatmap(pd.DataFrame({"shape": ["square"], "pe": ["dyadic"]}))
