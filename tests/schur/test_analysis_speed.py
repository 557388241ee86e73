"""The faster analysis after training gives the reference results: one rollout per distinct matrix
equals rolling out every matrix, and the analysis at a fixed single thread gives the same table
whatever the caller's thread count."""
import pandas as pd
import pytest
import torch

from symfast.ops.rnn_rollout import rnn_rollout
from symfast.schur.ablation import rollout_variants
from symfast.schur.rnn import TanhRNN, make_task
from symfast.schur.study import SchurSettings, analyse_model
from symfast.schur.threads import analysis_threads, kernel_threads


def _model(n_in, n_hidden, n_out, seed=0):
    m = TanhRNN(n_in, n_hidden, n_out, recurrent="dense", generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():  # some non-normal structure, so that the ablations remove something
        m.rnn.weight_hh_l0.add_(0.3 * torch.triu(torch.randn(n_hidden, n_hidden,
                                                             generator=torch.Generator().manual_seed(seed + 1)), 1)
                                / n_hidden ** 0.5)
    return m


@pytest.mark.parametrize("return_hidden", [False, True])
def test_rollout_variants_once_per_distinct_matrix_equals_every_matrix(return_hidden):
    task = make_task("flipflop")
    model = _model(task.n_in, 12, task.n_out)
    W = model.recurrent_weight(torch.float64).detach()
    z = W.clone()
    z[0, 0] = 0.0
    zn = z.clone()
    zn[0, 0] = -0.0  # equal as numbers, not as bits: rolled out separately
    Ws = torch.stack([W, z, W * 0.9, W, zn, z, W + 1e-12])  # W + 1e-12 rounds to W in float32
    x, _, _ = task.sample(5, 0)
    got = rollout_variants(model, Ws, x, return_hidden=return_hidden)
    ref = rnn_rollout(Ws.float(), model.input_weight.detach().float(), model.readout.detach().float(), x,
                         return_hidden=return_hidden, backend="cpu")
    for g, r in zip(got, ref) if return_hidden else [(got, ref)]:
        assert g.shape == r.shape and torch.equal(g, r)
    with pytest.raises(ValueError, match=r"\[S, H, H\]"):
        rollout_variants(model, W, x)


def test_analysis_threads_one_thread_inside_and_caller_count_for_kernels():
    prev = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with analysis_threads():
            assert torch.get_num_threads() == 1
            with analysis_threads():  # nests
                with kernel_threads():
                    assert torch.get_num_threads() == 2
                assert torch.get_num_threads() == 1
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with kernel_threads():  # outside the analysis: nothing changes
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(prev)


def test_analysis_table_identical_at_one_and_two_threads():
    # H = 27: a size MKL rounds differently at one and two threads
    task = make_task("copy", replay=12, scored=12)
    model = _model(task.n_in, 27, task.n_out, seed=3)
    settings = SchurSettings(alpha=0.9, alphas=(0.85,), alpha_grid=(0.88, 0.9), epsilon=0.05, n_eval=16, n_random=1,
                             n_orders=1, refit=False, near_cut=0.02)
    assert settings.sweep == [0.85, 0.9]
    prev = torch.get_num_threads()
    out = []
    try:
        for nt in (1, 2):
            torch.set_num_threads(nt)
            out.append(analyse_model(model, task, 0, settings))
            assert torch.get_num_threads() == nt
    finally:
        torch.set_num_threads(prev)
    a, b = out
    for name in ("ablation", "subspace", "near_cut", "alpha_grid"):
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True)
    assert a["key"] == b["key"] and torch.equal(a["blocks"].T, b["blocks"].T)
    assert (a["ablation"]["removed_rel_T"] > 1e-3).any()  # the ablations removed something


def test_schur_blocks_reused_form_equals_a_fresh_factorisation_and_is_a_copy():
    from symfast.schur import blocks
    W = _model(2, 20, 2, seed=5).recurrent_weight(torch.float64).detach()
    first = blocks.schur_blocks(W, alpha=0.9)
    first.T.zero_()  # a caller changing its split in place
    again = blocks.schur_blocks(W.clone(), alpha=0.9)
    blocks._FORMS.clear()
    fresh = blocks.schur_blocks(W, alpha=0.9)
    for f in ("Q", "T", "B", "N", "eigvals", "near_cut"):
        assert torch.equal(getattr(again, f), getattr(fresh, f)), f
    assert again.n_R == fresh.n_R and again.rho == fresh.rho and not torch.equal(again.T, first.T)
    assert all(torch.equal(again.masks[b], fresh.masks[b]) for b in fresh.masks)
    assert blocks.schur_blocks(W, alpha=0.85).n_R <= fresh.n_R  # another alpha: another form


def _every_matrix(model, W, x, return_hidden=False, backend="auto"):
    """The reference: one rollout per matrix, repeats included."""
    out = rnn_rollout(W.float(), model.input_weight.detach().float(), model.readout.detach().float(), x,
                      return_hidden=return_hidden, backend=backend)
    return out, torch.arange(W.shape[0])


@pytest.mark.parametrize("recurrent", ["dense", "cayley"])
def test_schur_ablation_and_alpha_grid_scored_once_per_distinct_rollout_equal_every_rollout(recurrent, monkeypatch):
    from symfast.schur import ablation, nearcut
    task = make_task("copy", replay=12, scored=12)
    model = _model(task.n_in, 16, task.n_out, seed=7) if recurrent == "dense" else \
        TanhRNN(task.n_in, 16, task.n_out, recurrent="cayley", generator=torch.Generator().manual_seed(7))
    kw = dict(alpha=[0.85, 0.9], n_eval=8, n_random=2, n_orders=1, detail_alphas=[0.9])
    W = model.recurrent_weight(torch.float64).detach()
    Ws = torch.cat([W[None], ablation.ablate(ablation.schur_blocks(W, 0.9))[0]])
    _, inv = ablation.distinct_rollouts(model, Ws, task.sample(2, 0)[0])
    assert len(set(inv.tolist())) < len(inv) or recurrent == "dense"  # a normal W: repeats to skip
    new = ablation.schur_ablation(model, task, **kw), nearcut.alpha_stability(model, task, [0.88, 0.9], n_eval=8)
    monkeypatch.setattr(ablation, "distinct_rollouts", _every_matrix)
    monkeypatch.setattr(nearcut, "distinct_rollouts", _every_matrix)
    old = ablation.schur_ablation(model, task, **kw), nearcut.alpha_stability(model, task, [0.88, 0.9], n_eval=8)
    for a, b in zip(new, old):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
