"""Schur-coordinate analysis of recurrent weights: sectors, coupling blocks, ablations."""
from symfast.schur.blocks import (BLOCKS, SUBSETS, SchurBlocks, ablate, departure_from_normality, schur_blocks,
                                  subset_name)

__all__ = ["BLOCKS", "SUBSETS", "SchurBlocks", "schur_blocks", "ablate", "subset_name",
           "departure_from_normality"]
