"""The adaptive budget's loop and stopping rule, with planted ensembles standing in for training."""
import pandas as pd
import pytest
import torch

import symfast as sf
from symfast.readout import budget
from symfast.nn.fields import Ensemble


def planted_trainer(groups, calls, with_steps=False):
    """A trainer whose members have first layers made of rho(group)-orbits: exact symmetry + seed noise."""

    def train(shapes, pe, seeds, steps, points):
        calls.append(([getattr(s, "name", s) for s in shapes], list(seeds)) + ((steps,) if with_steps else ()))
        w0, names, sds = [], [], []
        for s in shapes:
            name = getattr(s, "name", s)
            rhos = [torch.as_tensor(pe.lift(e)) for e in groups[name]]
            common = torch.randn(16 // len(rhos), pe.dim, generator=torch.Generator().manual_seed(1),
                                 dtype=torch.float64)
            for sd in seeds:
                g = torch.Generator().manual_seed(1000 + sd)
                base = common + 0.1 * torch.randn(common.shape, generator=g, dtype=torch.float64)
                w0.append(torch.cat([base @ r for r in rhos]).T)
                names.append(name)
                sds.append(sd)
        B, H = len(w0), w0[0].shape[1]
        weights = [torch.stack(w0), torch.ones(B, H, 1, dtype=torch.float64)]
        biases = [torch.zeros(B, H, dtype=torch.float64), torch.zeros(B, 1, dtype=torch.float64)]
        return Ensemble(pe, weights, biases, "relu", names, sds, torch.zeros(steps, B), dict(steps=steps))

    return train


def test_settled_rule():
    t = pd.DataFrame(dict(p_adjusted=[0.001, 0.02, 0.1, 0.2, 0.49, 0.51, float("nan")],
                          liftable=[True] * 6 + [False]))
    assert budget.settled(t, 0.05).tolist() == [True, False, False, False, False, True, True]
    assert budget.settled(t.assign(p_adjusted=[0.1, 0.0, 0.5, 0.6, 0.62, 0.7, 0.0]), 0.21).tolist() == \
        [False, True, False, False, False, True, True]  # above 1/2 the upper bound is 3 alpha


def test_tolerance_settles_observed_rows_only_when_resolved():
    t = pd.DataFrame(dict(p_adjusted=[0.9, 0.9, 0.001, 0.9], resolution=[0.01, 0.2, 0.2, float("nan")],
                          liftable=[True, True, True, False], observed=[True, True, False, False]))
    assert budget.settled(t, 0.05).tolist() == [True, True, True, True]
    assert budget.settled(t, 0.05, tolerance=0.05).tolist() == [True, False, True, True]
    assert budget.resolved(t, 0.05).tolist() == [True, False, True, True]  # only an observed row can be unresolved
    assert budget.resolved(t, None).all()


def noisy_trainer(groups):
    """`planted_trainer` plus per-model noise that no symmetry survives: each member is exactly
    symmetric only on average over seeds, as trained fields are."""
    exact = planted_trainer(groups, [])

    def train(shapes, pe, seeds, steps, points):
        ens = exact(shapes, pe, seeds, steps, points)
        g = torch.Generator().manual_seed(7 + seeds[0])
        ens.weights[0] = ens.weights[0] + 0.3 * torch.randn(ens.weights[0].shape, generator=g, dtype=torch.float64)
        return ens

    return train


def test_tolerance_buys_seeds_until_the_resolution_reaches_it():
    groups = {"square": sf.dihedral(4)}
    free = budget.adaptive_readout(["square"], sf.DyadicAxisPE(), start_seeds=6, add_seeds=4, max_seeds=40,
                                   steps=10, start_steps=10, train=noisy_trainer(groups))
    r6 = free.readout.table.query("liftable & observed")["resolution"].max()
    res = budget.adaptive_readout(["square"], sf.DyadicAxisPE(), start_seeds=6, add_seeds=4, max_seeds=40,
                                  steps=10, start_steps=10, tolerance=0.6 * r6, train=noisy_trainer(groups))
    seeds = res.history["seeds"].iloc[-1]
    assert 6 < seeds < 40 and res.history["settled"].iloc[-1]  # 1 / sqrt(seeds): about 3x the seeds
    assert (res.readout.table.query("liftable & observed")["resolution"] <= 0.6 * r6).all()
    capped = budget.adaptive_readout(["square"], sf.DyadicAxisPE(), start_seeds=6, add_seeds=4, max_seeds=10,
                                     steps=10, start_steps=10, tolerance=r6 / 100, train=noisy_trainer(groups))
    assert capped.history["seeds"].iloc[-1] == 10 and not capped.history["settled"].iloc[-1]
    t = capped.readout.table
    unresolved = ~budget.resolved(t, r6 / 100)
    assert unresolved[t["observed"] & (t["element"] != "r0")].all()  # the identity's score is exactly 0: resolved
    assert not unresolved[t["element"] == "r0"].any()


def test_exact_symmetry_settles_in_the_first_round():
    calls = []
    train = planted_trainer({"square": sf.dihedral(4), "triangle": sf.dihedral(2)}, calls)
    res = budget.adaptive_readout(["square", "triangle"], sf.DyadicAxisPE(), start_seeds=6, max_seeds=18,
                                  steps=10, start_steps=10, train=train)
    assert len(calls) == 1 and res.history["settled"].all()
    assert res.model_steps() == 2 * 6 * 10
    assert {g.name for g in res.readout.observed("square")} == {g.name for g in sf.dihedral(4)}


def test_unsettled_shape_gets_more_seeds_until_cap(monkeypatch):
    calls = []
    train = planted_trainer({"square": sf.dihedral(4), "triangle": sf.dihedral(2)}, calls)
    real = budget.settled

    def never_for_triangle(table, alpha, tolerance=None):  # the triangle's evidence stays thin
        return real(table, alpha, tolerance) & (table["shape"] != "triangle")

    monkeypatch.setattr(budget, "settled", never_for_triangle)
    res = budget.adaptive_readout(["square", "triangle"], sf.DyadicAxisPE(), start_seeds=6, add_seeds=4,
                                  max_seeds=15, steps=10, start_steps=10, train=train)
    assert calls == [(["square", "triangle"], list(range(6))), (["triangle"], list(range(6, 10))),
                     (["triangle"], list(range(10, 14))), (["triangle"], [14])]
    assert res.ensemble.shapes.count("square") == 6 and res.ensemble.shapes.count("triangle") == 15
    h = res.history.set_index(["round", "shape"])
    assert h.loc[(0, "square"), "settled"] and not h.loc[(3, "triangle"), "settled"]
    assert res.model_steps() == (6 + 15) * 10


def test_steps_grow_before_seeds(monkeypatch):
    calls = []
    train = planted_trainer({"square": sf.dihedral(4), "triangle": sf.dihedral(2)}, calls, with_steps=True)
    real = budget.settled
    monkeypatch.setattr(budget, "settled", lambda table, alpha, tolerance=None: real(table, alpha, tolerance) & (table["shape"] != "triangle"))
    res = budget.adaptive_readout(["square", "triangle"], sf.DyadicAxisPE(), start_seeds=6, add_seeds=4,
                                  max_seeds=10, steps=30, start_steps=10, add_steps=10, train=train)
    assert calls == [(["square", "triangle"], list(range(6)), 10), (["triangle"], list(range(6)), 20),
                     (["triangle"], list(range(6)), 30), (["triangle"], list(range(6, 10)), 30)]
    assert res.history[["shape", "seeds", "steps"]].values.tolist()[-1] == ["triangle", 10, 30]
    assert res.model_steps() == 6 * 10 + 10 * 30


def test_default_policy_grows_thirds_of_steps_then_seeds_from_first_seed(monkeypatch):
    calls = []
    train = planted_trainer({"square": sf.dihedral(4), "triangle": sf.dihedral(2)}, calls, with_steps=True)
    monkeypatch.setattr(budget, "settled", lambda table, alpha, tolerance=None: table["shape"] == "square")
    budget.adaptive_readout(["square", "triangle"], sf.DyadicAxisPE(), max_seeds=12, steps=30, first_seed=100,
                            train=train)
    assert calls == [(["square", "triangle"], list(range(100, 108)), 10), (["triangle"], list(range(100, 108)), 20),
                     (["triangle"], list(range(100, 108)), 30), (["triangle"], list(range(108, 112)), 30)]


def test_added_steps_continue_the_same_models_exactly(tmp_path, monkeypatch):
    # the square settles at once, the triangle never: it gets every step and then every seed
    monkeypatch.setattr(budget, "settled", lambda table, alpha, tolerance=None: table["shape"] == "square")
    kw = dict(hidden=(16, 16), points=64, backend="reference")
    pe = sf.DyadicAxisPE(3)
    res = budget.adaptive_readout(["square", "triangle"], pe, start_seeds=4, add_seeds=2, max_seeds=6, steps=8,
                                  start_steps=4, add_steps=4, directory=tmp_path, **kw)
    assert res.history.groupby("shape")["steps"].last().to_dict() == {"square": 4, "triangle": 8}
    tri = res.ensemble.subset([i for i, s in enumerate(res.ensemble.shapes) if s == "triangle"])
    assert tri.seeds == [0, 1, 2, 3, 4, 5]
    direct = sf.fit_sdf(["triangle"], pe, seeds=6, steps=8, progress=False, **kw)
    for name, a, b in zip(["W0", "W1", "W2", "b0", "b1", "b2"], tri.weights + tri.biases, direct.weights + direct.biases):
        assert torch.equal(a, b), name
    assert res.model_steps() == 4 * 4 + 6 * 8
    again = budget.adaptive_readout(["square", "triangle"], pe, start_seeds=4, add_seeds=2, max_seeds=6, steps=8,
                                    start_steps=4, add_steps=4, directory=tmp_path, **kw)  # resumes from the files
    assert all(torch.equal(a, b) for a, b in zip(again.ensemble.weights, res.ensemble.weights))


def test_budget_errors():
    with pytest.raises(ValueError, match="start_seeds"):
        budget.adaptive_readout(["square"], sf.DyadicAxisPE(), start_seeds=40, max_seeds=32)
    with pytest.raises(ValueError, match="alpha"):
        budget.adaptive_readout(["square"], sf.DyadicAxisPE(), alpha=2)
    with pytest.raises(ValueError, match="start_steps"):
        budget.adaptive_readout(["square"], sf.DyadicAxisPE(), steps=100, start_steps=200)
    for bad in (0, -1.0, float("nan"), "0.1"):
        with pytest.raises(ValueError, match="tolerance"):
            budget.adaptive_readout(["square"], sf.DyadicAxisPE(), tolerance=bad)


def test_cli_budget_auto_and_alpha(tmp_path, capsys):
    from symfast.cli import main

    out = tmp_path / "ro"
    args = ["readout", "--shapes", "square", "--pe", "dyadic", "--seeds", "6", "--steps", "5", "--points", "64",
            "--hidden", "16", "--sweep", "0", "--out", str(out), "--quiet", "--budget", "auto", "--alpha", "0.1"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "adaptive budget" in captured.err and "model-steps" in captured.err
    table = pd.read_csv(out / "readout.csv")
    assert (table["alpha"] == 0.1).all() and {"p_adjusted", "approx_observed"} <= set(table.columns)
    assert len(list(out.glob("adaptive_dyadic_*/*.ckpt"))) == 1  # kept: a rerun resumes from it
    other = [a if a != "5" else "4" for a in args] + ["--overwrite"]  # --steps 4: other settings, other checkpoints
    assert main(other) == 0
    assert len(list(out.glob("adaptive_dyadic_*"))) == 2
    assert main(["readout", "--out", str(tmp_path / "x"), "--alpha", "1.5"]) == 2
    assert "--alpha must be in (0, 1)" in capsys.readouterr().err


def test_cli_tolerance_marks_unresolved_elements(tmp_path, capsys):
    from symfast.cli import main

    out = tmp_path / "ro"
    args = ["readout", "--shapes", "square", "--pe", "dyadic", "--seeds", "4", "--steps", "5", "--points", "64",
            "--hidden", "16", "--sweep", "0", "--out", str(out), "--quiet", "--budget", "auto", "--tolerance", "1e-6"]
    assert main(args) == 0
    assert "unresolved at tolerance 1e-06" in capsys.readouterr().err
    table = pd.read_csv(out / "readout.csv")
    unresolved = table[~table["resolved"]]
    assert len(unresolved) and unresolved["observed"].all() and (unresolved["resolution"] > 1e-6).all()
    for bad in ("0", "-1", "nan"):
        assert main(args[:-1] + [bad, "--overwrite"]) == 2
        assert "--tolerance must be a positive number" in capsys.readouterr().err
