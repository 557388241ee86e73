"""`symfast schur --family ssm|gru|lstm` end to end on a tiny budget, and its bad input."""
import os

import pandas as pd
import pytest

from symfast.cli import main

TINY = ["--task", "flipflop", "--seeds", "2", "--hidden", "6", "--epochs", "1", "--batches", "2", "--batch", "4",
        "--n-eval", "8", "--n-random", "1", "--n-orders", "1", "--alphas", "0.95", "--no-progress",
        "--include-unconverged"]


def test_ssm_family_tables_and_the_no_op_control(tmp_path, capsys):
    out = str(tmp_path / "ssm")
    assert main(["schur", "--family", "ssm", "--fixed-points", "6", "--out", out] + TINY) == 0
    text = capsys.readouterr().out
    assert "== flipflop / ssm dense, A ablated" in text and "== flipflop / ssm diagonal, A ablated" in text
    assert "eps-stabilisers" in text and "fixed and slow points" in text
    raw = pd.read_csv(os.path.join(out, "schur_ssm_ablation_raw.csv"))
    assert len(raw) == 2 * 2 * 2 * 8  # constructions x seeds x alphas x subsets
    diag, dense = raw[raw.construction == "diagonal"], raw[raw.construction == "dense"]
    assert (diag["stabiliser"] == "no-op").all() and diag["dfvu"].abs().max() <= 1e-12
    assert (dense.loc[dense.subset == "-T_RR,-T_C->R,-T_CC", "stabiliser"] != "no-op").all()
    assert "no-op in 32/32 rows" in text
    fp = pd.read_csv(os.path.join(out, "schur_ssm_fixed_points.csv"))
    assert len(fp) == 4 and (fp["n_fixed"] == 1).all() and (fp["q_min"] < 1e-24).all()  # linear: one fixed point
    # each block removed alone, linearised at h*: a linear map keeps its Schur diagonal and leading Schur
    # vectors, so rho, the slow modes and the readout alignment are unchanged; dFVU is the ablation's
    assert (fp["gate"] == "A").all() and "each block removed alone" in text
    single = raw[raw.subset.isin(["-T_RR", "-T_C->R", "-T_CC"]) & (raw.alpha == 0.9)]
    single = single.set_index(["construction", "seed", "subset"])["dfvu"]
    for b in ("T_RR", "T_C->R", "T_CC"):
        assert ((fp[f"rho_Jab_{b}"] - fp["rho_J"]).abs() < 1e-9).all() and (fp[f"n_slow_Jab_{b}"] == fp["n_R_J"]).all()
        assert ((fp[f"align_Jab_{b}"] - fp["align_J"]).abs() < 1e-6).all() and fp["align_J"].between(0, 1).all()
        want = [single[(c, s, "-" + b)] for c, s in zip(fp.construction, fp.seed)]
        assert fp[f"dfvu_{b}"].tolist() == pytest.approx(want, abs=1e-12)
    for f in ("schur_ssm_ablation_summary.csv", "schur_ssm_models.csv", "schur_ssm_spectra.png"):
        assert os.path.getsize(os.path.join(out, f)) > 0, f
    # the three equal-norm random controls (same pattern, outside it, anywhere) are summarised and printed
    summ = pd.read_csv(os.path.join(out, "schur_ssm_ablation_summary.csv"))
    for c in ("rand_pattern_dfvu_mean", "rand_outside_dfvu_mean", "rand_dfvu_mean"):
        assert summ[f"{c}_mean"].notna().any(), c
    assert "rand dFVU: pattern / outside / anywhere" in text
    models = pd.read_csv(os.path.join(out, "schur_ssm_models.csv"))
    masses = models[["mass_T_RR", "mass_T_C->R", "mass_T_CC"]]
    assert (masses[models.construction == "diagonal"].to_numpy() <= 1e-12).all()  # normal: no coupling mass
    assert (masses[models.construction == "dense"].sum(axis=1) > 1e-3).all()
    assert sorted(os.listdir(os.path.join(out, "ckpt"))) == [f"ssm_flipflop_{c}_H6_s{s}.pt" for c in ("dense", "diagonal")
                                                             for s in (0, 1)]  # one checkpoint per model


@pytest.mark.parametrize("family, gates", [("gru", ["W_hn", "W_hz"]), ("lstm", ["W_hg"])])
def test_gated_family_per_gate(tmp_path, capsys, family, gates):
    out = str(tmp_path / family)
    gate_arg = ",".join(g[-1] for g in reversed(gates))
    sched = ["--lr", "3e-3", "--schedule", "cosine", "--warmup", "1", "--min-lr-ratio", "0.1"]
    assert main(["schur", "--family", family, "--construction", "bias", "--gate", gate_arg, "--fixed-points", "3",
                 "--out", out] + TINY + sched) == 0
    text = capsys.readouterr().out
    assert "Adam 0.003 (cosine, warmup 1 steps, to 0.1 x lr)" in text  # the schedule flags reach the families
    raw = pd.read_csv(os.path.join(out, f"schur_{family}_ablation_raw.csv"))
    assert list(dict.fromkeys(raw["gate"])) == gates  # the default gate first
    assert set(raw["construction"]) == {"bias"} and len(raw) == len(gates) * 2 * 2 * 8
    assert f"== flipflop / {family} bias, {gates[0]} ablated" in text
    fp = pd.read_csv(os.path.join(out, f"schur_{family}_fixed_points.csv"))  # one row per model and gate
    assert fp["gate"].tolist() == gates * 2 and fp[["align_J", "align_Jab_T_CC"]].stack().between(0, 1).all()


def test_family_default_recipe_is_converge_flags_override_it_and_a_rerun_reloads(tmp_path, capsys):
    """Without training flags a GRU flip-flop run takes the converge recipe's settings (lr, schedule,
    clipping); an explicit flag replaces one setting and is marked. The run writes one checkpoint per
    model, and running it again reloads them and reproduces every number."""
    import torch
    out = str(tmp_path / "gru")
    argv = ["schur", "--family", "gru", "--construction", "nobias", "--gate", "n", "--out", out] + TINY + [
        "--seeds", "1", "--alphas", ""]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "settings: recipe converge, family gru" in text and "checkpoints found" not in text
    assert "flipflop / nobias:" in text and "epochs 30 -> 1 (flag)" in text
    assert "lr 0.001 -> 0.01, clip off -> 1, schedule constant -> cosine, warmup 0 -> 64" in text
    ck = torch.load(os.path.join(out, "ckpt", "gru_flipflop_nobias_H6_s0.pt"), weights_only=True)
    assert (ck["train"]["lr"], ck["train"]["schedule"], ck["train"]["clip"], ck["epoch"]) == (1e-2, "cosine", 1.0, 1)
    raw = pd.read_csv(os.path.join(out, "schur_gru_ablation_raw.csv"))
    assert main(argv) == 0
    assert "1 of 1 checkpoints found" in capsys.readouterr().out
    pd.testing.assert_frame_equal(pd.read_csv(os.path.join(out, "schur_gru_ablation_raw.csv")), raw)


def test_tanh_stays_the_default(tmp_path):
    from symfast.cli import build_parser
    args = build_parser().parse_args(["schur"])
    assert (args.family, args.gate, args.fixed_points) == ("tanh", "all", 0)


def test_family_bad_input(tmp_path, capsys):
    def fails(argv, msg):
        assert main(["schur", "--out", str(tmp_path)] + argv) == 2
        assert msg in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["schur", "--family", "rnn", "--out", str(tmp_path)])
    assert "invalid choice: 'rnn'" in capsys.readouterr().err
    fails(["--family", "ssm", "--construction", "cayley"], "unknown ssm construction 'cayley'")
    fails(["--family", "gru", "--construction", "diagonal"], "unknown gru construction 'diagonal'")
    fails(["--family", "gru", "--gate", "g"], "unknown gru gate 'g'")
    fails(["--family", "ssm", "--gate", "n"], "--gate applies to --family gru or lstm, not ssm")
    fails(["--gate", "n"], "--gate applies to --family gru or lstm, not tanh")
    fails(["--family", "ssm", "--construction", "diagonal", "--hidden", "5"], "--hidden must be even")
    fails(["--family", "lstm", "--fixed-points", "-1"], "--fixed-points must be >= 0")
    fails(["--family", "gru", "--schedule", "constant", "--warmup", "3"],
          "warmup and min_lr_ratio apply to schedule='cosine' only")
