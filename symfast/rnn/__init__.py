"""Tanh RNNs, the four tasks of papers/003, and their training."""
from symfast.rnn.model import CONSTRUCTIONS, TanhRNN
from symfast.rnn.tasks import TASKS, ContextIntegration, Copy, FlipFlop, SineGeneration, Task, fvu, make_task
from symfast.rnn.train import TrainConfig, evaluate, train_seeds, load_checkpoint, save_checkpoint, train

__all__ = ["TanhRNN", "CONSTRUCTIONS", "Task", "FlipFlop", "SineGeneration", "ContextIntegration", "Copy",
           "TASKS", "make_task", "fvu", "TrainConfig", "train", "train_seeds", "evaluate", "save_checkpoint", "load_checkpoint"]
