"""TanhRNN on torch.nn.RNN against a plain time-loop reference: outputs and gradients by name."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from symfast.schur import rnn
from symfast.schur.blocks import schur_blocks
from symfast.testing import assert_close


def _reference(x, U, W, V):
    """h_t = tanh(W h_{t-1} + U x_t), y_t = V h_t, h_0 = 0, one Python step at a time."""
    h = x.new_zeros(x.shape[0], W.shape[0])
    hs = []
    for t in range(x.shape[1]):
        h = torch.tanh(h @ W.T + x[:, t] @ U.T)
        hs.append(h)
    hs = torch.stack(hs, 1)
    return hs @ V.T, hs


@settings(max_examples=8, deadline=None)
@given(construction=st.sampled_from(rnn.CONSTRUCTIONS), H=st.integers(2, 12), T=st.integers(1, 9),
       seed=st.integers(0, 99))
def test_forward_and_gradients_match_time_loop(construction, H, T, seed):
    g = torch.Generator().manual_seed(seed)
    model = rnn.TanhRNN(3, H, 2, recurrent=construction, generator=g)
    x, target = torch.randn(4, T, 3, generator=g), torch.randn(4, T, 2, generator=g)
    y, hs = model(x, return_hidden=True)
    # the reference takes W from the same construction (Cayley: the parametrization's output)
    leaf = model.P if construction == "cayley" else model.rnn.weight_hh_l0
    W = rnn.model.cayley(leaf) if construction == "cayley" else leaf
    y_ref, hs_ref = _reference(x, model.input_weight, W, model.readout)
    assert_close("y", y_ref, y)
    assert_close("h", hs_ref, hs)
    params = {"dU": model.input_weight, "dW_or_dP": leaf, "dV": model.readout}
    g_fast = torch.autograd.grad(((y - target) ** 2).sum(), list(params.values()))
    g_ref = torch.autograd.grad(((y_ref - target) ** 2).sum(), list(params.values()))
    for name, a, b in zip(params, g_ref, g_fast):
        assert_close(name, a, b)


def test_cayley_is_a_registered_parametrization_and_exact_in_float64():
    from torch.nn.utils import parametrize
    model = rnn.TanhRNN(2, 32, 1, recurrent="cayley", generator=torch.Generator().manual_seed(0))
    assert parametrize.is_parametrized(model.rnn, "weight_hh_l0")
    assert {n for n, _ in model.named_parameters()} == {"rnn.weight_ih_l0",
                                                       "rnn.parametrizations.weight_hh_l0.original", "readout"}
    with torch.no_grad():
        model.P.mul_(40)  # far from the identity
    W = model.recurrent_weight(torch.float64).detach()
    assert W.dtype == torch.float64
    assert float((W.T @ W - torch.eye(32, dtype=torch.float64)).abs().max()) < 1e-13
    sb = schur_blocks(W)
    assert float(sb.N.norm() / sb.T.norm()) < 1e-13  # float32 would leave ~1e-6
    assert_close("W_float32", W.float(), model.W.detach())


def test_model_rejects_wrong_dtype_and_P_on_free_matrix():
    model = rnn.TanhRNN(1, 4, 1, recurrent="dense")
    with pytest.raises(ValueError, match="float32"):
        model(torch.zeros(1, 2, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match="cayley"):
        model.P


def test_partly_trained_run_resumes_exactly_from_its_checkpoint(tmp_path, monkeypatch):
    from symfast.schur import rnn

    task = rnn.make_task("flipflop")
    small = dict(batches_per_epoch=3, batch=8)
    full = rnn.train(task, n_hidden=8, cfg=rnn.TrainConfig(epochs=2, **small), progress=False)
    ck = str(tmp_path / "ck.pt")
    # a run stopped after its first epoch leaves a checkpoint of epoch 1 (model and Adam state)
    rnn.train(task, n_hidden=8, cfg=rnn.TrainConfig(epochs=1, **small), checkpoint=ck, progress=False)
    drawn = []
    sample = task.sample
    monkeypatch.setattr(task, "sample", lambda *a, **k: drawn.append(k.get("seed")) or sample(*a, **k))
    resumed = rnn.train(task, n_hidden=8, cfg=rnn.TrainConfig(epochs=2, **small), checkpoint=ck, progress=False)
    assert len(drawn) == 3, "only the second epoch's batches are trained again"
    for (name, a), b in zip(full.state_dict().items(), resumed.state_dict().values()):
        assert torch.equal(a, b), name
    # a checkpoint of another run (other learning rate) is not resumed: training starts over
    drawn.clear()
    rnn.train(task, n_hidden=8, cfg=rnn.TrainConfig(epochs=2, lr=2e-3, **small), checkpoint=ck, progress=False)
    assert len(drawn) == 6


def test_a_partly_trained_checkpoint_with_damaged_adam_moments_is_one_error_naming_it(tmp_path):
    from symfast.schur import rnn
    from symfast.schur.rnn.checkpoint import CheckpointError

    task = rnn.make_task("flipflop")
    small = dict(batches_per_epoch=2, batch=4)
    ck = str(tmp_path / "ck.pt")
    rnn.train(task, n_hidden=8, cfg=rnn.TrainConfig(epochs=1, **small), checkpoint=ck, progress=False)
    saved = torch.load(ck, weights_only=True)
    next(iter(saved["optimizer"]["state"].values()))["exp_avg"].view(-1)[0] = float("inf")
    torch.save(saved, ck)
    with pytest.raises(CheckpointError, match=r"ck.pt: optimiser exp_avg of parameter \d+ holds NaN, Inf"):
        rnn.train(task, n_hidden=8, cfg=rnn.TrainConfig(epochs=2, **small), checkpoint=ck, progress=False)
