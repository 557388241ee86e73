"""`symfast schur` end to end on a tiny budget, checkpoint reuse, and bad input."""
import os

import pandas as pd

from symfast.cli import main


def test_schur_cli_tiny(tmp_path, capsys):
    out = str(tmp_path / "run")
    argv = ["schur", "--task", "copy", "--construction", "orthogonal,cayley", "--seeds", "2", "--hidden", "8",
            "--epochs", "1", "--batches", "2", "--batch", "4", "--n-eval", "8", "--n-random", "2", "--alphas", "0.95",
            "--n-orders", "2", "--alpha-grid", "0.85,0.95", "--out", out, "--no-progress", "--include-unconverged"]
    assert main(argv) == 0
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
    cmp = pd.read_csv(os.path.join(out, "schur_paper_comparison.csv"))
    assert (cmp[cmp.setting.str.contains("cayley")]["verdict"] == "by construction").all()
    ck = sorted(os.listdir(os.path.join(out, "ckpt")))
    assert len(ck) == 4
    mtime = os.path.getmtime(os.path.join(out, "ckpt", ck[0]))
    assert main(argv) == 0  # second run reuses the checkpoints
    assert os.path.getmtime(os.path.join(out, "ckpt", ck[0])) == mtime


def test_schur_cli_excludes_unconverged_and_paper_defaults(tmp_path, capsys):
    from symfast.cli import build_parser
    args = build_parser().parse_args(["schur"])
    assert (args.epochs, args.batches, args.batch, args.seeds, args.lr, args.clip) == (30, 128, 64, 3, 1e-3, None)
    assert (args.hidden, args.construction) == ("paper", "paper")
    out = str(tmp_path / "run")
    assert main(["schur", "--task", "copy", "--construction", "orthogonal", "--seeds", "1", "--hidden", "6",
                 "--epochs", "1", "--batches", "1", "--batch", "4", "--n-eval", "8", "--n-random", "0",
                 "--alphas", "", "--out", out, "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "clip off" in text and "no converged model: nothing to tabulate" in text
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
