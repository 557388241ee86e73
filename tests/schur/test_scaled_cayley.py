"""The scaled Cayley construction W = (I + A)^{-1} (I - A) D ("Orthogonal Recurrent Neural Networks
with Scaled Cayley Transform", arXiv 1707.09520): orthogonality, the eigenvalue -1, gradients against
autograd of the plain formula, both training engines, checkpoints and bad input."""
import pytest
import torch

from symfast import _ext
from symfast.schur import rnn
from symfast.schur.rnn import TrainConfig
from symfast.schur.rnn.checkpoint import D_NAME

EYE = torch.eye


def _formula(P, d):
    """The plain formula, written out: (I + A)^{-1} (I - A) diag(d), A = P - P^T."""
    A = P - P.T
    eye = EYE(P.shape[0], dtype=P.dtype)
    return torch.linalg.inv(eye + A) @ (eye - A) @ torch.diag(d.to(P.dtype))


def _model(H=16, k=3, seed=0):
    return rnn.TanhRNN(5, H, 4, "cayley", generator=torch.Generator().manual_seed(seed), cayley_neg=k)


def _n_minus_one(W, tol):
    return int(((torch.linalg.eigvals(W) + 1).abs() < tol).sum())


@pytest.mark.parametrize("k", [0, 1, 3, 8, 16])
def test_w_is_orthogonal_in_float32_and_float64(k):
    m = _model(k=k)
    with torch.no_grad():
        m.P.mul_(30)  # far from the identity
    I64 = EYE(16, dtype=torch.float64)
    W64 = m.recurrent_weight(torch.float64).detach()
    assert float((W64.T @ W64 - I64).abs().max()) < 1e-12
    W32 = m.W.detach()
    assert W32.dtype == torch.float32
    assert float((W32.T @ W32 - EYE(16)).abs().max()) < 1e-6
    d = m.cayley_d if k else torch.ones(16)
    assert torch.allclose(W64, _formula(m.P.detach().double(), d), atol=1e-12)
    assert int((d == -1).sum()) == k
    assert torch.allclose(torch.linalg.det(W64), torch.tensor((-1.0) ** k, dtype=torch.float64), atol=1e-10)


@pytest.mark.parametrize("k", [0, 1, 2, 5])
def test_eigenvalue_minus_one(k):
    """At P = 0, W = D has exactly k eigenvalues -1; for any P an odd k keeps det W = -1, so W keeps
    an eigenvalue -1 exactly; the plain map (k = 0) has none, however large P."""
    m = _model(k=k)
    with torch.no_grad():
        m.P.zero_()
    W = m.recurrent_weight(torch.float64).detach()
    assert _n_minus_one(W, 1e-12) == k
    with torch.no_grad():
        m.P.normal_(generator=torch.Generator().manual_seed(1)).mul_(0.5)
    W = m.recurrent_weight(torch.float64).detach()
    gap = float((torch.linalg.eigvals(W) + 1).abs().min())
    if k % 2:
        assert gap < 1e-10
    elif k == 0:
        assert gap > 1e-3


def test_plain_init_unchanged_and_d_seeded():
    """D is drawn after every other init draw: P, U, V equal the plain map's; the -1 positions
    follow the seed."""
    a, b = _model(k=0), _model(k=3)
    for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
        assert na == nb and torch.equal(pa, pb)
    assert a.cayley_d is None and D_NAME not in a.state_dict() and "cayley_neg" not in a.config()
    assert torch.equal(_model(k=3, seed=0).cayley_d, b.cayley_d)
    assert not torch.equal(_model(k=3, seed=1).cayley_d, b.cayley_d)
    assert not b.cayley_d.requires_grad and D_NAME in b.state_dict()
    assert b.config()["cayley_neg"] == 3


@pytest.mark.parametrize("k", [0, 1, 4])
def test_gradients_match_autograd_of_the_plain_formula(k):
    """dL/dP through the parametrization (torch engine) and through the fused engine's closed form
    equal autograd of (I + A)^{-1} (I - A) D written out."""
    from symfast.schur.rnn.train_fused import _cayley_grad
    g = torch.Generator().manual_seed(k)
    H = 9
    d = torch.ones(H, dtype=torch.float64)
    d[torch.randperm(H, generator=g)[:k]] = -1
    P = (0.4 * torch.randn(H, H, generator=g, dtype=torch.float64)).requires_grad_()
    G = torch.randn(H, H, generator=g, dtype=torch.float64)
    W = _formula(P, d)
    ref, = torch.autograd.grad((W * G).sum(), P)
    assert float(ref.abs().max()) > 1e-3
    assert torch.allclose(_cayley_grad(W.detach(), G, d if k else None), ref, atol=1e-12, rtol=1e-10)
    m = rnn.TanhRNN(2, H, 1, "cayley", generator=torch.Generator().manual_seed(3), cayley_neg=k).double()
    with torch.no_grad():
        m.P.copy_(P)
        if k:
            m.cayley_d.copy_(d)
    (m.W * G).sum().backward()
    assert torch.allclose(m.P.grad, ref, atol=1e-12, rtol=1e-10)


@pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
def test_fused_and_torch_engines_agree_and_d_stays_fixed():
    task = rnn.Copy(length=3, replay=6, scored=6)
    kw = dict(epochs=2, batches_per_epoch=3, batch=8, cayley_neg=3)
    fused = rnn.train_many(task, [0, 3, 0], [10, 10, 7], ["cayley", "cayley", "orthogonal"], TrainConfig(**kw))
    torch_ = rnn.train_many(task, [0, 3, 0], [10, 10, 7], ["cayley", "cayley", "orthogonal"],
                            TrainConfig(**kw, engine="torch"))
    for a, b in zip(fused, torch_):
        for name, p in b.named_parameters():
            assert torch.allclose(dict(a.named_parameters())[name], p, atol=2e-5, rtol=1e-4), name
    for m in fused[:2]:
        init = _model(H=10, k=3, seed=int(m is fused[1]) * 3)
        assert m.cayley_neg == 3 and torch.equal(m.cayley_d, init.cayley_d)  # D never trained
        assert not torch.allclose(m.P, init.P)  # P was
    assert fused[2].cayley_neg == 0  # the setting is a Cayley model's only
    plain = rnn.train_many(task, [0], [10], ["cayley"], TrainConfig(**{**kw, "cayley_neg": 0}))[0]
    assert not torch.allclose(plain.P, fused[0].P)  # D changed what was trained


@pytest.mark.skipif(not _ext.cpp_available(), reason="symfast._C not built")
def test_checkpoint_round_trip_resume_and_damaged_d(tmp_path):
    task = rnn.Copy(length=3, replay=6, scored=6)
    cfg = TrainConfig(epochs=2, batches_per_epoch=2, batch=4, cayley_neg=2)
    full = rnn.train(task, 6, "cayley", cfg)
    ck = str(tmp_path / "ck.pt")
    rnn.train(task, 6, "cayley", TrainConfig(**{**vars(cfg), "epochs": 1}), checkpoint=ck)
    resumed = rnn.train(task, 6, "cayley", cfg, checkpoint=ck)
    assert torch.equal(resumed.P, full.P)
    m, _, info = rnn.load_checkpoint(ck)
    assert info["epoch"] == 2 and m.cayley_neg == 2 and torch.equal(m.cayley_d, full.cayley_d)
    assert torch.equal(m.recurrent_weight(torch.float64), full.recurrent_weight(torch.float64))
    # a plain-map run does not resume the scaled run's checkpoint
    plain = rnn.train(task, 6, "cayley", TrainConfig(**{**vars(cfg), "cayley_neg": 0}), checkpoint=ck)
    assert plain.cayley_d is None and rnn.load_checkpoint(ck)[0].cayley_neg == 0
    ck2 = str(tmp_path / "bad.pt")
    rnn.save_checkpoint(ck2, full, task, cfg, epoch=2)
    raw = torch.load(ck2, weights_only=True)
    raw["state"][D_NAME] = torch.ones(6)  # no -1 entry left
    torch.save(raw, ck2)
    with pytest.raises(ValueError, match="damaged RNN checkpoint.*D is not"):
        rnn.load_checkpoint(ck2)
    raw["model"]["cayley_neg"] = 9  # wider than the model
    torch.save(raw, ck2)
    with pytest.raises(ValueError, match="cayley_neg = 9"):
        rnn.load_checkpoint(ck2)


def test_bad_cayley_neg():
    for k in (-1, 17, 1.5, True):
        with pytest.raises(ValueError, match="cayley_neg must be an integer in 0..n_hidden"):
            _model(k=k)
    with pytest.raises(ValueError, match="cayley construction only"):
        rnn.TanhRNN(2, 4, 1, "orthogonal", cayley_neg=1)
    with pytest.raises(ValueError, match="cayley_neg must be an integer >= 0"):
        TrainConfig(cayley_neg=-2).check()
