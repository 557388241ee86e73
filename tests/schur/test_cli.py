"""`symfast schur` end to end on a tiny budget, checkpoint reuse, and bad input."""
import os

import pandas as pd

from symfast.cli import main


def test_schur_cli_tiny(tmp_path, capsys, monkeypatch):
    calls = _spy_train_many(monkeypatch)
    out = str(tmp_path / "run")
    argv = ["schur", "--task", "copy", "--construction", "orthogonal,cayley", "--seeds", "2", "--hidden", "8",
            "--epochs", "1", "--batches", "2", "--batch", "4", "--n-eval", "8", "--n-random", "2", "--alphas", "0.95",
            "--n-orders", "2", "--alpha-grid", "0.85,0.95", "--out", out, "--no-progress", "--include-unconverged",
            "--recipe", "paper"]
    assert main(argv) == 0
    assert [(c[0], sorted(zip(c[3], c[1]))) for c in calls] == [  # one call for the task's 4 models
        ("copy", [("cayley", 0), ("cayley", 1), ("orthogonal", 0), ("orthogonal", 1)])]
    for f in ["schur_ablation_raw.csv", "schur_ablation_summary.csv", "schur_models.csv", "schur_ablation.png",
              "schur_subspace.csv", "schur_paper_comparison.csv", "schur_stabilisers.png", "schur_subspace.png",
              "schur_T.png", "schur_loss.png"]:
        assert os.path.getsize(os.path.join(out, f)) > 0, f
    raw = pd.read_csv(os.path.join(out, "schur_ablation_raw.csv"))
    assert len(raw) == 2 * 2 * 2 * 8  # constructions x seeds x alphas x subsets
    cay = raw[raw.construction == "cayley"]
    assert (cay["removed_rel_T"] < 1e-12).all() and (cay["dfvu"].abs() < 1e-6).all()
    text = capsys.readouterr().out
    assert "Cayley: W orthogonal => normal" in text and "dFVU raw [95% CI]" in text and "normalised sens." in text
    assert "eps-stabilisers" in text and "subspace or coupling" in text and "comparison with the paper" in text
    assert {"d_D", "stabiliser", "converged", "dfvu_order_min", "dfvu_order_max", "order_dependent", "dfvu_inv",
            "replay_acc_inv", "rand_pattern_dfvu_mean", "rand_outside_dfvu_mean", "noop_tol"} <= set(raw.columns)
    assert (cay["stabiliser"] == "no-op").all() and (cay["stabiliser_inv"] == "no-op").all()
    assert "over orderings min / med / max" in text and "stability over the alpha grid" in text
    for f in ["schur_near_cut.csv", "schur_alpha_grid.csv"]:
        assert os.path.exists(os.path.join(out, f)), f
    assert not os.path.exists(os.path.join(out, "schur_paper_replicates.csv"))  # no seeds beyond the paper's 3
    cmp = pd.read_csv(os.path.join(out, "schur_paper_comparison.csv"))
    assert (cmp[cmp.setting.str.contains("cayley")]["verdict"] == "by construction").all()
    strict = pd.read_csv(os.path.join(out, "schur_paper_targets.csv"))  # every row, read on the paper's targets
    assert len(strict) == len(cmp) and list(strict["verdict"]) == list(cmp["verdict"])
    assert "as good as the paper's full models" in text
    ck = sorted(os.listdir(os.path.join(out, "ckpt")))
    assert len(ck) == 4
    mtime = os.path.getmtime(os.path.join(out, "ckpt", ck[0]))
    calls.clear()
    assert main(argv) == 0  # second run reuses the checkpoints
    assert calls == []
    assert os.path.getmtime(os.path.join(out, "ckpt", ck[0])) == mtime


def test_schur_cli_excludes_unconverged_and_paper_defaults(tmp_path, capsys):
    from symfast.cli import build_parser
    args = build_parser().parse_args(["schur"])
    # budget flags unset: the recipe's (default: converge for the tanh family); --recipe paper is the paper's
    assert (args.recipe, args.epochs, args.batches, args.batch, args.lr, args.clip) == (None,) * 6
    assert (args.seeds, args.hidden, args.construction) == (3, "paper", "paper")
    assert build_parser().parse_args(["schur", "--recipe", "paper"]).recipe == "paper"
    out = str(tmp_path / "run")
    assert main(["schur", "--task", "copy", "--construction", "orthogonal", "--seeds", "1", "--hidden", "6",
                 "--epochs", "1", "--batches", "1", "--batch", "4", "--n-eval", "8", "--n-random", "0",
                 "--alphas", "", "--out", out, "--no-progress", "--recipe", "paper", "--fixed-points", "3"]) == 0
    text = capsys.readouterr().out
    assert "clip off" in text and "no converged model: nothing to tabulate" in text
    # --fixed-points on the tanh family: one row per model, each block's linearisation beside its dFVU
    fp = pd.read_csv(os.path.join(out, "schur_fixed_points.csv"))
    raw = pd.read_csv(os.path.join(out, "schur_ablation_raw.csv")).set_index("subset")
    assert len(fp) == 1 and fp.gate.tolist() == ["W"] and fp.n_fixed.iloc[0] + fp.n_slow.iloc[0] >= 1
    for b in ("T_RR", "T_C->R", "T_CC"):
        assert fp[f"dfvu_{b}"].iloc[0] == raw.loc[f"-{b}", "dfvu"]
        assert {f"rho_Jab_{b}", f"n_slow_Jab_{b}", f"align_Jab_{b}"} <= set(fp.columns)
    assert "each block removed alone, the ablated map linearised" in text
    assert "settings: recipe paper" in text and "epochs 30 -> 1 (flag), batches_per_epoch 128 -> 1 (flag)" in text
    models = pd.read_csv(os.path.join(out, "schur_models.csv"))
    assert not models["converged"].any() and (models["replay_acc"] < 0.99).all()


def test_schur_cli_bad_input(tmp_path, capsys):
    assert main(["schur", "--task", "xor", "--out", str(tmp_path)]) == 2
    assert "unknown task 'xor'" in capsys.readouterr().err
    assert main(["schur", "--alpha", "1.5", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--seeds", "0", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--construction", "lstm", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--hidden", "a,b", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--clip", "0", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--epsilon", "-1", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--n-orders", "-1", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--alpha-grid", "0.9:0.8:0.01", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--near-cut", "0", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--fixed-points", "-1", "--out", str(tmp_path)]) == 2
    assert main(["schur", "--recipe", "fast", "--out", str(tmp_path)]) == 2
    assert "unknown --recipe 'fast'; expected one of paper, converge" in capsys.readouterr().err
    assert main(["schur", "--task", "copy", "--epochs", "2", "--out", str(tmp_path)]) == 2  # below its curriculum
    assert "curriculum must be in 0..epochs (2)" in capsys.readouterr().err


def test_schur_cli_prints_the_recipes_deviations(tmp_path, capsys):
    """The converge recipe's deviations from the paper's budget are printed per task and construction;
    an explicit flag wins over the recipe and is marked."""
    from symfast.schur.recipes import deviations
    out = str(tmp_path / "run")
    assert main(["schur", "--task", "flipflop", "--seeds", "1", "--hidden", "4", "--epochs", "1", "--batches", "1",
                 "--batch", "2", "--n-eval", "4", "--n-random", "0", "--n-orders", "0", "--alphas", "",
                 "--alpha-grid", "", "--out", out, "--no-progress", "--recipe", "converge"]) == 0
    text = capsys.readouterr().out
    assert "settings: recipe converge" in text and "flipflop / orthogonal:" in text
    assert "epochs 30 -> 1 (flag)" in text
    for f in deviations("converge", "flipflop", "orthogonal"):
        if f not in ("epochs", "batches_per_epoch", "batch"):
            assert f" {f} " in text, f



def test_schur_cli_cayley_neg_and_cayley_init_set_cayley_models_only(tmp_path, capsys):
    from symfast.schur.rnn import load_checkpoint
    out = str(tmp_path / "run")
    assert main(["schur", "--task", "flipflop", "--construction", "orthogonal,cayley", "--seeds", "1", "--hidden", "4",
                 "--epochs", "1", "--batches", "1", "--batch", "2", "--n-eval", "4", "--n-random", "0",
                 "--n-orders", "0", "--alphas", "", "--alpha-grid", "", "--out", out, "--no-progress",
                 "--recipe", "paper", "--cayley-neg", "3", "--cayley-init", "spread", "--include-unconverged"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any("flipflop / cayley:" in ln and "cayley_neg 0 -> 3 (flag)" in ln
               and "cayley_init identity -> spread (flag)" in ln for ln in lines)
    assert not any("flipflop / orthogonal:" in ln and "cayley" in ln for ln in lines)
    m, _, _ = load_checkpoint(os.path.join(out, "ckpt", "flipflop_cayley_H4_s0.pt"))
    assert m.cayley_neg == 3 and int((m.cayley_d == -1).sum()) == 3 and m.cayley_init == "spread"
    o = load_checkpoint(os.path.join(out, "ckpt", "flipflop_orthogonal_H4_s0.pt"))[0]
    assert o.cayley_neg == 0 and o.cayley_init == "identity"
    for bad, flag in ((["--cayley-neg", "-1"], "--cayley-neg"),
                      (["--cayley-neg", "5", "--hidden", "4", "--construction", "cayley"], "--cayley-neg"),
                      (["--family", "gru", "--cayley-neg", "1"], "--cayley-neg"),
                      (["--family", "gru", "--cayley-init", "spread"], "--cayley-init")):
        assert main(["schur", *bad, "--out", str(tmp_path / "bad")]) == 2
        assert flag in capsys.readouterr().err


def _spy_train_many(monkeypatch):
    """Record (task, seeds, widths, constructions, engine) of every train_many call."""
    from symfast.schur import rnn
    calls, real = [], rnn.train_many

    def spy(task, seeds, widths, recurrents, cfg, **kw):
        engines = {c.engine for c in ([cfg] if isinstance(cfg, rnn.TrainConfig) else cfg)}
        calls.append((task.name, list(seeds), list(widths), list(recurrents), *engines))
        return real(task, seeds, widths, recurrents, cfg, **kw)
    monkeypatch.setattr(rnn, "train_many", spy)
    return calls


def test_schur_trains_each_task_in_one_call_and_retrains_only_what_is_missing(tmp_path, monkeypatch):
    """All models of a task (every construction, width, seed and training setting: here a recipe's
    per-construction configs) train in one call; with some checkpoints gone, one call trains just
    those, to the same weights bit for bit; --engine torch goes through the same path."""
    from dataclasses import replace

    import torch

    from symfast.schur.rnn import Copy, TrainConfig
    from symfast.schur.study import train_tanh_models
    calls = _spy_train_many(monkeypatch)
    task, seeds = Copy(length=3, replay=5, scored=5), range(2)
    cells = [(cn, h) for cn in ("orthogonal", "cayley") for h in (6, 9)]
    cfg = {"orthogonal": TrainConfig(epochs=2, batches_per_epoch=2, batch=4),
           "cayley": TrainConfig(epochs=3, batches_per_epoch=2, batch=4, lr=3e-3, schedule="cosine", warmup=1,
                                 clip=1.0, curriculum=1, cayley_init="spread")}
    ck = str(tmp_path / "ckpt")
    first = train_tanh_models(task, cells, seeds, cfg, ck)
    assert len(calls) == 1 and calls[0][4] == "fused"
    assert sorted(zip(calls[0][3], calls[0][2], calls[0][1])) == sorted((cn, h, s) for cn, h in cells for s in (0, 1))
    assert sorted(first) == sorted(cells)
    for (cn, h), (models, losses) in first.items():
        n = 2 * cfg[cn].epochs
        assert [(m.recurrent, m.n_hidden) for m in models] == [(cn, h)] * 2 and [len(v) for v in losses] == [n, n]
    assert not torch.equal(first[("orthogonal", 6)][0][0].W, first[("orthogonal", 6)][0][1].W)  # seeds differ
    gone = [("cayley", 9, 1), ("orthogonal", 6, 0)]
    for cn, h, s in gone:
        os.remove(os.path.join(ck, f"copy_{cn}_H{h}_s{s}.pt"))
    calls.clear()
    again = train_tanh_models(task, cells, seeds, cfg, ck)
    assert [(c[3], c[2], c[1]) for c in calls] == [(["orthogonal", "cayley"], [6, 9], [0, 1])]
    for cell, (models, losses) in first.items():
        for a, b, la, lb in zip(models, again[cell][0], losses, again[cell][1]):
            assert la == lb and all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters())), cell
    calls.clear()
    via_torch = train_tanh_models(task, cells, seeds, {cn: replace(c, engine="torch") for cn, c in cfg.items()},
                                  str(tmp_path / "torch"))
    assert [c[4] for c in calls] == ["torch"]
    for cell, (models, _) in first.items():
        for a, b in zip(models, via_torch[cell][0]):
            assert all(torch.allclose(p, q, atol=2e-5, rtol=1e-4) for p, q in zip(a.parameters(), b.parameters()))


def test_schur_cli_copy_variant_flags_build_the_task(tmp_path, capsys, monkeypatch):
    """--copy-* flags reach the task that is trained (stopped before any training) and are checked."""
    import pytest

    from symfast.schur import study_tanh
    from symfast.schur.rnn import Copy
    seen = []

    class Stop(Exception):
        pass

    def stop(task, *a, **kw):
        seen.append(task)
        raise Stop
    monkeypatch.setattr(study_tanh, "train_tanh_models", stop)
    with pytest.raises(Stop):
        main(["schur", "--task", "copy", "--copy-length", "5", "--copy-symbols", "3", "--copy-delay", "2",
              "--copy-replay", "once", "--out", str(tmp_path / "run"), "--no-progress"])
    assert seen == [Copy(n_symbols=3, length=5, delay=2, cyclic=False)]
    assert "copy task (a variant, not the paper's)" in capsys.readouterr().out
    with pytest.raises(Stop):
        main(["schur", "--task", "copy", "--out", str(tmp_path / "run"), "--no-progress"])
    assert seen[-1] == Copy() and "variant" not in capsys.readouterr().out
    for bad in (["--task", "flipflop", "--copy-delay", "3"], ["--task", "copy", "--copy-delay", "-1"],
                ["--task", "copy", "--family", "gru", "--copy-replay", "once"]):
        assert main(["schur", *bad, "--out", str(tmp_path / "bad")]) == 2
        assert "copy" in capsys.readouterr().err


def test_schur_cli_reads_the_verdicts_on_held_out_seeds_beyond_the_papers_three(tmp_path, capsys):
    """--seeds 4 (at H = 64, the width the paper's task numbers are for): the comparison with the paper is also written for seeds 0-2 and for seed 3 alone, each
    row's verdicts from the models of that seed set only (with 3 seeds or fewer none is written:
    test_schur_cli_tiny)."""
    out = tmp_path / "run"
    argv = ["schur", "--task", "flipflop", "--hidden", "64", "--epochs", "1", "--batches", "1", "--batch", "4",
            "--n-eval", "8", "--n-random", "1", "--n-orders", "1", "--alphas", "0.9", "--alpha-grid", "",
            "--include-unconverged", "--no-progress", "--recipe", "paper"]
    assert main([*argv, "--seeds", "4", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "held-out seeds 3..3" in text and "tested verdicts" in text
    reps = pd.read_csv(out / "schur_paper_replicates.csv")
    row = reps[(reps.table == "cross-task") & (reps.setting.str.startswith("flipflop")) & (reps.subset == "-T_C->R")]
    assert row[["n_paper_seeds", "n_heldout", "n_all"]].values.tolist() == [[3, 1, 4]]


def test_schur_cli_curriculum_flag(tmp_path, capsys):
    from symfast.schur.rnn.checkpoint import load_checkpoint
    out = str(tmp_path / "run")
    argv = ["schur", "--task", "flipflop", "--seeds", "1", "--hidden", "4", "--epochs", "2", "--batches", "1",
            "--batch", "4", "--n-eval", "8", "--n-random", "0", "--alphas", "", "--alpha-grid", "", "--recipe", "paper",
            "--out", out, "--no-progress"]
    assert main(argv + ["--curriculum", "1"]) == 0
    assert "curriculum" in capsys.readouterr().out  # printed as a deviation from the paper's budget
    _, _, info = load_checkpoint(os.path.join(out, "ckpt", "flipflop_orthogonal_H4_s0.pt"))
    assert info["train"]["curriculum"] == 1
    assert main(argv + ["--curriculum", "3", "--out", str(tmp_path / "bad")]) == 2
    assert "curriculum must be in 0..epochs (2), got 3" in capsys.readouterr().err
