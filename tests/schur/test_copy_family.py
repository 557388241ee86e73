"""The copy task's family of definitions: the pattern verdict, its tables and `symfast schur --copy-family`."""
import os

import numpy as np
import pandas as pd
import pytest

from symfast.cli import main
from symfast.commands import UsageError
from symfast.schur.copy_family import (FAMILY, FAR_BELOW, HARMLESS, ablation_table, pattern_table, pattern_verdict,
                                       setting)
from symfast.schur.paper import PAPER_COPY
from symfast.schur.rnn import make_task


def test_family_members():
    names = [s.name for s in FAMILY]
    assert len(names) == len(set(names)) == 12
    assert {(s.length, s.n_symbols, s.cyclic) for s in FAMILY} == {
        (L, K, c) for L in (8, 16, 32) for K in (4, 8) for c in (True, False)}
    # the longer budget exactly where the paper's left every model of seeds 0-2 below the target (48+ bits)
    assert {s.name for s in FAMILY if s.long_budget} == {f"{r}_L{L}_K{K}" for r in ("cyclic", "once")
                                                         for L, K in ((16, 8), (32, 4), (32, 8))}
    assert make_task("copy", **setting("cyclic_L8_K4").task_kwargs()) == make_task("copy")  # the paper's, inferred
    once = make_task("copy", **setting("once_L16_K4").task_kwargs())
    assert (once.length, once.delay, once.cyclic, once.replay) == (16, 10, False, 16)
    with pytest.raises(ValueError, match="unknown copy setting 'cyclic_L9_K4'"):
        setting("cyclic_L9_K4")


def test_pattern_verdict_cases():
    ones = [1.0, 1.0, 0.99, 1.0]
    assert pattern_verdict(ones, [0.60, 0.65, 0.62, 0.70])[0] == "held"
    assert pattern_verdict(ones, [0.99, 1.0, 0.98, 0.995])[0] == "missed"  # (b) wholly above
    assert pattern_verdict([0.7, 0.72, 0.69, 0.71], [0.60, 0.65, 0.62, 0.70])[0] == "missed"  # (a) wholly below
    v, why = pattern_verdict(ones, [0.60, 0.99, 0.70, 1.0])  # (b)'s interval straddles 0.89
    assert v == "not comparable" and "(b)" in why and "not comparable" in why
    assert pattern_verdict(ones[:2], [0.6, 0.6])[0] == "not comparable"  # fewer than 3 converged
    # missed wins over not comparable: (a) straddles, (b) wholly above
    assert pattern_verdict([1.0, 0.5, 1.0, 0.9], [1.0, 1.0, 0.99, 0.995])[0] == "missed"
    # the thresholds are the pre-stated ones: the accuracy band around 1.00 and twice it under 0.99
    assert (HARMLESS, FAR_BELOW) == (pytest.approx(0.95), pytest.approx(0.89))
    with pytest.raises(ValueError, match="one value per converged model"):
        pattern_verdict([1.0, 1.0, 1.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="finite"):
        pattern_verdict([1.0, np.nan, 1.0], [0.5, 0.5, 0.5])


def _runs(cr_by_seed, converged_by_seed, n_R=60):
    """Synthetic schur_models.csv / schur_ablation_raw.csv frames of one H = 64 copy setting."""
    seeds = sorted(cr_by_seed)
    models = pd.DataFrame({"seed": seeds, "hidden": 64, "n_R": n_R, "converged": [converged_by_seed[s] for s in seeds]})
    rows = []
    for s in seeds:
        for alpha in (0.85, 0.9):
            for sub in PAPER_COPY:
                acc = cr_by_seed[s] if sub == "-T_C->R" else 1.0
                rows.append({"seed": s, "alpha": alpha, "subset": sub, "converged": converged_by_seed[s],
                             "replay_acc": acc if alpha == 0.9 else 0.0, "replay_order_min": 1.0 - 0.001 * s,
                             "removed_rel_T": 0.03 if sub == "-T_CC" else 0.1})
    return models, pd.DataFrame(rows)


def test_pattern_table_seed_sets_and_converged_only():
    cr = {0: 0.6, 1: 0.62, 2: 0.95, 3: 0.99, 4: 0.98, 5: 0.995, 6: 0.2}
    conv = {s: s != 6 for s in cr}  # seed 6 did not converge: it must not pull the held-out interval down
    runs = {"cyclic_L8_K8": _runs(cr, conv)}
    t = pattern_table(runs, alpha=0.9, split=3)
    assert t.seeds.tolist() == ["0-2", "3-6", "all"]
    held_out = t[t.seeds == "3-6"].iloc[0]
    assert (held_out.models, held_out.converged) == (4, 3)
    assert held_out.cr_mean == pytest.approx(np.mean([0.99, 0.98, 0.995]))
    assert held_out.verdict == pattern_verdict([0.997, 0.996, 0.995], [0.99, 0.98, 0.995])[0] == "missed"
    assert held_out.in_C_mean == 4 and held_out.T_CC_mass_mean == pytest.approx(0.03)
    first = t[t.seeds == "0-2"].iloc[0]
    assert first.verdict == pattern_verdict([1.0, 0.999, 0.998], [0.6, 0.62, 0.95])[0]
    tab = ablation_table(runs, alpha=0.9, split=3)
    assert set(tab.subset) == set(PAPER_COPY) and (tab.n[tab.seeds == "3-6"] == 3).all()
    row = tab[(tab.seeds == "all") & (tab.subset == "-T_C->R")].iloc[0]
    assert row.replay_acc_mean == pytest.approx(np.mean([cr[s] for s in range(6)])) and row.paper == 0.639
    with pytest.raises(ValueError, match="unknown copy setting"):
        pattern_table({"copy_default": _runs(cr, conv)})
    models, raw = _runs(cr, conv)
    with pytest.raises(ValueError, match=r"columns \['replay_order_min'\] missing"):
        pattern_table({"cyclic_L8_K8": (models, raw.drop(columns="replay_order_min"))})


def test_pattern_table_replicates_that_disagree_are_not_a_verdict_on_all_seeds():
    """The paper's seeds hold the pattern, the held-out seeds miss it: the all-seeds row reads "not
    comparable: replicates disagree" whatever the pooled reading; agreeing seed sets keep it."""
    cr = {0: 0.6, 1: 0.62, 2: 0.61, 3: 0.99, 4: 0.98, 5: 0.995}
    t = pattern_table({"cyclic_L8_K8": _runs(cr, {s: True for s in cr})}, alpha=0.9, split=3).set_index("seeds")
    assert (t.loc["0-2", "verdict"], t.loc["3-5", "verdict"]) == ("held", "missed")
    assert t.loc["all", "verdict"] == "not comparable"
    assert t.loc["all", "reason"].startswith("replicates disagree: seeds 0-2 held, seeds 3-5 missed")
    same = {0: 0.6, 1: 0.62, 2: 0.61, 3: 0.6, 4: 0.63, 5: 0.61}
    t = pattern_table({"cyclic_L8_K8": _runs(same, {s: True for s in same})}, alpha=0.9, split=3)
    assert t.verdict.tolist() == ["held", "held", "held"]


def test_copy_family_cli_tiny(tmp_path, capsys):
    out = str(tmp_path / "fam")
    argv = ["schur", "--copy-family", "--copy-settings", "cyclic_L8_K4,once_L8_K8", "--seeds", "1", "--hidden", "6",
            "--epochs", "1", "--batches", "1", "--batch", "4", "--n-eval", "8", "--n-random", "0", "--alphas", "",
            "--n-orders", "1", "--alpha-grid", "", "--recipe", "paper", "--out", out, "--no-progress"]
    assert main(argv) == 0
    for f in ("copy_family_pattern.csv", "copy_family_ablation.csv", "copy_family.png",
              "cyclic_L8_K4/schur_models.csv", "once_L8_K8/schur_ablation_raw.csv"):
        assert os.path.getsize(os.path.join(out, f)) > 0, f
    pat = pd.read_csv(os.path.join(out, "copy_family_pattern.csv"))
    assert pat.setting.tolist() == ["cyclic_L8_K4", "once_L8_K8"] and (pat.seeds == "all").all()
    models = pd.read_csv(os.path.join(out, "once_L8_K8", "schur_models.csv"))
    assert (models.hidden == 6).all() and pat.models.tolist() == [1, 1]
    assert "the paper's copy pattern" in capsys.readouterr().out


def test_copy_family_long_budget_and_bad_input(tmp_path):
    import symfast.commands.schur as schur_cmd
    from symfast.commands.schur_copy_family import run_copy_family
    seen = []

    def fake_run(settings, out, progress):  # record each setting's study settings instead of training
        seen.append((settings, out))
        raise SystemExit(0)
    base = ["schur", "--copy-family", "--out", str(tmp_path)]
    with pytest.raises(SystemExit):
        run_copy_family(_parse(base + ["--copy-settings", "once_L32_K4"]), fake_run)
    sub, out = seen[0]
    assert (sub.copy_length, sub.copy_symbols, sub.copy_delay, sub.copy_replay) == (32, 4, 10, "once")
    assert (sub.constructions, sub.hidden, sub.tasks, sub.family) == (("orthogonal",), (64,), ("copy",), "tanh")
    assert (sub.epochs, sub.lr, sub.clip, sub.schedule, sub.curriculum) == (60, 3e-3, 1.0, "cosine", 20)
    assert out == os.path.join(str(tmp_path), "once_L32_K4")
    seen.clear()
    with pytest.raises(SystemExit):
        run_copy_family(_parse(base + ["--copy-settings", "cyclic_L8_K4", "--epochs", "5"]), fake_run)
    sub = seen[0][0]
    assert (sub.epochs, sub.curriculum, sub.schedule) == (5, None, None)  # the paper's budget stays
    for extra, msg in ((["--copy-length", "16"], "drop --copy-length"), (["--copy-settings", "x"], "unknown copy"),
                       (["--family", "gru"], "tanh family's copy task"), (["--task", "sine"], "copy task")):
        with pytest.raises(UsageError, match=msg):
            schur_cmd.run(_parse(base + extra))
    with pytest.raises(UsageError, match="applies to --copy-family"):
        schur_cmd.run(_parse(["schur", "--copy-settings", "cyclic_L8_K4", "--out", str(tmp_path)]))


def _parse(argv):
    from symfast.cli import build_parser
    return build_parser().parse_args(argv)


def test_copy_family_figure(tmp_path):
    from symfast.schur import plots
    cr = {s: 0.6 + 0.01 * s for s in range(6)}
    pat = pattern_table({"cyclic_L8_K8": _runs(cr, {s: True for s in cr}),
                         "once_L32_K8": _runs(cr, {s: False for s in cr})}, split=3)
    path = tmp_path / "f.png"
    fig = plots.plot_copy_family(pat, "3-5", path)
    assert path.stat().st_size > 0 and [t.get_text().split("\n")[0] for t in fig.axes[0].get_xticklabels()] == [
        "cyclic L8 K8", "once L32 K8"]
    with pytest.raises(ValueError, match="no rows for the seed set 'x'"):
        plots.plot_copy_family(pat, "x")
