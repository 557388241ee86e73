"""Multi-head attention: planted head permutations and gauges recovered exactly; batched recovery vs the
per-pair SciPy reference; forward against torch's own multi-head attention; a small trained block."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from symfast.testing import assert_close
from symfast.layerwise.attention import (Attention, attention_experiment, attention_forward, planted_attention,
                                         recover_attention_action, recover_attention_action_reference)


def _rho(d, seed):
    """A random orthogonal involution: a signed permutation made of swaps and sign flips, conjugated by an
    orthogonal matrix (so the test does not only see permutation matrices)."""
    rng = np.random.default_rng(seed)
    p = np.arange(d)
    for i in range(0, d - 1, 2):
        if i == 0 or rng.random() < 0.6:  # never the identity (paired heads would be duplicates)
            p[i], p[i + 1] = i + 1, i
    R = np.eye(d)[p] * np.where(p == np.arange(d), rng.choice([-1.0, 1.0], d), 1.0)[:, None]
    Q, _ = np.linalg.qr(rng.normal(size=(d, d)))
    return Q @ R @ Q.T


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), d=st.integers(3, 7), pairs=st.integers(0, 3), fixed=st.integers(1, 3),
       k=st.integers(1, 3))
def test_planted_heads_and_gauges_recovered_exactly(seed, d, pairs, fixed, k):
    rho = _rho(d, seed)
    att, index = planted_attention(d, 2 * pairs + fixed, k, rho, seed=seed, n_fixed=fixed)
    X = torch.as_tensor(np.random.default_rng(seed).normal(size=(3, 5, d)))
    R = torch.as_tensor(rho)
    assert float((att(X @ R.T) - att(X) @ R.T).abs().max()) < 1e-10  # planted block is equivariant
    act = recover_attention_action(att, rho)
    np.testing.assert_array_equal(act.index, index)
    assert act.qk_error < 1e-10 and act.ov_error < 1e-10 and act.param_error < 1e-8
    assert act.counts() == {"fixed": fixed, "cycled": 2 * pairs}
    if pairs:
        assert act.baseline > 0.3
    ref = recover_attention_action_reference(att.Wq, att.Wk, att.Wv, att.Wo, rho)
    np.testing.assert_array_equal(ref["index"], act.index)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_batched_recovery_matches_reference_on_random_blocks(seed):
    rng = np.random.default_rng(seed)
    att = Attention(*(rng.normal(size=s) for s in ((5, 4, 2), (5, 4, 2), (5, 4, 3), (5, 3, 4))))
    rho = _rho(4, seed)
    act = recover_attention_action(att, rho)
    ref = recover_attention_action_reference(att.Wq, att.Wk, att.Wv, att.Wo, rho)
    np.testing.assert_array_equal(act.index, ref["index"])
    assert_close("qk_error", torch.tensor(ref["qk_error"]), torch.tensor(act.qk_error))
    assert_close("ov_error", torch.tensor(ref["ov_error"]), torch.tensor(act.ov_error))


def test_forward_matches_torch_multi_head_attention():
    torch.manual_seed(0)
    d, H = 6, 3
    mha = torch.nn.MultiheadAttention(d, H, bias=False, batch_first=True).double()
    X = torch.randn(2, 5, d, dtype=torch.float64)
    ref, _ = mha(X, X, X, need_weights=False)
    Wq, Wk, Wv = mha.in_proj_weight.chunk(3)
    k = d // H
    split = lambda W: W.T.reshape(d, H, k).permute(1, 0, 2)  # noqa: E731  [H, d, k]
    Wo = mha.out_proj.weight.T.reshape(H, k, d)
    assert_close("mha", ref, attention_forward(X, split(Wq), split(Wk), split(Wv), Wo))


def test_attention_bad_inputs():
    with pytest.raises(ValueError, match="heads, d, k"):
        Attention(np.zeros((2, 3, 2)), np.zeros((2, 3, 1)), np.zeros((2, 3, 2)), np.zeros((2, 2, 3)))
    with pytest.raises(ValueError, match="NaN"):
        Attention(np.full((1, 2, 1), np.nan), np.zeros((1, 2, 1)), np.zeros((1, 2, 1)), np.zeros((1, 1, 2)))
    att, _ = planted_attention(4, 3, 2, np.eye(4)[[1, 0, 2, 3]], n_fixed=1)
    with pytest.raises(ValueError, match="orthogonal"):
        recover_attention_action(att, 2 * np.eye(4))
    with pytest.raises(ValueError, match=r"rho must be \[4, 4\]"):
        recover_attention_action(att, np.eye(3))


def test_trained_block_equivariant_beats_control():
    rows = {r["variant"]: r for r in attention_experiment(steps=120)}
    eq, ctl = rows["equivariant"], rows["control"]
    assert eq["end_to_end"] < ctl["end_to_end"]
    assert eq["qk_error"] + eq["ov_error"] < ctl["qk_error"] + ctl["ov_error"] < 2 * eq["random"]
