"""The Schur study's front door: `SchurSettings` -> `schur_study` -> `SchurStudy`.

Train (or reload from checkpoints) the recurrent networks the settings name, ablate the coupling
blocks of their ordered real Schur form and gather every table ("Task-Restricted Symmetries in
Recurrent Weight Space", arXiv 2606.18457). The tanh RNN's study lives in `study_tanh`, the other
families' in `study_families`; both are reached through `schur_study`. `symfast schur` is this
function plus its files and printed tables.

Example:
    >>> from symfast.schur import SchurSettings, schur_study
    >>> study = schur_study(SchurSettings(tasks=("flipflop",), seeds=3), "runs/ckpt")  # doctest: +SKIP
    >>> study.summary  # doctest: +SKIP
"""
from __future__ import annotations

import os
from typing import Callable

from symfast._progress import Progress
from symfast.schur.fixedpoints import ablated_fixed_point_facts, fixed_point_facts
from symfast.schur.study_families import FAMILY_KEYS, family_checkpoint_path, family_study, matrix_name
from symfast.schur.study_result import SchurStudy
from symfast.schur.study_settings import (BUDGET_FLAGS, DEFAULT_ALPHA_GRID, SchurSettings, copy_family_settings)
from symfast.schur.study_tanh import CheckpointError, analyse_model, tanh_study, train_tanh_models
from symfast.schur.tables import ALL_THREE, SINGLE, grid_table, most_damaging_block, order_table, stabiliser_table

__all__ = ["SchurSettings", "SchurStudy", "schur_study", "CheckpointError", "copy_family_settings",
           "DEFAULT_ALPHA_GRID", "BUDGET_FLAGS", "train_tanh_models", "analyse_model", "FAMILY_KEYS",
           "family_checkpoint_path", "matrix_name", "SINGLE", "ALL_THREE", "stabiliser_table", "order_table",
           "grid_table", "most_damaging_block", "fixed_point_facts", "ablated_fixed_point_facts"]


def schur_study(settings: SchurSettings, checkpoint_dir: str, *, progress: Progress = False,
                log: Callable[[str], None] | None = None) -> SchurStudy:
    """Run the Schur study of `settings`.

    Args:
        settings: what to train and analyse (`SchurSettings`; the command line's defaults).
        checkpoint_dir: one checkpoint per model, rewritten every epoch; a model whose checkpoint is
            complete and of these settings is reloaded, a partly trained one resumes.
        progress: the training's progress (False, True: a bar per training run, or a callable taking
            each progress line; `symfast._progress`).
        log: called with one line per training run (models trained and loaded, the time); None: silent.

    Returns:
        The `SchurStudy`: every table, and the data of the figures.

    Raises:
        CheckpointError: a damaged tanh checkpoint in `checkpoint_dir` (the message names it).
        ValueError: settings the recipe's training configuration refuses.
    """
    os.makedirs(checkpoint_dir, exist_ok=True)
    run = tanh_study if settings.family == "tanh" else family_study
    return run(settings, checkpoint_dir, progress=progress, log=log)
