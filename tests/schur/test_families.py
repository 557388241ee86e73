"""Recurrent families (linear SSM, GRU, LSTM) under the Schur ablation: the normal control is a no-op,
a non-normal A is not, every family's own rollout is its forward pass, and bad input is named."""
import pytest
import torch

import symfast as sf
from symfast.schur import families as fam
from symfast.schur import rnn, schur_blocks
from symfast.schur.rnn import TrainConfig
from symfast.testing import assert_close

TINY = TrainConfig(epochs=1, batches_per_epoch=4, batch=8, clip=1.0)
TASK = rnn.FlipFlop(T=25)


def _trained(family, construction, seed=0, H=12, task=TASK):
    return fam.train_family(task, family, construction, [seed], n_hidden=H, cfg=TINY)[0]


def test_rotation_blocks_are_normal_with_the_given_spectrum():
    r = torch.tensor([0.9, 0.5, 0.7], dtype=torch.float64)
    t = torch.tensor([0.3, 2.0, 1.1], dtype=torch.float64)
    A = fam.rotation_blocks(r, t)
    assert A.shape == (6, 6)
    assert torch.allclose(A @ A.T, A.T @ A, atol=1e-15)  # normal
    ev = torch.linalg.eigvals(A)
    want = torch.cat([r * torch.exp(1j * t), r * torch.exp(-1j * t)])
    assert torch.allclose(torch.sort(ev.abs()).values, torch.sort(want.abs()).values, atol=1e-14)
    assert torch.allclose(torch.sort(ev.angle()).values, torch.sort(want.angle()).values, atol=1e-14)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_diagonal_ssm_is_a_no_op_under_every_ablation(seed):
    """A normal A has no coupling blocks: every subset, alpha, ordering and invariant variant removes
    nothing and changes nothing (to float64 rounding)."""
    model = _trained("ssm", "diagonal", seed)
    sb = schur_blocks(model.recurrent_weight(torch.float64))
    assert float(sb.N.norm()) <= 1e-14 * float(sb.T.norm())
    df = sf.schur_ablation(model, TASK, alpha=[0.85, 0.9, 0.95], n_eval=16, n_random=1, n_orders=2)
    assert len(df) == 24
    assert (df["removed_rel_T"] <= df["noop_tol"]).all() and (df["stabiliser"] == "no-op").all()
    for col in ("dfvu", "dfvu_inv", "d_D", "dfvu_order_min", "dfvu_order_max"):
        assert df[col].abs().max() <= 1e-12, col


def test_dense_normal_ssm_is_a_no_op_too():
    """No-op follows from normality, not from the diagonal parametrisation: a rotated normal A in the dense
    structure is ablated to itself."""
    model = fam.LinearSSM(3, 10, 3, structure="dense", generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    Q, _ = torch.linalg.qr(torch.randn(10, 10, generator=g, dtype=torch.float64))
    D = fam.rotation_blocks(0.5 + 0.45 * torch.rand(5, generator=g, dtype=torch.float64),
                            3 * torch.rand(5, generator=g, dtype=torch.float64))
    with torch.no_grad():
        model.A.copy_(Q @ D @ Q.T)
    df = sf.schur_ablation(model, TASK, n_eval=16, n_random=0, n_orders=0)
    assert (df["stabiliser"] == "no-op").all() and df["dfvu"].abs().max() < 1e-6


@pytest.mark.parametrize("seed", [0, 1])
def test_dense_ssm_is_not_a_no_op(seed):
    """The control has teeth: a trained dense (non-normal) A has coupling, and removing it moves the outputs."""
    model = _trained("ssm", "dense", seed)
    df = sf.schur_ablation(model, TASK, alpha=0.9, n_eval=32, n_random=0, n_orders=0).set_index("subset")
    allb = df.loc["-T_RR,-T_C->R,-T_CC"]
    assert allb["removed_rel_N"] == pytest.approx(1.0) and allb["removed_rel_T"] > 0.05
    assert allb["stabiliser"] != "no-op" and allb["d_D"] > 1e-4
    assert df["dfvu"].abs().max() > 1e-4


@pytest.mark.parametrize("family, construction", [("ssm", "dense"), ("ssm", "diagonal"), ("gru", "nobias"),
                                                  ("gru", "bias"), ("lstm", "nobias"), ("lstm", "bias")])
def test_own_rollout_is_the_forward_pass(family, construction):
    """rollout_recurrent with the model's own matrix reproduces forward (torch's GRU / LSTM for the gated cells)."""
    model = fam.make_model(family, construction, 3, 6, 3, generator=torch.Generator().manual_seed(3))
    x, _, _ = TASK.sample(4, 5)
    views = [model] if family == "ssm" else [model.at_gate(gt) for gt in fam.GATES[family]]
    with torch.no_grad():
        y = model(x).double()
        model64 = model.double()
        y64 = model64(x.double())
    for v in views:
        W = v.recurrent_weight(torch.float64)
        yr, hs = v.rollout_recurrent(W[None], x, return_hidden=True)
        assert yr.shape == (1, 4, 25, 3) and hs.shape == (1, 4, 25, 6)
        assert_close("y (float32 forward)", y, yr[0], rtol=1e-4, atol=1e-5)
        assert_close("y (float64 forward)", y64, yr[0])


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_gate_views_replace_exactly_their_slice(kind):
    """Ablating a gate's variant W is the model with that slice of weight_hh_l0 replaced, nothing else."""
    model = fam.GatedRNN(kind, 3, 5, 3, bias=True, generator=torch.Generator().manual_seed(0)).double()
    x, _, _ = TASK.sample(3, 2)
    W = torch.randn(5, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    for k, gate in enumerate(fam.GATES[kind]):
        y = model.at_gate(gate).rollout_recurrent(W[None], x)[0]
        other = fam.GatedRNN(kind, 3, 5, 3, bias=True).double()
        other.load_state_dict(model.state_dict())
        with torch.no_grad():
            other.rnn.weight_hh_l0[k * 5:(k + 1) * 5] = W
            assert_close(f"y with {gate} replaced", other(x.double()), y)
    assert model.gate == fam.DEFAULT_GATE[kind]
    assert torch.equal(model.recurrent_weight(), model.rnn.weight_hh_l0[10:15])  # "n" and "g" are both gate 2


@pytest.mark.parametrize("kind", ["gru", "lstm"])
def test_gated_normal_slice_is_a_no_op(kind):
    """The no-op control for the gated cells: with the ablated gate's slice set to a normal matrix, every
    ablation of that gate returns the model itself, while another (non-normal) gate is changed."""
    model = fam.GatedRNN(kind, 3, 8, 3, bias=True, generator=torch.Generator().manual_seed(0))
    g = torch.Generator().manual_seed(1)
    Q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    D = fam.rotation_blocks(0.3 + 0.6 * torch.rand(4, generator=g, dtype=torch.float64),
                            3 * torch.rand(4, generator=g, dtype=torch.float64))
    with torch.no_grad():
        model.rnn.weight_hh_l0[16:24] = (Q @ D @ Q.T).float()  # gate 2: the GRU candidate n, the LSTM cell input g
    df = sf.schur_ablation(model, TASK, n_eval=16, n_random=0, n_orders=1)
    assert (df["stabiliser"] == "no-op").all() and df["dfvu"].abs().max() < 1e-6
    other = sf.schur_ablation(model.at_gate(fam.GATES[kind][0]), TASK, n_eval=16, n_random=0, n_orders=0)
    assert (other.loc[other.subset == "-T_RR,-T_C->R,-T_CC", "stabiliser"] != "no-op").all()


def test_gated_schur_ablation_runs_per_gate():
    model = _trained("lstm", "nobias", H=8)
    for gate in fam.GATES["lstm"]:
        df = sf.schur_ablation(model.at_gate(gate), TASK, n_eval=16, n_random=1, n_orders=1, refit=True)
        assert len(df) == 8 and df["fvu"].notna().all() and (df.loc[df.subset == "full", "dfvu"] == 0).all()
        assert df["fvu_refit"].notna().all()


@pytest.mark.parametrize("family", ["gru", "ssm"])
def test_family_on_copy_reports_replay(family):
    task = rnn.Copy(n_symbols=3, length=3, replay=6, scored=5)
    model = _trained(family, "bias" if family == "gru" else "dense", H=8, task=task)
    df = sf.schur_ablation(model, task, n_eval=16, n_random=1, n_orders=1)
    full = df[df.subset == "full"].iloc[0]
    x, y, m = task.sample(16, 10**6)
    with torch.no_grad():
        assert float(full["replay_acc"]) == pytest.approx(float(task.replay_accuracy(model(x), y)))
    assert df["replay_acc"].between(0, 1).all()


def test_train_family_is_seeded_and_tanh_delegates():
    a = _trained("gru", "bias", seed=4, H=6)
    b = _trained("gru", "bias", seed=4, H=6)
    c = _trained("gru", "bias", seed=5, H=6)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.rnn.weight_hh_l0, c.rnn.weight_hh_l0)
    t = fam.train_family(TASK, "tanh", "orthogonal", [0], n_hidden=6, cfg=TINY)[0]
    ref = rnn.train_seeds(TASK, [0], 6, "orthogonal", TINY, progress=False)[0]
    assert isinstance(t, rnn.TanhRNN) and all(torch.equal(p, q) for p, q in zip(t.parameters(), ref.parameters()))


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="n_hidden must be even"):
        fam.LinearSSM(2, 5, 1, structure="diagonal")
    with pytest.raises(ValueError, match="structure"):
        fam.LinearSSM(2, 4, 1, structure="banded")
    with pytest.raises(ValueError, match="r_min"):
        fam.LinearSSM(2, 4, 1, structure="diagonal", r_min=0.5, r_max=1.2)
    with pytest.raises(ValueError, match="unknown gru gate 'g'"):
        fam.GatedRNN("gru", 2, 4, 1, gate="g")
    with pytest.raises(ValueError, match="kind"):
        fam.GatedRNN("rnn", 2, 4, 1)
    with pytest.raises(ValueError, match="unknown family 'mamba'"):
        fam.make_model("mamba", "dense", 2, 4, 1)
    with pytest.raises(ValueError, match="unknown lstm construction 'dense'"):
        fam.train_family(TASK, "lstm", "dense", [0], 4, TINY)
    with pytest.raises(ValueError, match="empty seeds"):
        fam.train_family(TASK, "ssm", "dense", [], 4, TINY)
    m = fam.LinearSSM(3, 4, 3)
    with pytest.raises(ValueError, match=r"W must be \[S, 4, 4\], got \[4, 4\]"):
        m.rollout_recurrent(torch.zeros(4, 4), torch.zeros(1, 2, 3))
    with pytest.raises(ValueError, match=r"x must be \[B, T, 3\], got \[1, 2, 2\]"):
        m(torch.zeros(1, 2, 2))
    g = fam.GatedRNN("lstm", 3, 4, 3)
    with pytest.raises(ValueError, match=r"W must be \[S, 4, 4\]"):
        g.rollout_recurrent(torch.zeros(1, 3, 4), torch.zeros(1, 2, 3))
