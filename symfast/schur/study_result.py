"""What one Schur study returns: `SchurStudy`, every table `symfast schur` writes and the data of its figures."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from symfast.schur.study_settings import SchurSettings

__all__ = ["SchurStudy"]


@dataclass
class SchurStudy:
    """The tables of one Schur study (`schur_study`); the tanh RNN's extra tables are None for other families.

    Every table holds every model; the `used_*` properties keep the converged ones only (all with
    `settings.include_unconverged`), the rows every summary, comparison and figure is read from.

    Attributes:
        settings: the `SchurSettings` studied.
        train_configs: {(task, construction): TrainConfig} each model trained with.
        raw: one row per model, ablated matrix, alpha and block subset (`schur_ablation`'s columns, the
            model's keys, `converged`, `noop`); written as schur[_<family>]_ablation_raw.csv.
        summary: `schur_ablation_summary` of the used rows per model cell, alpha and subset
            (schur[_<family>]_ablation_summary.csv; empty for a family without a used row).
        models: one row per model (and ablated matrix): fit, convergence, ||N||/||T||, n_R, ...
            (schur[_<family>]_models.csv).
        fixed_points: with settings.fixed_points > 0, one row per model and ablated matrix: the
            fixed and slow points, the Jacobian's Schur split at the slowest and each single block's
            ablated linearisation beside its dFVU (schur[_<family>]_fixed_points.csv); else None.
        subspace: tanh: per model and block, where the removed directions sit relative to task
            activity, with the block's dFVU and dfvu_excess over its same-pattern random control
            (schur_subspace.csv).
        near_cut: tanh: the eigenvalues within settings.near_cut of the cut, per model (schur_near_cut.csv).
        alpha_grid: tanh: `alpha_stability` per model over settings.alpha_grid (schur_alpha_grid.csv);
            None without a grid.
        predictors: tanh, with a used row: `damage_predictors` of the used subspace rows,
            {"all": over every task, "by_task": per task, "matched": against dfvu_excess}; else None.
        paper_comparison: tanh, with a used row: `compare_with_paper` at alpha 0.9 (the copy rows only
            for the paper's copy task; schur_paper_comparison.csv); else None.
        replicates: tanh, beyond the paper's seeds: `compare_replicates`, the verdicts on the paper's
            seeds and on the held-out ones (schur_paper_replicates.csv); else None.
        paper_targets: tanh, with a used row: `compare_at_paper_targets`, every comparison row read
            again on the models as good as the paper's full models (schur_paper_targets.csv); else None.
        spectra: figure data. tanh: {(task, construction, hidden): [(eigenvalues, rho) per seed]};
            other families: {label: [(eigenvalues, rho, {block: mass / ||T||}) per used model]}.
        schur_forms: tanh: {"task / construction, H = h, seed s": (T [H, H], n_R)}, the first seed's of each cell.
        losses: tanh: {"task / construction, H = h": [training losses per seed]}.
    """

    settings: SchurSettings
    train_configs: dict
    raw: pd.DataFrame
    summary: pd.DataFrame
    models: pd.DataFrame
    fixed_points: pd.DataFrame | None = None
    subspace: pd.DataFrame | None = None
    near_cut: pd.DataFrame | None = None
    alpha_grid: pd.DataFrame | None = None
    predictors: dict | None = None
    paper_comparison: pd.DataFrame | None = None
    replicates: pd.DataFrame | None = None
    paper_targets: pd.DataFrame | None = None
    spectra: dict = field(default_factory=dict)
    schur_forms: dict = field(default_factory=dict)
    losses: dict = field(default_factory=dict)

    def _used(self, table):
        return table if table is None or self.settings.include_unconverged else table[table.converged]

    @property
    def used(self) -> pd.DataFrame:
        """The raw rows of the models in the tables."""
        return self._used(self.raw)

    @property
    def used_models(self) -> pd.DataFrame:
        """The model rows of the models in the tables."""
        return self._used(self.models)

    @property
    def used_subspace(self) -> pd.DataFrame | None:
        """The subspace rows of the models in the tables (tanh)."""
        return self._used(self.subspace)

    @property
    def used_alpha_grid(self) -> pd.DataFrame | None:
        """The alpha-grid rows of the models in the tables (tanh; None without a grid)."""
        return self._used(self.alpha_grid)
