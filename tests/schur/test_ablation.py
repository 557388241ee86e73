"""Sector split and block-ablation identities; schur_ablation table and controls."""
import math

import numpy as np
import pytest
import torch

import symfast as sf
from symfast.schur import rnn
from symfast.schur import SUBSETS, ablate, departure_from_normality, schur_blocks


def _W(n=24, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=g, dtype=torch.float64) / n ** 0.5


@pytest.mark.parametrize("alpha", [0.5, 0.9])
def test_blocks_partition_and_identities(alpha):
    W = _W()
    sb = schur_blocks(W, alpha=alpha)
    mod = sb.eigvals.abs()
    assert (mod[:sb.n_R] >= alpha * sb.rho - 1e-12).all() and (mod[sb.n_R:] < alpha * sb.rho).all()
    assert torch.allclose(sb.B + sb.N, sb.T) and torch.allclose(sb.Q @ sb.T @ sb.Q.T, W, atol=1e-13)
    masks = list(sb.masks.values())
    union = masks[0] | masks[1] | masks[2]
    assert not (masks[0] & masks[1]).any() and not (masks[1] & masks[2]).any() and not (masks[0] & masks[2]).any()
    assert torch.equal(union, sb.N != 0)  # the blocks own exactly the coupling entries
    W_ab, rows = ablate(sb)
    assert len(rows) == 8 and rows[0]["subset"] == "full" and W_ab.shape == (8, 24, 24)
    assert torch.allclose(W_ab[0], W, atol=1e-13)
    assert torch.allclose(W_ab[-1], sb.Q @ sb.B @ sb.Q.T, atol=1e-13)
    assert math.isclose(rows[-1]["removed_rel_N"], 1.0, rel_tol=1e-12)
    single = {sub[0]: r["removed_mass"] ** 2 for sub, r in zip(SUBSETS, rows) if len(sub) == 1}
    for k, sub in enumerate(SUBSETS):
        # disjoint blocks: squared masses add; the mass equals ||W - W~||_F (Q orthogonal)
        assert math.isclose(rows[k]["removed_mass"] ** 2, sum(single[b] for b in sub), rel_tol=1e-10, abs_tol=1e-20)
        assert math.isclose(float((W - W_ab[k]).norm()), rows[k]["removed_mass"], rel_tol=1e-9, abs_tol=1e-12)
        Tt = sb.Q.T @ W_ab[k] @ sb.Q
        for b in sub:
            assert float(Tt[sb.masks[b]].abs().sum()) < 1e-11


def test_departure_from_normality_matches_complex_schur():
    import scipy.linalg as sla
    W = _W(16, 3)
    d = departure_from_normality(schur_blocks(W))
    Tc, _ = sla.schur(W.numpy(), output="complex")
    assert math.isclose(d["dep"], np.linalg.norm(np.triu(Tc, 1)), rel_tol=1e-10)
    Q, _ = torch.linalg.qr(_W(16, 4))
    assert departure_from_normality(schur_blocks(Q))["dep"] < 1e-12  # orthogonal => normal


def test_cayley_model_has_no_coupling_and_ablations_do_nothing():
    """The structural fact: an orthogonal W is normal, N ~ 0, every ablation is a no-op."""
    task = rnn.FlipFlop(T=20)
    model = rnn.train(task, n_hidden=16, recurrent="cayley", cfg=rnn.TrainConfig(epochs=1, batches_per_epoch=3, batch=8),
                      progress=False)
    sb = schur_blocks(model.recurrent_weight(torch.float64))
    assert float(sb.N.norm()) < 1e-12 * float(sb.T.norm())
    df = sf.schur_ablation(model, task, n_eval=16, n_random=1)
    assert (df["removed_rel_T"] < 1e-12).all() and (df["dfvu"].abs() < 1e-6).all()


def test_schur_ablation_table_alpha_sweep_refit_copy():
    task = rnn.Copy(n_symbols=4, length=3, replay=6, scored=5)
    model = rnn.train(task, n_hidden=12, recurrent="dense", cfg=rnn.TrainConfig(epochs=1, batches_per_epoch=2, batch=8),
                      progress=False)
    df = sf.schur_ablation(model, task, alpha=[0.85, 0.95], n_eval=32, n_random=3, refit=True)
    assert len(df) == 16 and set(df["alpha"]) == {0.85, 0.95}
    for col in ["fvu", "dfvu", "removed_mass", "sensitivity", "rand_dfvu_mean", "rand_ratio", "nonadditivity",
                "replay_acc", "rand_replay_acc", "fvu_refit", "n_near_cut", "dep_2x2_frac"]:
        assert col in df.columns, col
    full = df[df.subset == "full"]
    assert (full["dfvu"] == 0).all()
    # fixed-readout fvu of the full model, recomputed by hand
    x, y, m = task.sample(32, 10**6)
    with torch.no_grad():
        f = float(rnn.fvu(model(x).double(), y.double(), m))
    assert math.isclose(float(full["fvu"].iloc[0]), f, rel_tol=1e-4)
    # non-additivity column is exactly dfvu - sum of singles
    a = df[df.alpha == 0.95].set_index("subset")
    s = a.loc["-T_RR", "dfvu"] + a.loc["-T_CC", "dfvu"]
    assert math.isclose(a.loc["-T_RR,-T_CC", "nonadditivity"], a.loc["-T_RR,-T_CC", "dfvu"] - s, abs_tol=1e-12)
    summ = sf.schur_ablation_summary(df.assign(task="copy", construction="dense"))
    assert {"dfvu_mean", "dfvu_lo", "dfvu_hi", "n"} <= set(summ.columns) and (summ["n"] == 1).all()


def test_schur_blocks_bad_input():
    with pytest.raises(ValueError, match="alpha"):
        schur_blocks(_W(), alpha=1.5)
    with pytest.raises(ValueError, match=r"\[n, n\]"):
        schur_blocks(torch.zeros(2, 3, 3))
