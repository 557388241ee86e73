"""The training recipes and their documentation."""
import os

import pytest

from symfast.schur import rnn
from symfast.schur.families import FAMILIES, FAMILY_CONSTRUCTIONS
from symfast.schur.recipes import FIELDS, RECIPE_NAMES, RECIPES, deviation_table, deviations, recipe_config
from symfast.schur.rnn.config import TrainConfig

# the Schur guide's pages: the tanh RNN's recipe table in schur.md, the other families' in schur-families.md
DOCS = [os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guide", name)
        for name in ("schur.md", "schur-families.md")]


def test_recipes_paper_is_the_paper_budget_and_unknown_names_list_the_valid_ones():
    paper = TrainConfig()
    assert (paper.epochs, paper.batches_per_epoch, paper.batch, paper.lr, paper.clip, paper.schedule) == (
        30, 128, 64, 1e-3, None, "constant")
    for family in FAMILIES:
        for task in rnn.TASKS:
            for cons in FAMILY_CONSTRUCTIONS[family]:
                assert recipe_config("paper", task, cons, family) == paper
                assert deviations("paper", task, cons, family=family) == {}
    with pytest.raises(ValueError, match=r"unknown recipe 'fast'; expected one of \['paper', 'converge'\]"):
        recipe_config("fast", "copy", "dense")
    with pytest.raises(ValueError, match=r"unknown recipe 'fast'"):
        deviation_table("fast", "gru")
    assert RECIPE_NAMES == ("paper", "converge")


def test_every_deviation_is_in_the_table_and_the_table_is_in_the_docs():
    """Each field where a recipe's config differs from the paper's is a row of its family's
    `deviation_table`, and every family's table stands verbatim in the Schur guide's pages: adding a
    deviation without documenting it fails."""
    doc = ""
    for path in DOCS:
        with open(path, encoding="utf-8") as fh:
            doc += fh.read()
    for name in RECIPE_NAMES:
        for (family, task, cons), entry in RECIPES[name].items():
            assert family in FAMILIES and task in rnn.TASKS and set(entry) <= set(FIELDS), (family, task, entry)
            table = deviation_table(name, family)
            cs = [cons] if cons != "*" else [c for c in FAMILY_CONSTRUCTIONS[family]
                                              if (family, task, c) not in RECIPES[name]]
            for c in cs:
                for f, (a, b) in deviations(name, task, c, family=family).items():
                    assert f"| {task} | {'all' if cons == '*' else cons} | {f} |" in table, (name, family, task, c, f)
    for family in FAMILIES:
        assert deviation_table("converge", family) in doc, family


def test_converge_recipe_of_the_families_is_the_measured_setting():
    """The families' converge entries are the settings of the measured runs (docs: GRU and LSTM
    flip-flop 10 of 10, bias-free context 5 of 5; SSM copy 4 of 5 per structure); other settings keep
    the paper's budget."""
    gated = recipe_config("converge", "flipflop", "bias", "gru")
    assert (gated.epochs, gated.lr, gated.clip, gated.schedule, gated.warmup, gated.min_lr_ratio) == (
        8, 1e-2, 1.0, "cosine", 64, 0.01)
    assert recipe_config("converge", "flipflop", "nobias", "lstm") == gated
    assert recipe_config("converge", "context", "nobias", "gru") == gated  # measured bias-free only
    assert recipe_config("converge", "context", "bias", "gru") == TrainConfig()
    ssm = recipe_config("converge", "copy", "diagonal", "ssm")
    assert (ssm.epochs, ssm.lr, ssm.clip, ssm.schedule) == (16, 3e-3, 1.0, "cosine")
    assert recipe_config("converge", "sine", "bias", "gru") == TrainConfig()
    assert recipe_config("converge", "flipflop", "nobias", "gru", epochs=2).epochs == 2  # an override wins
