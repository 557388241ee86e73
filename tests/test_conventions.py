"""One convention set across the studies, used the way a user calls it: progress= reports on the
long entry points, backend= picks the kernel and gives the same numbers as the reference, seed= /
seeds= name one model / several."""
import re

import numpy as np
import pytest
import torch
from torch import nn

import symfast as sf
from symfast.layerwise import planted_mlp
from symfast.schur import rnn as srnn

FLIP = np.diag([1.0, -1.0, 1.0, -1.0])[[1, 0, 3, 2]]  # swaps coordinates (0 1)(2 3)


def test_schur_ablation_reports_progress_and_takes_the_reference_backend():
    torch.manual_seed(0)
    model = srnn.TanhRNN.from_torch(nn.RNN(3, 8, bias=False), torch.randn(3, 8))
    task = srnn.make_task("flipflop")
    lines = []
    kw = dict(alpha=[0.8, 0.9], n_eval=8, n_random=1, n_orders=0)
    fast = sf.schur_ablation(model, task, progress=lines.append, **kw)
    assert lines and lines[-1].startswith("schur ablation: 2/2")
    ref = sf.schur_ablation(model, task, backend="reference", **kw)
    np.testing.assert_allclose(fast["fvu"], ref["fvu"], rtol=1e-5, atol=1e-6)


def test_layerwise_entry_points_report_progress_and_match_the_reference_backend():
    net, _ = planted_mlp([4, 6, 5, 2], FLIP, activation="tanh", seed=3)
    lines = []
    res = sf.recover_latent_actions(net.layers, {"e": np.eye(4), "f": FLIP}, activation="tanh",
                                    progress=lines.append)
    assert lines[-1].startswith("latent actions: 2/2")
    ref = sf.recover_latent_actions(net.layers, {"e": np.eye(4), "f": FLIP}, activation="tanh", backend="reference")
    for k in ("e", "f"):
        np.testing.assert_allclose(res.elements[k].errors, ref.elements[k].errors, atol=1e-12)
    lines.clear()
    red = sf.identifiable_submodel(net.layers, activation="tanh", progress=lines.append)
    assert red.function_error < 1e-10 and lines[-1].startswith("identifiable sub-model: 2/2")
    lines.clear()
    sf.project_equivariant(net.layers, res, activation="tanh", progress=lines.append)
    assert re.fullmatch(r"projection \(\d+ elements\): 3/3.*", lines[-1]), lines
    with pytest.raises(ValueError, match="backend"):
        sf.recover_latent_actions(net.layers, FLIP, activation="tanh", backend="gpu-please")


def test_readout_backend_reference_gives_the_same_decisions():
    pe = sf.DyadicAxisPE(2)
    torch.manual_seed(0)
    models = [nn.Sequential(pe, nn.Linear(pe.dim, 8), nn.Tanh(), nn.Linear(8, 1)).double() for _ in range(4)]
    kw = dict(shapes=["square"] * 4, sweep=0, num_null=8)
    with pytest.warns(UserWarning, match="budget"):
        auto = sf.readout(models, **kw)
    with pytest.warns(UserWarning, match="budget"):
        ref = sf.readout(models, backend="reference", **kw)
    np.testing.assert_allclose(auto.table["score"], ref.table["score"], rtol=1e-9, atol=1e-12)
    assert list(auto.table["observed"]) == list(ref.table["observed"])
    with pytest.raises(ValueError, match="backend"), pytest.warns(UserWarning, match="budget"):
        sf.readout(models, backend="gpu-please", **kw)


def test_rnn_seed_and_seeds():
    task = srnn.make_task("flipflop")
    cfg = srnn.TrainConfig(epochs=1, batches_per_epoch=2, batch=4, seed=5)
    one = srnn.train(task, n_hidden=4, cfg=cfg, seed=1)
    two = srnn.train_seeds(task, 2, n_hidden=4, cfg=cfg)  # a count: seeds 0 and 1
    assert torch.equal(one.recurrent_weight(torch.float64), two[1].recurrent_weight(torch.float64))
    assert not torch.equal(two[0].recurrent_weight(torch.float64), two[1].recurrent_weight(torch.float64))
    with pytest.raises(ValueError, match="seeds must be a positive count"):
        srnn.train_seeds(task, 0, n_hidden=4, cfg=cfg)
