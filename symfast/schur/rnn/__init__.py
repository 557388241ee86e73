"""Tanh RNNs, the four tasks of the Schur-ablation study, and their training."""
from symfast.schur.rnn.model import CONSTRUCTIONS, TanhRNN
from symfast.schur.rnn.tasks import TASKS, ContextIntegration, Copy, FlipFlop, SineGeneration, Task, fvu, make_task
from symfast.schur.rnn.train import TrainConfig, evaluate, train_seeds, load_checkpoint, save_checkpoint, train

__all__ = ["TanhRNN", "CONSTRUCTIONS", "Task", "FlipFlop", "SineGeneration", "ContextIntegration", "Copy",
           "TASKS", "make_task", "fvu", "TrainConfig", "train", "train_seeds", "evaluate", "save_checkpoint", "load_checkpoint"]
