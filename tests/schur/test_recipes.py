"""The training recipes and their documentation."""
import os

import pytest

from symfast.schur import rnn
from symfast.schur.recipes import FIELDS, RECIPE_NAMES, RECIPES, deviation_table, deviations, recipe_config
from symfast.schur.rnn.config import TrainConfig

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "guide", "schur.md")


def test_recipes_paper_is_the_paper_budget_and_unknown_names_list_the_valid_ones():
    paper = TrainConfig()
    assert (paper.epochs, paper.batches_per_epoch, paper.batch, paper.lr, paper.clip, paper.schedule) == (
        30, 128, 64, 1e-3, None, "constant")
    for task in rnn.TASKS:
        for cons in rnn.CONSTRUCTIONS:
            assert recipe_config("paper", task, cons) == paper
            assert deviations("paper", task, cons) == {}
    with pytest.raises(ValueError, match=r"unknown recipe 'fast'; expected one of \['paper', 'converge'\]"):
        recipe_config("fast", "copy", "dense")
    assert RECIPE_NAMES == ("paper", "converge")


def test_every_deviation_is_in_the_table_and_the_table_is_in_the_docs():
    """Each field where a recipe's config differs from the paper's is a row of `deviation_table`, and
    that table stands verbatim in docs/guide/schur.md: adding a deviation without documenting it fails."""
    for name in RECIPE_NAMES:
        table = deviation_table(name)
        for (task, cons), entry in RECIPES[name].items():
            assert set(entry) <= set(FIELDS), entry
            for c in ([cons] if cons != "*" else [c for c in rnn.CONSTRUCTIONS if (task, c) not in RECIPES[name]]):
                for f, (a, b) in deviations(name, task, c).items():
                    assert f"| {task} | {'all' if cons == '*' else cons} | {f} |" in table, (name, task, c, f)
    with open(DOC, encoding="utf-8") as fh:
        assert deviation_table("converge") in fh.read()
