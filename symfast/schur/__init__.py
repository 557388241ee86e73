"""Schur ablations of recurrent weights.

Ordered real Schur coordinates of a tanh RNN's recurrent matrix, sectors and
coupling blocks (`blocks`), zeroing coupling blocks and measuring behaviour, with the
rollout distance d_D and eps-stabiliser classes (`ablation`), within-sector orderings and the
spread of an ablation over them (`orderings`), ordering-invariant ablations (`invariant`),
equal-norm random controls in and outside the Schur pattern (`controls`), one thread for the
analysis, so that its numbers do not depend on the thread count (`threads`), eigenvalues near the
cut and a fine alpha grid (`nearcut`), where the removed
directions sit relative to task activity (`subspace`), the paper's settings, targets and
numbers (`paper`), the RNNs, tasks and training the study runs on (`rnn`), the other recurrent
families (linear state-space models, GRU, LSTM: `families`), and fixed and slow points with the
Schur form of the linearisation there (`fixedpoints`), and the whole study, settings -> tables
(`study`: `SchurSettings` -> `schur_study` -> `SchurStudy`)
("Task-Restricted Symmetries in Recurrent Weight Space", arXiv 2606.18457).
"""
from symfast._optional import require as _require

_require("pandas", "the Schur study (its tables)")  # one line naming the extra, before its modules import it
from symfast.schur import controls, families, fixedpoints, invariant, nearcut, orderings, paper, rnn, subspace
from symfast.schur.ablation import rollout_distance, schur_ablation
from symfast.schur.ablation import summarize as schur_ablation_summary
from symfast.schur.blocks import (BLOCKS, SUBSETS, SchurBlocks, ablate, departure_from_normality, schur_blocks,
                                  subset_name)
from symfast.schur.study import SchurSettings, SchurStudy, schur_study

__all__ = ["BLOCKS", "SUBSETS", "SchurBlocks", "schur_blocks", "ablate", "subset_name",
           "departure_from_normality", "schur_ablation", "schur_ablation_summary", "rollout_distance", "rnn",
           "subspace", "paper", "orderings", "invariant", "controls", "nearcut", "families", "fixedpoints",
           "SchurSettings", "SchurStudy", "schur_study"]
