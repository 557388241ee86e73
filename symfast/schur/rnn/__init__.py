"""Tanh RNNs, the four tasks of the Schur-ablation study, and their training."""
from symfast.schur.rnn.model import CONSTRUCTIONS, TanhRNN
from symfast.schur.rnn.tasks import TASKS, ContextIntegration, Copy, FlipFlop, SineGeneration, Task, fvu, make_task
from symfast.schur.rnn.train import (TrainConfig, evaluate, load_checkpoint, save_checkpoint, train, train_many,
                                    train_seeds)

__all__ = ["TanhRNN", "CONSTRUCTIONS", "Task", "FlipFlop", "SineGeneration", "ContextIntegration", "Copy",
           "TASKS", "make_task", "fvu", "TrainConfig", "train", "train_seeds", "train_many", "evaluate", "save_checkpoint", "load_checkpoint"]
