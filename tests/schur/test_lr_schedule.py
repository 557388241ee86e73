"""The learning-rate schedule and curriculum of TrainConfig: values, checks, exact resume under both engines."""
import pytest
import torch

from symfast.schur import rnn
from symfast.schur.rnn.config import TrainConfig, batch_seed, lr_at, task_at


def test_cosine_schedule_at_chosen_steps():
    # 2 epochs x 5 batches = 10 steps, warmup 2, final ratio 0.1: the decay spans steps 2..9 (7 intervals)
    cfg = TrainConfig(epochs=2, batches_per_epoch=5, lr=1e-3, schedule="cosine", warmup=2, min_lr_ratio=0.1)
    # by hand: step 5 is 3/7 of the decay, cos(3 pi / 7) = 0.2225209340, 1e-3 * (0.1 + 0.9 * 1.2225209340 / 2)
    want = {0: 0.5e-3, 1: 1e-3, 2: 1e-3, 5: 0.650134420e-3, 9: 1e-4}
    for step, v in want.items():
        assert lr_at(cfg, step) == pytest.approx(v, rel=1e-9), step
    assert all(lr_at(cfg, s) >= lr_at(cfg, s + 1) for s in range(1, 9))  # decays after the warmup
    assert lr_at(TrainConfig(lr=3e-3), 1234) == 3e-3  # the paper's constant rate, exactly


def test_bad_schedules_are_refused():
    with pytest.raises(ValueError, match="unknown schedule 'linear'.*constant.*cosine"):
        TrainConfig(schedule="linear").check()
    with pytest.raises(ValueError, match="cosine.? only"):
        TrainConfig(warmup=10).check()
    with pytest.raises(ValueError, match="min_lr_ratio"):
        TrainConfig(schedule="cosine", min_lr_ratio=2.0).check()


@pytest.mark.parametrize("engine", ["fused", "torch"])
def test_resume_with_a_schedule_is_exact(tmp_path, monkeypatch, engine):
    """A cosine-schedule run with a curriculum, stopped after its first epoch, resumes from its checkpoint
    to the weights of an uninterrupted run bit for bit; a checkpoint of another horizon is not resumed."""
    task = rnn.FlipFlop(T=20)  # with a one-epoch curriculum: T = 10 in the first epoch, 20 in the second
    cfg = TrainConfig(epochs=2, batches_per_epoch=3, batch=8, schedule="cosine", warmup=2, min_lr_ratio=0.1,
                      clip=1.0, curriculum=1, engine=engine)
    full = rnn.train_seeds(task, [0], 8, "orthogonal", cfg, progress=False)
    paths = [str(tmp_path / "s0.pt")]
    sample = rnn.FlipFlop.sample  # patched on the class: the curriculum's shortened tasks are FlipFlops too

    def interrupted(self, batch, seed):
        if seed == batch_seed(0, 1, 0):
            raise KeyboardInterrupt
        return sample(self, batch, seed)
    monkeypatch.setattr(rnn.FlipFlop, "sample", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rnn.train_seeds(task, [0], 8, "orthogonal", cfg, checkpoints=paths, progress=False)
    assert rnn.load_checkpoint(paths[0])[2]["epoch"] == 1
    drawn = []
    monkeypatch.setattr(rnn.FlipFlop, "sample", lambda self, b, seed: drawn.append(self.T) or sample(self, b, seed))
    resumed = rnn.train_seeds(task, [0], 8, "orthogonal", cfg, checkpoints=paths, progress=False)
    assert drawn == [20] * 3, "only the second epoch (the full task) is trained again"
    for a, b in zip(full, resumed):
        for (name, p), q in zip(a.state_dict().items(), b.state_dict().values()):
            assert torch.equal(p, q), (engine, name)
    drawn.clear()  # another horizon changes every step's rate: trained from scratch
    rnn.train_seeds(task, [0], 8, "orthogonal", TrainConfig(**{**vars(cfg), "epochs": 3}), checkpoints=paths,
                    progress=False)
    assert drawn == [10] * 3 + [20] * 6


def test_curriculum_shortens_the_first_epochs():
    cfg = TrainConfig(epochs=6, curriculum=3)
    copy, sine = rnn.Copy(), rnn.SineGeneration()
    assert [task_at(copy, cfg, ep).replay for ep in range(5)] == [32, 64, 96, 128, 128]
    assert [task_at(sine, cfg, ep).T for ep in range(5)] == [25, 50, 75, 100, 100]
    assert task_at(copy, cfg, 0).scored == 32 and task_at(copy, cfg, 4) is copy
    assert task_at(rnn.ContextIntegration(), cfg, 0) == rnn.ContextIntegration()  # no shorter version
    with pytest.raises(ValueError, match="curriculum must be in 0..epochs"):
        TrainConfig(epochs=2, curriculum=3).check()
