"""Your own torch.nn.RNN in the Schur analysis: TanhRNN.from_torch reads it exactly."""
import pytest
import torch
from torch import nn

import symfast as sf
from symfast.schur import rnn as srnn


def test_a_torch_rnn_with_its_readout_becomes_the_same_tanh_rnn():
    torch.manual_seed(0)
    rnn, lin = nn.RNN(3, 16, nonlinearity="tanh", bias=False, batch_first=True), nn.Linear(16, 2, bias=False)
    model = srnn.TanhRNN.from_torch(rnn, lin)
    x = torch.randn(4, 9, 3)
    h, _ = rnn(x)
    torch.testing.assert_close(model(x), lin(h), rtol=0, atol=0)
    assert torch.equal(model.recurrent_weight(torch.float64), rnn.weight_hh_l0.double())
    task = srnn.make_task("flipflop")
    model3 = srnn.TanhRNN.from_torch(nn.RNN(3, 16, bias=False), torch.randn(3, 16))  # the task's sizes, a bare V
    df = sf.schur_ablation(model3, task, alpha=0.9, n_eval=8, n_random=1, n_orders=0)
    assert len(df) == 8 and df["fvu"].notna().all()


@pytest.mark.parametrize("make, words", [
    (lambda: nn.RNN(3, 8, nonlinearity="relu", bias=False), "nonlinearity='tanh'"),
    (lambda: nn.RNN(3, 8, num_layers=2, bias=False), "one-layer"),
    (lambda: nn.RNN(3, 8), "nonzero biases"),
])
def test_what_is_not_the_papers_rnn_is_refused_by_name(make, words):
    with pytest.raises(ValueError, match=words):
        srnn.TanhRNN.from_torch(make(), nn.Linear(8, 2, bias=False))


def test_a_bare_torch_module_in_the_analysis_names_the_adapter():
    with pytest.raises(TypeError, match=r"TanhRNN.from_torch\(rnn, readout\)"):
        sf.schur_ablation(nn.RNN(3, 8, bias=False), srnn.make_task("flipflop"))


@pytest.mark.parametrize("cls, bias", [(nn.GRU, False), (nn.GRU, True), (nn.LSTM, False), (nn.LSTM, True)])
def test_a_torch_gru_or_lstm_becomes_the_same_gated_rnn(cls, bias):
    from symfast.schur.families import GatedRNN

    torch.manual_seed(1)
    rnn, lin = cls(3, 8, bias=bias, batch_first=True), nn.Linear(8, 3, bias=False)
    model = GatedRNN.from_torch(rnn, lin)
    x = torch.randn(2, 7, 3)
    h, _ = rnn(x)
    torch.testing.assert_close(model(x), lin(h), rtol=0, atol=0)
    H = 8
    gate = model.gate
    g = ("r", "z", "n").index(gate) if cls is nn.GRU else ("i", "f", "g", "o").index(gate)
    assert torch.equal(model.recurrent_weight(), rnn.weight_hh_l0[g * H:(g + 1) * H])
    df = sf.schur_ablation(model, srnn.make_task("flipflop"), alpha=0.9, n_eval=8, n_random=1, n_orders=0)
    assert len(df) == 8 and df["fvu"].notna().all()


def test_a_bare_torch_gru_in_the_analysis_names_its_adapter():
    with pytest.raises(TypeError, match=r"GatedRNN.from_torch\(rnn, readout, gate=...\)"):
        sf.schur_ablation(nn.GRU(3, 8), srnn.make_task("flipflop"))
    from symfast.schur.families import GatedRNN

    with pytest.raises(ValueError, match="one-layer, one-direction"):
        GatedRNN.from_torch(nn.GRU(3, 8, num_layers=2), nn.Linear(8, 3, bias=False))
