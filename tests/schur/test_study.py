"""The Schur study's front door: `SchurSettings` -> `schur_study` -> `SchurStudy`, and the command line on top of it."""
import os
from dataclasses import replace

import pytest

from symfast.cli import build_parser, main
from symfast.commands import UsageError
from symfast.commands.schur import parse_settings
from symfast.schur import SchurSettings, SchurStudy, schur_study
from symfast.schur.study import CheckpointError, copy_family_settings


def test_the_command_lines_defaults_are_the_settings_defaults():
    assert parse_settings(build_parser().parse_args(["schur"])) == SchurSettings()
    s = parse_settings(build_parser().parse_args(
        ["schur", "--task", "copy,sine", "--construction", "dense", "--hidden", "8,9", "--alphas", "0.8",
         "--alpha", "0.95", "--alpha-grid", "", "--epsilon", "0.1", "--epochs", "2", "--schedule", "constant"]))
    assert (s.tasks, s.constructions, s.hidden, s.sweep, s.alpha_grid, s.epsilon) == (
        ("copy", "sine"), ("dense",), (8, 9), [0.8, 0.95], (), 0.1)
    assert s.budget_overrides() == {"warmup": 0, "min_lr_ratio": 0.0, "epochs": 2, "schedule": "constant"}
    with pytest.raises(UsageError, match="unknown task 'xor'"):
        parse_settings(build_parser().parse_args(["schur", "--task", "xor"]))


def test_settings_resolve_the_papers_grid_per_family():
    s = SchurSettings(tasks=("copy", "flipflop"))
    assert s.constructions_of() == {"copy": ["dense", "orthogonal", "normal", "cayley"], "flipflop": ["orthogonal"]}
    assert s.widths_of() == {"copy": [56, 64, 72], "flipflop": [64]}
    assert s.is_paper_copy() and not replace(s, copy_replay="once").is_paper_copy()
    gru = SchurSettings(family="gru", tasks=("copy",), gates=("z", "n"))
    assert gru.widths_of() == {"copy": [64]} and gru.constructions_of() == {"copy": ["nobias", "bias"]}
    assert gru.analysed_gates() == ["n", "z"] and SchurSettings().analysed_gates() == [None]  # the default gate first
    cfg = SchurSettings(epochs=3, cayley_neg=2, constructions=("orthogonal", "cayley")).train_configs()
    assert cfg[("flipflop", "cayley")].cayley_neg == 2 and cfg[("flipflop", "orthogonal")].cayley_neg == 0
    assert {c.epochs for c in cfg.values()} == {3}
    with pytest.raises(ValueError, match="curriculum"):
        SchurSettings(tasks=("copy",), epochs=2).train_configs()


def test_copy_family_settings_keep_explicit_settings():
    from symfast.schur.copy_family import setting
    long = copy_family_settings(SchurSettings(lr=1e-3), setting("cyclic_L32_K8"))
    assert (long.tasks, long.constructions, long.hidden, long.copy_length, long.copy_symbols) == (
        ("copy",), ("orthogonal",), (64,), 32, 8)
    assert (long.lr, long.epochs, long.curriculum) == (1e-3, 60, 20)  # lr given: kept; the rest: the longer budget
    short = copy_family_settings(SchurSettings(hidden=(6,)), setting("once_L8_K4"))
    assert (short.hidden, short.copy_replay, short.epochs) == ((6,), "once", None)


TINY = ["--task", "flipflop", "--construction", "orthogonal,cayley", "--seeds", "2", "--hidden", "4", "--epochs", "1",
        "--batches", "1", "--batch", "2", "--n-eval", "4", "--n-random", "1", "--n-orders", "1", "--alphas", "0.95",
        "--alpha-grid", "0.9,0.95", "--recipe", "paper", "--include-unconverged", "--no-progress"]


def test_schur_study_gives_the_tables_the_command_writes(tmp_path, capsys):
    """The library call, reloading the command's checkpoints, returns every table the command wrote, to the byte."""
    out = str(tmp_path / "run")
    assert main(["schur", *TINY, "--out", out]) == 0
    capsys.readouterr()
    settings = parse_settings(build_parser().parse_args(["schur", *TINY]))
    lines = []
    study = schur_study(settings, os.path.join(out, "ckpt"), log=lines.append)
    assert isinstance(study, SchurStudy) and lines == [] and capsys.readouterr().out == ""  # reloaded, silent
    for name, table in (("ablation_raw", study.raw), ("ablation_summary", study.summary), ("models", study.models),
                        ("subspace", study.subspace), ("near_cut", study.near_cut), ("alpha_grid", study.alpha_grid),
                        ("paper_comparison", study.paper_comparison)):
        with open(os.path.join(out, f"schur_{name}.csv")) as f:
            assert table.to_csv(index=False) == f.read(), name
    assert study.fixed_points is None and study.replicates is None and not os.path.exists(
        os.path.join(out, "schur_fixed_points.csv"))
    assert set(study.predictors) == {"all", "by_task", "matched"} and len(study.losses) == 2
    assert study.used.equals(study.raw)  # --include-unconverged
    # the paper's numbers are read on converged models only: a run where none converged has no verdict
    # on them, and its rows say so (or that the setting was not run), never "order-dependent"
    cmp = study.paper_comparison
    assert not study.raw.converged.any()  # 1 epoch at H = 4: nothing converges
    assert set(cmp.verdict) == {"not comparable", "by construction"}
    # the paper's settings are H = 64 and 72; this run trained H = 4 only, so each of its rows says "not run"
    assert cmp[cmp.verdict.eq("not comparable")].reason.str.startswith("not run: ").all()
    strict = schur_study(replace(settings, include_unconverged=False), os.path.join(out, "ckpt"))
    assert strict.used.converged.all() and len(strict.used) == strict.raw.converged.sum()


def test_schur_study_of_a_family_logs_its_training(tmp_path):
    settings = SchurSettings(family="ssm", constructions=("diagonal",), hidden=(4,), seeds=1, epochs=1, batches=1,
                             batch=2, n_eval=4, n_random=0, n_orders=0, alphas=(), include_unconverged=True)
    lines = []
    study = schur_study(settings, str(tmp_path / "ckpt"), log=lines.append)
    assert len(lines) == 1 and lines[0].startswith("trained 1 flipflop ssm diagonal H=4 models in ")
    assert set(study.raw.gate) == {"A"} and list(study.models.columns[:5]) == ["task", "family", "construction",
                                                                                 "gate", "hidden"]
    assert study.subspace is None and study.paper_comparison is None and len(study.spectra) == 1
    assert os.listdir(tmp_path / "ckpt") == ["ssm_flipflop_diagonal_H4_s0.pt"]
    again = []
    schur_study(settings, str(tmp_path / "ckpt"), log=again.append)
    assert again[0].startswith("1 of 1 checkpoints found")


def test_a_damaged_checkpoint_is_a_checkpoint_error_naming_it(tmp_path):
    (tmp_path / "flipflop_orthogonal_H4_s0.pt").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(CheckpointError, match="flipflop_orthogonal_H4_s0.pt"):
        schur_study(SchurSettings(hidden=(4,), seeds=1, epochs=1), str(tmp_path))
    assert issubclass(CheckpointError, ValueError)


@pytest.mark.parametrize("bad, words", [
    (dict(family="rnn"), "family"), (dict(tasks=("xor",)), "tasks"), (dict(tasks=()), "tasks"),
    (dict(constructions=("bias",)), "tanh constructions"), (dict(gates=("n",)), "tanh gates"),
    (dict(family="gru", gates=("g",)), "gru gates"), (dict(seeds=0), "seeds"), (dict(n_random=-1), "n_random"),
    (dict(hidden=(8, 0)), "hidden"), (dict(hidden=()), "hidden"), (dict(alpha=1.5), "alpha"),
    (dict(alphas=(0.0,)), "alpha"), (dict(alpha_grid=(1.2,)), "alpha"), (dict(epsilon=-1.0), "epsilon"),
    (dict(clip=0.0), "clip"), (dict(engine="cuda"), "engine"), (dict(copy_replay="twice"), "copy_replay"),
])
def test_settings_refuse_what_no_study_can_run(bad, words):
    with pytest.raises(ValueError, match=words):
        SchurSettings(**bad)
    SchurSettings(family="gru", gates=("n", "z"), hidden=(1,), alphas=(), alpha_grid=(), seeds=1, n_random=0,
                  epochs=0, fixed_points=0)  # the edges the command line accepts
