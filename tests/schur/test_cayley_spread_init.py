"""The spread-angle init of the Cayley generator (`cayley_init="spread"`): W orthogonal with the drawn
rotation angles, the default init unchanged, both training engines, checkpoints and bad input (the command's
--cayley-init: tests/schur/test_cli.py)."""
import math

import pytest
import torch

from symfast import _ext
from symfast.schur import rnn
from symfast.schur.rnn import TrainConfig
from symfast.schur.rnn.model import SPREAD, cayley, spread_generator


def _model(H, seed=0, init="spread", n_in=5, n_out=4):
    return rnn.TanhRNN(n_in, H, n_out, "cayley", generator=torch.Generator().manual_seed(seed), cayley_init=init)


def _angles(W):
    return torch.sort(torch.linalg.eigvals(W).angle()).values


@pytest.mark.parametrize("H", [1, 2, 7, 12])
def test_spread_init_is_orthogonal_with_the_drawn_rotation_angles(H):
    """The model draws U and V, then (theta, Q): the same generator replayed gives the model's P, and
    W's eigenvalue angles are exactly +-theta (and 0 for odd H)."""
    m = _model(H, seed=3)
    g = torch.Generator().manual_seed(3)
    torch.rand(H, 5, generator=g), torch.rand(4, H, generator=g)  # U and V come first
    P, theta = spread_generator(H, g)
    assert torch.equal(m.P.detach(), P.float())
    assert theta.shape == (H // 2,) and bool((theta.abs() < SPREAD * math.pi).all())
    want = torch.sort(torch.cat([theta, -theta] + ([torch.zeros(1, dtype=theta.dtype)] if H % 2 else []))).values
    W64 = cayley(P)
    assert float((W64.T @ W64 - torch.eye(H, dtype=torch.float64)).abs().max()) < 1e-12
    assert torch.allclose(_angles(W64), want, atol=1e-9)
    Wm = m.recurrent_weight(torch.float64).detach()  # from the float32 P
    assert float((Wm.T @ Wm - torch.eye(H, dtype=torch.float64)).abs().max()) < 1e-12
    assert torch.allclose(_angles(Wm), want, atol=1e-4)


def test_spread_angles_cover_the_circle():
    """Spread, not clustered at 0: of W's 64 eigenvalue angles every quarter of (-0.9 pi, 0.9 pi) gets
    several, while the identity init keeps every angle within 0.7 rad of 0."""
    a = _angles(_model(64).recurrent_weight(torch.float64).detach())
    edges = torch.linspace(-SPREAD * math.pi, SPREAD * math.pi, 5, dtype=torch.float64)
    assert all(int(((a > lo) & (a < hi)).sum()) >= 6 for lo, hi in zip(edges[:-1], edges[1:]))
    assert float(_angles(_model(64, init="identity").recurrent_weight(torch.float64).detach()).abs().max()) < 0.7


def test_identity_init_unchanged_bit_for_bit():
    """The default draws U, V, then P = 0.1 / sqrt(H) randn, as before the option existed; its config
    and state dict carry nothing new."""
    H = 9
    g = torch.Generator().manual_seed(5)
    k = 1.0 / math.sqrt(H)
    U = (2 * torch.rand(H, 5, generator=g) - 1) * k
    V = (2 * torch.rand(4, H, generator=g) - 1) * k
    P = 0.1 * k * torch.randn(H, H, generator=g)
    for m in (_model(H, seed=5, init="identity"),
              rnn.TanhRNN(5, H, 4, "cayley", generator=torch.Generator().manual_seed(5))):
        assert torch.equal(m.input_weight.detach(), U) and torch.equal(m.readout.detach(), V)
        assert torch.equal(m.P.detach(), P)
        assert m.config() == {"n_in": 5, "n_hidden": H, "n_out": 4, "recurrent": "cayley"}
    spread = _model(H, seed=5)
    assert torch.equal(spread.input_weight, m.input_weight) and not torch.equal(spread.P, m.P)
    assert spread.config()["cayley_init"] == "spread" and set(spread.state_dict()) == set(m.state_dict())


@pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
def test_fused_and_torch_engines_agree_and_checkpoints_keep_the_init(tmp_path):
    task = rnn.Copy(length=3, replay=6, scored=6)
    kw = dict(epochs=2, batches_per_epoch=1, batch=4, cayley_init="spread")
    seeds, widths, cons = [0, 1, 0], [8, 7, 6], ["cayley", "cayley", "orthogonal"]
    fused = rnn.train_many(task, seeds, widths, cons, TrainConfig(**kw))
    torch_ = rnn.train_many(task, seeds, widths, cons, TrainConfig(**kw, engine="torch"))
    for a, b in zip(fused, torch_):
        for name, p in b.named_parameters():
            assert torch.allclose(dict(a.named_parameters())[name], p, atol=2e-5, rtol=1e-4), name
    assert [m.cayley_init for m in fused] == ["spread", "spread", "identity"]  # a Cayley model's setting only
    assert not torch.allclose(fused[0].P, _model(8).P)  # P trained from the spread start
    ck = str(tmp_path / "ck.pt")
    rnn.train(task, 8, "cayley", TrainConfig(**{**kw, "epochs": 1}), checkpoint=ck)
    resumed = rnn.train(task, 8, "cayley", TrainConfig(**kw), checkpoint=ck)
    assert torch.equal(resumed.P, fused[0].P)
    m, _, info = rnn.load_checkpoint(ck)
    assert info["epoch"] == 2 and info["train"]["cayley_init"] == "spread" and m.cayley_init == "spread"
    assert torch.equal(m.P, fused[0].P)
    plain = rnn.train(task, 8, "cayley", TrainConfig(**{**kw, "cayley_init": "identity"}), checkpoint=ck)
    assert plain.cayley_init == "identity" and not torch.equal(plain.P, fused[0].P)  # not resumed from spread
    raw = torch.load(ck, weights_only=True)
    raw["model"]["cayley_init"] = "wide"
    torch.save(raw, ck)
    with pytest.raises(ValueError, match="damaged RNN checkpoint.*cayley_init = 'wide'"):
        rnn.load_checkpoint(ck)


def test_bad_cayley_init():
    with pytest.raises(ValueError, match="cayley_init must be one of"):
        _model(4, init="wide")
    with pytest.raises(ValueError, match="cayley construction only"):
        rnn.TanhRNN(2, 4, 1, "orthogonal", cayley_init="spread")
    with pytest.raises(ValueError, match="cayley_init must be one of"):
        TrainConfig(cayley_init="wide").check()
    for H, s in ((0, 0.5), (4, 1.0), (4, 0.0)):
        with pytest.raises(ValueError, match="spread_generator"):
            spread_generator(H, spread=s)


def test_lattice_init_puts_every_angle_on_a_multiple_of_2pi_over_8():
    """cayley_init="lattice": W's eigenvalue angles are the drawn multiples of 2 pi / LATTICE, each inside
    (-SPREAD pi, SPREAD pi) (so 180 degrees, which the plain map cannot reach, is never drawn), and at
    H = 64 every non-zero allowed multiple occurs; a lattice below 2 is refused."""
    from symfast.schur.rnn.model import LATTICE
    step = 2 * math.pi / LATTICE
    m = _model(64, seed=1, init="lattice")
    a = _angles(m.recurrent_weight(torch.float64).detach())
    k = a / step
    assert float((k - k.round()).abs().max()) < 1e-4
    assert bool((a.abs() < SPREAD * math.pi).all())
    got = set(k.round().int().tolist())
    assert {-3, -2, -1, 1, 2, 3} <= got <= {-3, -2, -1, 0, 1, 2, 3}
    assert m.config()["cayley_init"] == "lattice"
    with pytest.raises(ValueError, match="lattice"):
        spread_generator(4, lattice=1)
