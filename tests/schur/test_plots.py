"""Schur figures: each draws into the caller's axes / figure, writes its file when asked, leaves the
matplotlib backend alone, and states empty sectors and exactly normal matrices on the panel."""
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from symfast.schur import plots
from symfast.schur.blocks import SUBSETS, subset_name
from symfast.schur.subspace import PREDICTORS, damage_predictors

H = 6
ALPHAS = (0.85, 0.9, 0.95)



def _raw():
    """Ablation rows of two settings x 2 seeds x 3 alphas x 8 subsets; Cayley removes nothing."""
    rng = np.random.default_rng(0)
    rows = []
    for cn in ("orthogonal", "cayley"):
        for seed in (0, 1):
            for a in ALPHAS:
                for sub in SUBSETS:
                    noop = cn == "cayley" or "T_CC" in sub
                    d = 0.0 if noop or not sub else float(rng.uniform(0, 0.2))
                    rows.append(dict(task="flipflop", construction=cn, hidden=H, seed=seed, alpha=a,
                                     subset=subset_name(sub), dfvu=d, rand_dfvu_mean=float(rng.uniform(0, 0.5)),
                                     d_D=d, stabiliser="no-op" if noop else "eps-stabiliser"))
    return pd.DataFrame(rows)


def _facts():
    return pd.DataFrame([dict(task="flipflop", construction=cn, hidden=H, seed=s, n_R=H if cn == "orthogonal" else 2,
                              N_over_T=1e-17 if cn == "cayley" else 0.3) for cn in ("orthogonal", "cayley")
                         for s in (0, 1)])


def _spectra():
    ev = np.exp(1j * np.linspace(0, np.pi, H))
    return {("flipflop", cn, H): [(ev, 1.0), (0.95 * ev, 0.95)] for cn in ("orthogonal", "cayley")}


def _proj():
    rng = np.random.default_rng(1)
    return pd.DataFrame({**{q: rng.uniform(0, 1, 12) for q in PREDICTORS}, "dfvu": rng.uniform(0, 1, 12),
                         "task": ["sine"] * 6 + ["copy"] * 6})


def _T():
    T = np.triu(np.random.default_rng(2).normal(size=(H, H)))
    return {"flipflop / orthogonal, seed 0": (T, 3), "flipflop / cayley, seed 0": (np.diag(np.ones(H)), H)}


def _calls():
    """(name, draw(path, fig) -> figure, layout of the axes it draws into or None for a whole figure)."""
    proj = _proj()
    return [
        ("ablation", lambda p, f, a: plots.plot_ablation(_raw(), _spectra(), 0.9, _facts(), p, fig=f), None),
        ("T", lambda p, f, a: plots.plot_schur_form(_T(), p, axes=a), 2),
        ("stabilisers", lambda p, f, a: plots.plot_stabilisers(_raw(), p, ax=a[0] if a else None), 1),
        ("predictors", lambda p, f, a: plots.plot_predictors(proj, damage_predictors(proj, n_boot=20), p, axes=a),
         len(PREDICTORS) + 1),
        ("loss", lambda p, f, a: plots.plot_loss_curves({"flipflop / orthogonal": [np.linspace(1, 0.1, 50)] * 2}, p,
                                                   ax=a[0] if a else None), 1),
    ]


@pytest.mark.parametrize("k", range(5))
def test_schur_plot_draws_into_given_axes_and_writes_file(tmp_path, no_backend_switch, k):
    name, draw, n = _calls()[k]
    if n is None:
        fig, axes = plt.figure(), None
    else:
        fig, axes = plt.subplots(1, n, squeeze=False)
        axes = list(axes[0])
    try:
        assert draw(None, fig, axes) is fig
        assert any(ax.has_data() or ax.images or ax.patches for ax in fig.axes), name
    finally:
        plt.close(fig)
    path = tmp_path / f"{name}.png"
    draw(str(path), None, None)
    assert path.stat().st_size > 0


def test_ablation_figure_states_no_ops_cuts_and_every_alpha():
    fig = plots.plot_ablation(_raw(), _spectra(), 0.9, _facts())
    try:
        texts = " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
        assert "C sector empty" in texts  # n_R = H
        # Cayley: W normal, every ablation a no-op -> no panels, one line in the title
        title = fig._suptitle.get_text()
        assert "normal to rounding" in title and "every ablation a no-op" in title and "cayley, H = 6" in title
        assert len(fig.axes) == 2 and "cayley" not in " ".join(ax.get_title() for ax in fig.axes)
        assert fig.get_size_inches()[1] * 120 <= 1080  # one screen for the one drawn task
        assert "no-op (block empty) at alpha = 0.85, 0.9, 0.95" in texts
        assert "ρ(W)" in texts and "α ρ, α = 0.9" in texts
        eig = fig.axes[1]
        assert eig.get_xlabel() == "Re λ / ρ(W)" and eig.get_ylabel() == "Im λ / ρ(W)"
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert all(any(f"alpha={a:g}" in s for s in labels) for a in ALPHAS)
        assert any(s.startswith("95% t-interval over seeds") for s in labels)
        ticks = [t.get_fontsize() for ax in fig.axes for t in ax.get_yticklabels() + ax.get_xticklabels()]
        assert min(ticks) >= 8
    finally:
        plt.close(fig)


def test_training_losses_are_kept_in_the_checkpoint(tmp_path):
    from symfast.schur.rnn import TrainConfig, load_checkpoint, make_task, train

    path = str(tmp_path / "m.pt")
    train(make_task("flipflop"), 4, "orthogonal", TrainConfig(epochs=2, batches_per_epoch=3, batch=4), path,
          progress=False)
    losses = load_checkpoint(path)[2]["losses"]
    assert len(losses) == 6 and all(np.isfinite(losses))


def test_stabilisers_use_categorical_colour_blind_safe_colours():
    from matplotlib.colors import to_hex

    r = _raw()
    r = r[r.subset != "full"].copy()
    seeds = sorted(r["seed"].unique())
    r["stabiliser"] = np.where(r["stabiliser"] == "no-op", "no-op",
                               np.where(r["seed"] == seeds[0], "eps-stabiliser", "fragile"))  # 1 of 2 seeds
    first = r.index[r["stabiliser"] != "no-op"][:2]
    r.loc[r.index.isin(first) & (r["seed"] != seeds[0]), "stabiliser"] = "eps-stabiliser"
    fig = plots.plot_stabilisers(r)
    try:
        ax = fig.axes[0]
        legend = {t.get_text(): to_hex(p.get_facecolor()) for t, p in zip(ax.get_legend().get_texts(),
                                                                          ax.get_legend().get_patches())}
        assert set(legend.values()) - {to_hex("0.8")} <= {c.lower() for c in plots.OKABE_ITO + (
            "#F0E442", "#56B4E9", "#0072B2", "#E69F00", "#CC79A7")}
        assert "0.5 of seeds" in legend and "no-op: nothing removed" in legend
        assert len(fig.axes) == 1  # categories in the legend, no continuous colour bar
    finally:
        plt.close(fig)


def test_spectra_and_masses_bars_are_the_seed_means_of_each_block(tmp_path):
    from symfast.schur.plots import plot_spectra_and_masses as spectra_and_masses

    ev = np.array([0.9 + 0.1j, 0.9 - 0.1j, 0.2])
    groups = {"a": [(ev, 0.91, {"T_RR": 0.1, "T_C->R": 0.3, "T_CC": 0.0}),
                    (ev, 0.91, {"T_RR": 0.3, "T_C->R": 0.1, "T_CC": 0.2})],
              "b": [(ev, 0.91, {"T_RR": 0.0, "T_C->R": 0.0, "T_CC": 0.0})]}
    fig = spectra_and_masses(groups, 0.9, path=tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 0
    bars = [ax for ax in fig.axes if ax.patches]
    heights = [[round(p.get_height(), 12) for p in ax.patches] for ax in bars]
    assert heights == [[0.2, 0.2, 0.1], [0.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="at least one model group"):
        spectra_and_masses({}, 0.9)
