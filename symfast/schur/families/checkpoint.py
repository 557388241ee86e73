"""Checkpoints of the other recurrent families (linear SSM, GRU, LSTM): one file per model.

A checkpoint holds the family, the model's config, its state dict, the task's config, the training
config with the model's seed, the epochs done, the per-batch losses and the model's own Adam state.
It is data, never code (`torch.load(weights_only=True)`). Written at the end of every epoch, it lets
an interrupted run resume at that epoch and a finished run be reloaded instead of retrained: batches
are drawn from (seed, epoch, batch), so a resumed model ends bit-identical to an uninterrupted one
(tested). A file of another run's settings, or a damaged one, is ignored and rewritten.
"""
from __future__ import annotations

import math
import numbers
import os

import torch

from symfast._io import atomic_save, safe_load
from symfast.schur.families.gated import GatedRNN
from symfast.schur.families.ssm import LinearSSM
from symfast.schur.rnn.checkpoint import check_optimizer_moments
from symfast.schur.rnn.config import TrainConfig
from symfast.schur.rnn.tasks import Task

__all__ = ["save_family_checkpoint", "resume_family", "load_family_checkpoint"]

_NOT_COMPARED = ("threads", "engine")  # settings that do not change what is trained (engines agree to rounding)


def _train_key(cfg: TrainConfig, seed: int) -> dict:
    return {k: v for k, v in {**vars(cfg), "seed": int(seed)}.items() if k not in _NOT_COMPARED}


def save_family_checkpoint(path: str, model, task: Task, cfg: TrainConfig, seed: int, epoch: int, optimizer,
                           losses: list) -> None:
    """Write `model` (a LinearSSM or GatedRNN) after `epoch` epochs of (cfg, seed), with its Adam state
    and per-batch losses, to `path` atomically (an interrupted write leaves the old file)."""
    if not isinstance(epoch, int) or not 0 <= epoch <= cfg.epochs:
        raise ValueError(f"epoch must be an integer in 0..{cfg.epochs}, got {epoch!r}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_save({"family": model.family, "model": model.config(), "state": model.state_dict(),
                 "task": task.config(), "train": {**vars(cfg), "seed": int(seed)}, "epoch": epoch,
                 "optimizer": optimizer.state_dict(), "losses": [float(v) for v in losses]}, path)


def _matches(ck, model, task: Task, cfg: TrainConfig, seed: int) -> bool:
    """Whether `ck` is a complete checkpoint of this very model, task and training (finite weights of
    the model's own names and shapes, a sane epoch and losses)."""
    if not isinstance(ck, dict) or not {"family", "model", "state", "task", "train", "epoch", "optimizer",
                                        "losses"} <= set(ck):
        return False
    if (ck["family"] != model.family or ck["model"] != model.config() or ck["task"] != task.config()
            or not isinstance(ck["train"], dict) or {k: v for k, v in ck["train"].items() if k not in _NOT_COMPARED}
            != _train_key(cfg, seed)):
        return False
    own, state = model.state_dict(), ck["state"]
    if not isinstance(state, dict) or set(state) != set(own):
        return False
    if not all(isinstance(state[n], torch.Tensor) and state[n].shape == t.shape and state[n].dtype == t.dtype
               and bool(torch.isfinite(state[n]).all()) for n, t in own.items()):
        return False
    epoch, losses = ck["epoch"], ck["losses"]
    return (isinstance(epoch, numbers.Integral) and not isinstance(epoch, bool) and 0 < epoch <= cfg.epochs
            and isinstance(losses, list) and len(losses) == epoch * cfg.batches_per_epoch
            and all(isinstance(v, numbers.Real) and math.isfinite(v) for v in losses)
            and isinstance(ck["optimizer"], dict))


def resume_family(path: str | None, model, optimizer, task: Task, cfg: TrainConfig, seed: int, losses: list) -> int:
    """Epochs already done by the checkpoint at `path` for this model, task, config and seed: the model's
    weights, `optimizer`'s Adam state and `losses` are loaded from it (cfg.epochs: finished, nothing to
    train). 0, leaving everything as it is, when there is no such file, or it is damaged or of another run.

    Args:
        path: the model's checkpoint (None: no checkpoint). model: a freshly built LinearSSM or GatedRNN.
        optimizer: its torch.optim.Adam over model.parameters(). task, cfg, seed: this run's.
        losses: an empty list that receives the per-batch losses done so far.
    """
    if path is None or not os.path.exists(path):
        return 0
    try:
        ck = safe_load(path, "family checkpoint")
    except ValueError:  # truncated or not a checkpoint: trained again, and the file rewritten
        return 0
    if not _matches(ck, model, task, cfg, seed):
        return 0
    check_optimizer_moments(ck["optimizer"], path)  # a damaged moment would train into NaN: one error naming it
    try:  # the optimiser first: on failure nothing has been loaded
        optimizer.load_state_dict(ck["optimizer"])
    except (ValueError, KeyError, TypeError, RuntimeError):
        return 0
    params = [p for g in optimizer.param_groups for p in g["params"]]
    if not all(optimizer.state.get(p, {}).get(k, p).shape == p.shape for p in params for k in ("exp_avg", "exp_avg_sq")):
        optimizer.state.clear()
        return 0
    model.load_state_dict(ck["state"])
    losses[:] = [float(v) for v in ck["losses"]]
    return int(ck["epoch"])


def load_family_checkpoint(path) -> tuple:
    """(model, task, info) from a checkpoint written by `save_family_checkpoint`: the LinearSSM or
    GatedRNN with its weights, the task rebuilt from its config, and info {"train", "epoch", "losses"}.

    Raises:
        ValueError: naming `path`, when the file is not such a checkpoint or its weights do not fit
            the model its config describes (names, shapes, NaN/Inf).
    """
    from symfast.schur.rnn.tasks import make_task

    ck = safe_load(path, "family checkpoint")

    def bad(what: str) -> ValueError:
        return ValueError(f"{path}: damaged family checkpoint ({what})")
    if not isinstance(ck, dict) or not {"family", "model", "state", "task", "train", "epoch"} <= set(ck):
        raise bad("missing family, model, state, task, train or epoch")
    family, cfg = ck["family"], ck["model"]
    try:
        if family == "ssm":
            model = LinearSSM(cfg["n_in"], cfg["n_hidden"], cfg["n_out"], structure=cfg["structure"])
        elif family in ("gru", "lstm"):
            model = GatedRNN(family, cfg["n_in"], cfg["n_hidden"], cfg["n_out"], bias=bool(cfg["bias"]))
        else:
            raise bad(f"family {family!r}")
        tcfg = dict(ck["task"])
        task = make_task(tcfg.pop("name"), **tcfg)
    except (KeyError, TypeError, ValueError) as e:
        raise bad(f"config: {e}") from None
    own, state = model.state_dict(), ck["state"]
    if (not isinstance(state, dict) or set(state) != set(own)
            or not all(isinstance(state[n], torch.Tensor) and state[n].shape == t.shape
                       and bool(torch.isfinite(state[n]).all()) for n, t in own.items())):
        raise bad("weights of other names or shapes than the model's, or NaN/Inf")
    model.load_state_dict(state)
    return model, task, {"train": ck["train"], "epoch": ck["epoch"], "losses": list(ck.get("losses", []))}
