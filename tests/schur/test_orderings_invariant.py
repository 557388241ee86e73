"""Within-sector orderings, the ordering-invariant ablations, controls, the no-op rule, near-cut helpers."""
import math

import numpy as np
import pytest
import torch

from symfast.schur import rnn
from symfast.schur.ablation import schur_ablation
from symfast.schur.blocks import SUBSETS, ablate, noop_tolerance, schur_blocks, storage_dtype, subset_mask
from symfast.schur.controls import pattern_perturbations
from symfast.schur.invariant import invariant_ablate, invariant_ablate_basis, normal_part
from symfast.schur.nearcut import alpha_stability, near_cut_eigenvalues
from symfast.schur.orderings import order_spread, reorder, sector_blocks, within_sector_orderings


def _W(n=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, n, generator=g, dtype=torch.float64) / n ** 0.5


def _orth(n, g):
    Z, _ = torch.linalg.qr(torch.randn(n, n, generator=g, dtype=torch.float64))
    return Z


@pytest.mark.parametrize("seed", [0, 1])
def test_orderings_are_schur_forms_and_only_c_to_r_is_order_free(seed):
    W = _W(16, seed)
    sb = schur_blocks(W, alpha=0.6)
    assert sb.n_R >= 3 and sb.n_R <= 13
    W0, r0 = ablate(sb)
    moved = {}
    for name, o in within_sector_orderings(sb, k=4, seed=seed):
        assert torch.allclose(o.Q @ o.T @ o.Q.T, W, atol=1e-13) and o.n_R == sb.n_R
        assert torch.allclose(o.Q.T @ o.Q, torch.eye(16, dtype=torch.float64), atol=1e-13)
        # the R eigenvalues stay in R
        assert torch.allclose(torch.sort(o.eigvals[:sb.n_R].abs())[0], torch.sort(sb.eigvals[:sb.n_R].abs())[0])
        Wa, _ = ablate(o)
        for k, sub in enumerate(SUBSETS):
            d = float((Wa[k] - W0[k]).norm()) / max(r0[k]["removed_mass"], 1e-300)
            if sub == ("T_C->R",):
                assert float((Wa[k] - W0[k]).abs().max()) < 1e-12  # a function of W and alpha
            moved[(name, sub)] = d
    # reversing the order inside the sectors moves -T_RR and -T_CC by a sizeable share of what they remove
    assert moved[("reversed", ("T_RR",))] > 0.3 and moved[("reversed", ("T_CC",))] > 0.3


def test_reorder_rejects_non_permutations():
    sb = schur_blocks(_W(), alpha=0.6)
    bR, bC = sector_blocks(sb)
    with pytest.raises(ValueError, match="permutations"):
        reorder(sb, [0] * len(bR), range(len(bC)))
    with pytest.raises(ValueError, match="k must be"):
        within_sector_orderings(sb, k=-1)


def test_order_spread_rule():
    assert not order_spread([0.10, 0.11, 0.12])["order_dependent"]          # spread 0.02 < 0.055
    r = order_spread([0.033, 0.134, 0.08, 0.05])
    assert r["order_dependent"] and math.isclose(r["spread"], 0.101) and r["min"] == 0.033
    assert not order_spread([1e-6, -2e-6, 3e-6])["order_dependent"]         # rollout noise, under the floor
    with pytest.raises(ValueError):
        order_spread([])


def test_normal_part_properties():
    g = torch.Generator().manual_seed(3)
    A = _W(9, 3)
    nu, cond = normal_part(A)
    assert cond >= 1
    assert float((nu @ nu.T - nu.T @ nu).abs().max()) < 1e-13  # normal
    ev_a = np.sort_complex(np.linalg.eigvals(A.numpy()))
    ev_n = np.sort_complex(np.linalg.eigvals(nu.numpy()))
    assert np.allclose(ev_a, ev_n, atol=1e-12)  # same eigenvalues
    assert torch.allclose(normal_part(nu)[0], nu, atol=1e-12)  # idempotent
    Z = _orth(9, g)
    assert torch.allclose(normal_part(Z.T @ A @ Z)[0], Z.T @ nu @ Z, atol=1e-12)  # basis-free
    N = Z @ torch.diag(torch.linspace(-1, 1, 9, dtype=torch.float64)) @ Z.T
    assert torch.allclose(normal_part(N)[0], N, atol=1e-12)  # a normal matrix is its own normal part
    with pytest.raises(ValueError, match="defective"):
        normal_part(torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64))
    with pytest.raises(ValueError, match=r"\[m, m\]"):
        normal_part(torch.zeros(2, 3))


@pytest.mark.parametrize("alpha", [0.6, 0.9])
def test_invariant_ablation_is_the_same_under_reordering_and_basis_change(alpha):
    W = _W(16, 2)
    sb = schur_blocks(W, alpha=alpha)
    W0, rows = invariant_ablate(sb)
    assert torch.allclose(W0[0], W, atol=1e-13)
    assert torch.allclose(W0[2], ablate(sb, [("T_C->R",)])[0][0], atol=1e-13)  # -T_C->R is the paper's
    for _, o in within_sector_orderings(sb, k=4, seed=1):
        assert float((invariant_ablate(o)[0] - W0).abs().max()) < 1e-10
    g = torch.Generator().manual_seed(5)
    nR = sb.n_R
    Z = torch.block_diag(_orth(nR, g), _orth(16 - nR, g))
    Wz, _ = invariant_ablate_basis(sb.Q @ Z, Z.T @ sb.T @ Z, nR)
    assert float((Wz - W0).abs().max()) < 1e-10
    # -T_RR leaves the R sector normal and keeps every eigenvalue of W
    k = SUBSETS.index(("T_RR",))
    A = (sb.Q.T @ W0[k] @ sb.Q)[:nR, :nR]
    assert float((A @ A.T - A.T @ A).abs().max()) < 1e-12
    assert np.allclose(np.sort_complex(np.linalg.eigvals(W0[k].numpy())),
                       np.sort_complex(np.linalg.eigvals(W.numpy())), atol=1e-10)
    with pytest.raises(ValueError, match="must vanish"):
        invariant_ablate_basis(sb.Q, sb.T.T, nR)


def test_pattern_controls_have_the_removed_norm_and_the_right_support():
    sb = schur_blocks(_W(12, 4), alpha=0.6)
    sub = ("T_RR", "T_CC")
    mass = ablate(sb, [sub])[1][0]["removed_mass"]
    ctl = pattern_perturbations(sb, sub, mass, 3, torch.Generator().manual_seed(0))
    M = subset_mask(sb, sub)
    for c, Ws in ctl.items():
        assert Ws.shape == (3, 12, 12)
        for Wp in Ws:
            dT = sb.Q.T @ (Wp - sb.W) @ sb.Q
            assert math.isclose(float(dT.norm()), mass, rel_tol=1e-10)
            if c == "pattern":
                assert float(dT[~M].abs().max()) < 1e-12
            if c == "outside":
                assert float(dT[M].abs().max()) < 1e-12
    with pytest.raises(ValueError):
        pattern_perturbations(sb, (), 1.0, 1)


def test_noop_tolerance_follows_storage_precision():
    Q32 = torch.linalg.qr(_W(16, 7))[0].float()
    assert storage_dtype(Q32.double()) == torch.float32 and storage_dtype(_W()) == torch.float64
    assert math.isclose(noop_tolerance(Q32), 4 * torch.finfo(torch.float32).eps)
    assert noop_tolerance(_W()) < 1e-13


def test_float32_orthogonal_model_is_a_no_op_everywhere():
    """An orthogonal W stored in float32 is normal up to rounding: every ablation is a no-op."""
    task = rnn.FlipFlop(T=12)
    torch.manual_seed(0)
    model = rnn.TanhRNN(task.n_in, 16, task.n_out, recurrent="orthogonal")
    W = model.recurrent_weight(torch.float64)
    assert model.W.dtype == torch.float32
    df = schur_ablation(model, task, alpha=0.9, n_eval=8, n_random=1, n_orders=1)
    assert (df["removed_rel_T"] > 1e-12).any()  # the former absolute 1e-12 rule would call them ablations
    assert (df["stabiliser"] == "no-op").all() and (df["stabiliser_inv"] == "no-op").all()
    assert float(schur_blocks(W).N.norm() / schur_blocks(W).T.norm()) < noop_tolerance(W)


def test_schur_ablation_order_columns_and_controls():
    task = rnn.FlipFlop(T=16)
    torch.manual_seed(1)
    model = rnn.TanhRNN(task.n_in, 10, task.n_out, recurrent="normal")
    df = schur_ablation(model, task, alpha=[0.6, 0.9], n_eval=8, n_random=2, n_orders=2, detail_alphas=[0.6])
    d = df[df.alpha == 0.6].set_index("subset")
    assert (d["n_orders"].iloc[1:] == 4).all()
    assert (d["dfvu_order_min"] <= d["dfvu"] + 1e-12).all() and (d["dfvu"] <= d["dfvu_order_max"] + 1e-12).all()
    assert d.loc["-T_C->R", "dfvu_order_spread"] < 1e-6 and not d.loc["-T_C->R", "order_dependent"]
    assert math.isclose(d.loc["-T_C->R", "dfvu_inv"], d.loc["-T_C->R", "dfvu"], abs_tol=1e-6)
    assert np.isfinite(d["rand_pattern_dfvu_mean"]).all() and np.isfinite(d["rand_outside_dfvu_mean"]).all()
    o = df[df.alpha == 0.9]
    assert o["dfvu_order_spread"].isna().all() and o["rand_pattern_dfvu_mean"].iloc[1:].isna().all()
    with pytest.raises(ValueError, match="n_orders"):
        schur_ablation(model, task, n_orders=-1)


def test_near_cut_lists_planted_eigenvalues_and_alpha_grid():
    W = torch.diag(torch.tensor([1.0, 0.905, 0.897, 0.5, 0.2], dtype=torch.float64))
    nc = near_cut_eigenvalues(W, alpha=0.9, rel=0.01)
    assert list(np.round(nc["modulus"], 3)) == [0.897, 0.905] and list(nc["sector"]) == ["C", "R"]
    with pytest.raises(ValueError):
        near_cut_eigenvalues(W, alpha=1.2)
    task = rnn.FlipFlop(T=10)
    torch.manual_seed(2)
    model = rnn.TanhRNN(task.n_in, 8, task.n_out, recurrent="normal")
    st = alpha_stability(model, task, alphas=[0.5, 0.7, 0.9], n_eval=4)
    assert len(st) == 9 and {"n_R", "dfvu", "dfvu_inv", "dfvu_range", "dfvu_inv_range"} <= set(st.columns)
    assert (st.groupby("alpha")["n_R"].first().diff().dropna() <= 0).all()  # R shrinks as alpha grows


def test_modulus_ties_find_where_the_papers_order_is_ambiguous():
    """Two complex pairs of the same modulus in the R sector: the paper's order between them is open
    (a tie); a generic random W has no tie in either sector."""
    import math

    import numpy as np
    import torch

    from symfast.schur.blocks import schur_blocks
    from symfast.schur.orderings import MODULUS_TIE_TOL, modulus_ties

    def rot(r, th):
        return r * torch.tensor([[math.cos(th), -math.sin(th)], [math.sin(th), math.cos(th)]], dtype=torch.float64)

    W = torch.block_diag(rot(0.95, 0.3), rot(0.95, 1.1), rot(0.5, 0.7), torch.tensor([[0.2]], dtype=torch.float64))
    Q = torch.linalg.qr(torch.randn(7, 7, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))[0]
    sb = schur_blocks(Q @ W @ Q.T, alpha=0.9)
    assert sb.n_R == 4 and modulus_ties(sb) == (1, 0)
    W2 = W.clone()
    W2[2:4, 2:4] = rot(0.95 * (1 + 10 * MODULUS_TIE_TOL), 1.1)  # moduli apart by 10x the tolerance: no tie
    assert modulus_ties(schur_blocks(Q @ W2 @ Q.T, alpha=0.9)) == (0, 0)
    rnd = torch.randn(16, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) / 4
    assert modulus_ties(schur_blocks(rnd, alpha=0.9)) == (0, 0)
    assert np.isfinite(MODULUS_TIE_TOL) and 0 < MODULUS_TIE_TOL < 1e-3
