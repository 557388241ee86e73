"""Task generators (shapes, determinism, definitions), TanhRNN constructions, training, checkpoints."""
import pytest
import torch

from symfast.schur import rnn
from symfast.schur.rnn import TrainConfig


@pytest.mark.parametrize("name", sorted(rnn.TASKS))
def test_task_shapes_and_determinism(name):
    task = rnn.make_task(name)
    x, y, m = task.sample(5, seed=3)
    assert x.shape == (5, task.T, task.n_in) and y.shape == (5, task.T, task.n_out) and m.shape == y.shape
    assert x.dtype == y.dtype == m.dtype == torch.float32
    assert set(m.unique().tolist()) <= {0.0, 1.0} and m.sum() > 0
    x2, y2, m2 = task.sample(5, seed=3)
    assert torch.equal(x, x2) and torch.equal(y, y2) and torch.equal(m, m2)
    x3, _, _ = task.sample(5, seed=4)
    assert not torch.equal(x, x3)
    assert task.config()["name"] == name


def test_flipflop_target_is_last_pulse():
    task = rnn.FlipFlop(n_bits=2, T=50, p_pulse=0.2)
    x, y, _ = task.sample(3, 0)
    for b in range(3):
        for c in range(2):
            last = 0.0
            for t in range(50):
                if x[b, t, c] != 0:
                    last = float(x[b, t, c])
                assert y[b, t, c] == last


def test_sine_and_context_definitions():
    s = rnn.SineGeneration(T=20)
    x, y, _ = s.sample(4, 1)
    om = x[:, 0, 0] * s.omega_max
    assert torch.allclose(y[:, :, 0], torch.sin(om[:, None] * torch.arange(1, 21)), atol=1e-6)
    c = rnn.ContextIntegration(T=30, t_on=2, t_off=20)
    x, y, m = c.sample(6, 2)
    assert (m[:, :20] == 0).all() and (m[:, 20:] == 1).all()
    ctx = x[:, 0, 2:].argmax(-1)
    rel = x[torch.arange(6), 2:20, ctx].mean(1) / c.c_max
    assert torch.allclose(y[:, 25, 0], rel, atol=1e-6)


def test_copy_autonomous_cyclic_replay():
    task = rnn.Copy(n_symbols=5, length=4, replay=10, scored=9)
    x, y, m = task.sample(7, 0)
    assert x.shape == (7, 15, 6) and (x[:, 4, 5] == 1).all() and x[:, 4, :5].sum() == 0
    assert (x[:, 5:] == 0).all()  # autonomous: no input while generating
    seq = x[:, :4, :5].argmax(-1)
    assert torch.equal(y[:, 5:].argmax(-1), seq[:, torch.arange(10) % 4])  # cyclic replay
    assert (m[:, :5] == 0).all() and (m[:, 5:] == 1).all()
    assert task.replay_accuracy(y, y) == 1.0
    assert task.replay_accuracy(torch.stack([y, -y]), y).tolist()[1] < 0.5
    wrong_last = y.clone()
    wrong_last[:, 14] = torch.roll(y[:, 14], 1, -1)  # step 10 of the replay is not scored
    assert task.replay_accuracy(wrong_last, y) == 1.0
    with pytest.raises(ValueError, match="scored"):
        rnn.Copy(replay=5, scored=6)


def test_copy_delayed_single_replay():
    """cyclic=False, delay D: the sequence replayed once, L steps, after D unscored blank steps."""
    task = rnn.Copy(n_symbols=3, length=4, delay=2, cyclic=False)
    assert (task.replay, task.scored, task.start, task.T) == (4, 4, 7, 11)
    x, y, m = task.sample(5, 1)
    assert x.shape == (5, 11, 4) and (x[:, 4, 3] == 1).all() and (x[:, 5:] == 0).all()
    assert torch.equal(y[:, 7:].argmax(-1), x[:, :4, :3].argmax(-1))  # once, in order
    assert (y[:, :7] == 0).all() and (m[:, :7] == 0).all() and (m[:, 7:] == 1).all()
    wrong_delay = y.clone()
    wrong_delay[:, 5] = 1.0  # output during the delay is not scored
    assert task.replay_accuracy(wrong_delay, y) == 1.0
    assert task.replay_accuracy(torch.roll(y, 1, -1), y) == 0.0
    assert task.config() == {"name": "copy", "n_symbols": 3, "length": 4, "replay": 4, "scored": 4, "delay": 2,
                             "cyclic": False}
    assert rnn.make_task(**task.config()) == task and task.shortened(0.5).delay == 1
    cyc = rnn.Copy(length=4, delay=3, replay=6)  # a delayed cyclic replay
    x, y, _ = cyc.sample(2, 0)
    assert torch.equal(y[:, 8:].argmax(-1), x[:, :4, :4].argmax(-1)[:, torch.arange(6) % 4])
    for bad, match in (({"cyclic": False, "replay": 5}, "single replay"), ({"delay": -1}, "delay"),
                       ({"cyclic": 0}, "cyclic")):
        with pytest.raises(ValueError, match=match):
            rnn.Copy(**bad)


def test_copy_defaults_are_the_paper_copy_task():
    """The defaults (cyclic, no delay) are the 137-step task, and their config carries no new keys, so
    checkpoints of the default task keep matching."""
    task = rnn.Copy()
    assert (task.replay, task.scored, task.delay, task.cyclic, task.T) == (128, 128, 0, True, 137)
    assert task.config() == {"name": "copy", "n_symbols": 4, "length": 8, "replay": 128, "scored": 128}
    x, y, m = task.sample(3, 4)
    g = torch.Generator().manual_seed(4)
    oh = torch.nn.functional.one_hot(torch.randint(0, 4, (3, 8), generator=g), 4).float()
    assert torch.equal(x[:, :8, :4], oh) and torch.equal(y[:, 9:], oh[:, torch.arange(128) % 8])
    assert task.shortened(0.25) == rnn.Copy(replay=32, scored=32)


def test_fvu():
    y = torch.randn(4, 6, 2)
    m = torch.ones_like(y)
    assert float(rnn.fvu(y, y, m)) == 0.0
    mean = y.mean((0, 1)).expand_as(y)
    assert abs(float(rnn.fvu(mean, y, m)) - 1.0) < 1e-6


@pytest.mark.parametrize("construction", rnn.CONSTRUCTIONS)
def test_model_constructions(construction):
    model = rnn.TanhRNN(3, 12, 2, recurrent=construction, generator=torch.Generator().manual_seed(0))
    W = model.recurrent_weight(torch.float64)
    assert W.shape == (12, 12) and W.dtype == torch.float64
    if construction in ("orthogonal", "cayley"):
        assert torch.allclose(W.T @ W, torch.eye(12, dtype=torch.float64), atol=1e-6 if construction == "orthogonal" else 1e-13)
    y, h = model(torch.randn(2, 5, 3), return_hidden=True)
    assert y.shape == (2, 5, 2) and h.shape == (2, 5, 12)


def test_model_bad_args():
    with pytest.raises(ValueError, match="recurrent"):
        rnn.TanhRNN(1, 4, 1, recurrent="lstm")
    with pytest.raises(ValueError, match="n_hidden"):
        rnn.TanhRNN(1, 0, 1)
    with pytest.raises(ValueError, match=r"\[B, T, 1\]"):
        rnn.TanhRNN(1, 4, 1)(torch.zeros(2, 3, 2))
    with pytest.raises(ValueError, match="unknown task"):
        rnn.make_task("xor")


def test_train_seeds_equals_single_runs_and_checkpoint(tmp_path):
    task = rnn.FlipFlop(T=15)
    cfg = TrainConfig(epochs=2, batches_per_epoch=3, batch=8)
    paths = [str(tmp_path / f"s{s}.pt") for s in (0, 1)]
    both = rnn.train_seeds(task, [0, 1], n_hidden=10, recurrent="cayley", cfg=cfg, checkpoints=paths, progress=False)
    one = rnn.train(task, n_hidden=10, recurrent="cayley", cfg=TrainConfig(epochs=2, batches_per_epoch=3, batch=8, seed=1),
                    progress=True)
    for name, p in one.named_parameters():
        assert torch.allclose(p, dict(both[1].named_parameters())[name], atol=1e-5), name
    init = rnn.TanhRNN(task.n_in, 10, task.n_out, recurrent="cayley", generator=torch.Generator().manual_seed(1))
    assert not torch.allclose(init.P, one.P)  # training moved the weights
    model, task2, info = rnn.load_checkpoint(paths[1])
    assert info["epoch"] == 2 and info["train"]["seed"] == 1 and task2 == task
    x, _, _ = task.sample(2, 0)
    assert torch.equal(model(x), both[1](x))


def test_evaluate_matches_model_forward():
    task = rnn.SineGeneration(T=12)
    model = rnn.TanhRNN(1, 9, 1, recurrent="normal", generator=torch.Generator().manual_seed(2))
    x, y, m = task.sample(16, 5)
    with torch.no_grad():
        ref = float(rnn.fvu(model(x).double(), y.double(), m))
    assert abs(rnn.evaluate(model, task, batch=16, seed=5) - ref) < 1e-5 * max(1.0, ref)


# The generators as they were before they were vectorised (a Python loop over time for flip-flop,
# advanced indexing for context and copy), kept verbatim: the vectorised ones must give the same
# batches bit for bit, so runs, checkpoints and numbers from before stay valid.
def _flipflop_loop(task, batch, seed):
    g = torch.Generator().manual_seed(int(seed))
    pulse = torch.rand(batch, task.T, task.n_bits, generator=g) < task.p_pulse
    sign = torch.where(torch.rand(batch, task.T, task.n_bits, generator=g) < 0.5, -1.0, 1.0)
    x = pulse * sign
    y = torch.zeros_like(x)
    state = torch.zeros(batch, task.n_bits)
    for t in range(task.T):
        state = torch.where(pulse[:, t], sign[:, t], state)
        y[:, t] = state
    return x, y, torch.ones_like(y)


def _sine_loop(task, batch, seed):
    g = torch.Generator().manual_seed(int(seed))
    om = task.omega_min + (task.omega_max - task.omega_min) * torch.rand(batch, 1, 1, generator=g)
    t = torch.arange(1, task.T + 1, dtype=torch.float32).view(1, -1, 1)
    x = (om / task.omega_max).expand(batch, task.T, 1).clone()
    y = torch.sin(om * t)
    return x, y, torch.ones_like(y)


def _context_loop(task, batch, seed):
    g = torch.Generator().manual_seed(int(seed))
    c = task.c_max * (2 * torch.rand(batch, 1, 2, generator=g) - 1)
    ctx = (torch.rand(batch, generator=g) < 0.5).long()
    x = torch.zeros(batch, task.T, 4)
    win = slice(task.t_on, task.t_off)
    n = task.t_off - task.t_on
    x[:, win, :2] = c + task.noise_std * torch.randn(batch, n, 2, generator=g)
    x[torch.arange(batch), :, 2 + ctx] = 1.0
    ev = x[:, win, :2].mean(1)
    target = ev[torch.arange(batch), ctx] / task.c_max
    y = torch.zeros(batch, task.T, 1)
    m = torch.zeros(batch, task.T, 1)
    y[:, task.t_off:, 0] = target.unsqueeze(1)
    m[:, task.t_off:] = 1.0
    return x, y, m


def _copy_loop(task, batch, seed):
    g = torch.Generator().manual_seed(int(seed))
    K, L = task.n_symbols, task.length
    sym = torch.randint(0, K, (batch, L), generator=g)
    oh = torch.nn.functional.one_hot(sym, K).float()
    x = torch.zeros(batch, task.T, K + 1)
    x[:, :L, :K] = oh
    x[:, L, K] = 1.0
    y = torch.zeros(batch, task.T, K)
    m = torch.zeros(batch, task.T, K)
    y[:, L + 1:] = oh[:, torch.arange(task.replay) % L]
    m[:, L + 1:] = 1.0
    return x, y, m


_BEFORE = {"flipflop": _flipflop_loop, "sine": _sine_loop, "context": _context_loop, "copy": _copy_loop}


@pytest.mark.parametrize("name,kw", [
    ("flipflop", {}), ("flipflop", dict(n_bits=2, T=37, p_pulse=0.3)), ("flipflop", dict(n_bits=1, T=1, p_pulse=0.9)),
    ("sine", {}), ("sine", dict(T=7, omega_min=0.2, omega_max=2.0)),
    ("context", {}), ("context", dict(T=30, t_on=2, t_off=20, c_max=0.2, noise_std=1.0)),
    ("copy", {}), ("copy", dict(n_symbols=5, length=3, replay=10, scored=7)), ("copy", dict(length=1, replay=4, scored=4)),
])
def test_vectorised_generators_give_the_same_batches_bit_for_bit(name, kw):
    from symfast.schur.rnn.config import batch_seed
    task = rnn.make_task(name, **kw)
    for seed in (0, 1, 7, batch_seed(2, 29, 127), rnn.tasks.EVAL_SEED):
        for batch in (1, 5, 64):
            for new, old in zip(task.sample(batch, seed), _BEFORE[name](task, batch, seed)):
                assert new.dtype == old.dtype == torch.float32 and new.shape == old.shape
                assert torch.equal(new.view(torch.int32), old.view(torch.int32)), (name, kw, seed, batch)  # -0.0 too

