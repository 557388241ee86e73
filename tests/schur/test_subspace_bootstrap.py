"""The batched bootstrap of `subspace.damage_predictors` against the loop it replaced, kept here
verbatim: bit-identical tables (same random stream, same arithmetic), with ties, dropped rows,
a constant predictor and per-group bootstraps."""
import numpy as np
import pandas as pd
import pytest

from symfast.schur.subspace import PREDICTORS, _spearman, damage_predictors


def _damage_predictors_loop(df, target="dfvu", predictors=PREDICTORS, n_boot=1000, seed=0, by=None):
    """The previous formulation: one `_spearman` call per bootstrap resample."""
    predictors = list(predictors)
    df = df[np.isfinite(df[[target, *predictors]].to_numpy(dtype=float)).all(1)]
    groups = [(None, df)] if by is None else list(df.groupby(by, sort=False))
    rng = np.random.default_rng(seed)
    out = []
    for key, g in groups:
        for p in predictors:
            sel = g[[p, target]].to_numpy(dtype=float)
            n = len(sel)
            rho = _spearman(sel[:, 0], sel[:, 1]) if n else float("nan")
            boots = []
            for _ in range(n_boot if n >= 3 else 0):
                i = rng.integers(0, n, n)
                r = _spearman(sel[i, 0], sel[i, 1])
                if np.isfinite(r):
                    boots.append(r)
            lo, hi = (np.percentile(boots, [2.5, 97.5]) if len(boots) > 10 else (np.nan, np.nan))
            row = {} if by is None else {by: key}
            out.append({**row, "predictor": p, "n": n, "rho": rho, "rho_lo": float(lo), "rho_hi": float(hi)})
    return pd.DataFrame(out)


def _proj(rows, seed, ties=False, constant=None):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({p: rng.normal(size=rows) for p in PREDICTORS})
    df["dfvu"] = df["removed_rel_T"] * 0.5 + rng.normal(size=rows)
    df["task"] = rng.choice(["copy", "sine", "flipflop"], size=rows)
    if ties:
        df = df.round(0)
    if constant:
        df[constant] = 1.0
    df.loc[df.index[:2], "pc_overlap"] = np.nan  # rows dropped for every predictor
    return df


@pytest.mark.parametrize("rows,ties,constant", [(5, False, None), (6, True, None), (24, False, None),
                                                (135, False, None), (40, True, None),
                                                (24, False, "readout_overlap")],
                         ids=["5", "6-ties", "24", "135", "40-ties", "24-constant"])
@pytest.mark.parametrize("by", [None, "task"])
def test_damage_predictors_equal_the_loop(rows, ties, constant, by):
    df = _proj(rows, rows, ties, constant)
    new = damage_predictors(df, n_boot=150, seed=3, by=by)
    old = _damage_predictors_loop(df, n_boot=150, seed=3, by=by)
    pd.testing.assert_frame_equal(new, old, check_exact=True)
