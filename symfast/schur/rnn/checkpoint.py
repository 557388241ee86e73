"""Reading RNN checkpoints back: every field checked before a model is built from it.

A checkpoint is data, never code (`torch.load(weights_only=True)` refuses pickled objects).
`read_checkpoint` returns the raw dict only when it is complete and consistent: known model
and task configurations, a state dict whose names and shapes are exactly the model's, finite
weights, a training config, an integer epoch, finite losses. Anything else raises one
`ValueError` that names the file. `load_checkpoint` builds the model and task from it.
"""
from __future__ import annotations

import math
import os
import numbers

import torch

from symfast._io import atomic_save, safe_load
from symfast.schur.rnn.model import CAYLEY_INITS, CONSTRUCTIONS, TanhRNN
from symfast.schur.rnn.tasks import Task, make_task


class CheckpointError(ValueError):
    """A checkpoint file of the study is damaged; the message names the file (delete it to train again)."""


def check_optimizer_moments(sd, path) -> None:
    """CheckpointError naming `path` unless every Adam moment in optimiser state `sd` is finite (second
    moment >= 0) with a finite step count >= 0: a damaged moment would train the model into NaN."""
    states = sd.get("state") if isinstance(sd, dict) else None
    if not isinstance(states, dict):
        raise CheckpointError(f"checkpoint {path}: its optimiser state is not Adam state; delete the file to "
                              f"train this model again")
    for k, st in states.items():
        for name, t in (st.items() if isinstance(st, dict) else ()):
            if not isinstance(t, torch.Tensor) or name not in ("step", "exp_avg", "exp_avg_sq"):
                continue
            if not torch.isfinite(t).all() or (name != "exp_avg" and (t < 0).any()):
                raise CheckpointError(f"checkpoint {path}: optimiser {name} of parameter {k} holds NaN, Inf or "
                                      f"negative values; delete the file to train this model again")

__all__ = ["read_checkpoint", "load_checkpoint", "save_checkpoint", "resume", "MAX_HIDDEN"]

MAX_HIDDEN = 1 << 14  # largest width a checkpoint may declare (an [H, H] matrix is built from it)
D_NAME = "rnn.parametrizations.weight_hh_l0.0.d"  # state-dict name of the scaled Cayley map's diagonal


def _is_int(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _expected_state(cfg: dict) -> dict:
    """State-dict names and shapes of TanhRNN(**cfg), computed without building it."""
    I, H, O = cfg["n_in"], cfg["n_hidden"], cfg["n_out"]
    w_hh = "rnn.parametrizations.weight_hh_l0.original" if cfg["recurrent"] == "cayley" else "rnn.weight_hh_l0"
    d = {D_NAME: (H,)} if cfg.get("cayley_neg", 0) else {}  # the scaled Cayley map's fixed D
    return {"rnn.weight_ih_l0": (H, I), w_hh: (H, H), "readout": (O, H), **d}


def read_checkpoint(path) -> dict:
    """The checkpoint at `path` as a dict, after checking every field (see the module docstring).

    Raises:
        ValueError: naming `path`, when the file is truncated, not a checkpoint, holds a pickled
            object, NaN/Inf weights, tensors of the wrong shape or malformed settings.
    """
    ck = safe_load(path, "RNN checkpoint")

    def bad(what: str) -> ValueError:
        return ValueError(f"{path}: damaged RNN checkpoint ({what}); delete it to train again")

    if not isinstance(ck, dict) or not {"model", "state", "task", "train", "epoch"} <= set(ck):
        raise bad("missing model, state, task, train or epoch")
    cfg = ck["model"]
    keys = {"n_in", "n_hidden", "n_out", "recurrent"}
    if not isinstance(cfg, dict) or not keys <= set(cfg) <= keys | {"cayley_neg", "cayley_init"}:
        raise bad(f"model config {cfg!r}")
    for k in ("n_in", "n_hidden", "n_out"):
        if not _is_int(cfg[k]) or not 1 <= cfg[k] <= MAX_HIDDEN:
            raise bad(f"model {k} = {cfg[k]!r}, expected an integer in 1..{MAX_HIDDEN}")
    if cfg["recurrent"] not in CONSTRUCTIONS:
        raise bad(f"recurrent = {cfg['recurrent']!r}")
    if "cayley_neg" in cfg and (cfg["recurrent"] != "cayley" or not _is_int(cfg["cayley_neg"])
                                or not 1 <= cfg["cayley_neg"] <= cfg["n_hidden"]):
        raise bad(f"cayley_neg = {cfg['cayley_neg']!r} for a {cfg['recurrent']!r} model of width {cfg['n_hidden']}")
    if "cayley_init" in cfg and (cfg["recurrent"] != "cayley" or cfg["cayley_init"] not in CAYLEY_INITS[1:]):
        raise bad(f"cayley_init = {cfg['cayley_init']!r} for a {cfg['recurrent']!r} model")
    state = ck["state"]
    expected = _expected_state(cfg)
    if not isinstance(state, dict) or set(state) != set(expected):
        raise bad(f"state holds {sorted(state) if isinstance(state, dict) else type(state).__name__}, "
                  f"expected {sorted(expected)}")
    for name, shape in expected.items():
        t = state[name]
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or not t.is_floating_point():
            raise bad(f"{name} is {getattr(t, 'shape', type(t).__name__)}, expected a float tensor {list(shape)}")
        if not torch.isfinite(t).all():
            raise bad(f"{name} contains NaN or Inf")
    if D_NAME in expected:  # D is +-1 with exactly cayley_neg entries -1
        d = state[D_NAME]
        if not bool(((d == 1) | (d == -1)).all()) or int((d == -1).sum()) != cfg["cayley_neg"]:
            raise bad(f"the scaled Cayley map's D is not +-1 with {cfg['cayley_neg']} entries -1")
    task = ck["task"]
    if not isinstance(task, dict) or not isinstance(task.get("name"), str):
        raise bad(f"task config {task!r}")
    if not isinstance(ck["train"], dict):
        raise bad("train config is not a table")
    if not _is_int(ck["epoch"]) or ck["epoch"] < 0:
        raise bad(f"epoch {ck['epoch']!r}")
    losses = ck.get("losses", [])
    if not isinstance(losses, list) or not all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                               and math.isfinite(v) for v in losses):
        raise bad("losses must be a list of finite numbers")
    if "optimizer" in ck and not isinstance(ck["optimizer"], dict):
        raise bad("optimizer state is not a table")
    return ck


def load_checkpoint(path) -> tuple[TanhRNN, Task, dict]:
    """(model, task, info) from a checkpoint written by `train` / `save_checkpoint`, validated by
    `read_checkpoint`; info holds "train", "epoch" and "losses"."""
    ck = read_checkpoint(path)
    tcfg = dict(ck["task"])
    try:
        task = make_task(tcfg.pop("name"), **tcfg)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{path}: damaged RNN checkpoint (task config: {e}); delete it to train again") from None
    if (task.n_in, task.n_out) != (ck["model"]["n_in"], ck["model"]["n_out"]):
        raise ValueError(f"{path}: damaged RNN checkpoint (the model's sizes do not fit task {task.name!r}); "
                         "delete it to train again")
    model = TanhRNN(**ck["model"])
    model.load_state_dict({k: v.to(torch.float32) for k, v in ck["state"].items()})
    return model, task, {"train": ck["train"], "epoch": ck["epoch"], "losses": list(ck.get("losses", []))}


_NOT_COMPARED = ("epochs", "threads", "engine")  # settings a run may resume under with other values
_DEFAULTS = {"schedule": "constant", "warmup": 0, "min_lr_ratio": 0.0, "curriculum": 0,
             "cayley_neg": 0, "cayley_init": "identity"}  # absent from older checkpoints


def resume(path: str, model: TanhRNN, opt, task: Task, seed: int, cfg, losses: list) -> int:
    """Epochs already done by a partly trained checkpoint of this very run (model, optimiser state);
    0, leaving model and optimiser as they are, when there is none or it belongs to another run.

    Batches are drawn from (seed, epoch, batch), so a run resumed at an epoch boundary ends
    bit-identical to an uninterrupted one.
    """
    if not os.path.exists(path):
        return 0
    try:
        ck = read_checkpoint(path)
    except ValueError:  # unreadable or damaged: retrain from scratch (the file is rewritten at the first epoch)
        return 0
    # the number of epochs sets a learning-rate schedule's horizon: compared unless the rate is constant
    skip = _NOT_COMPARED if getattr(cfg, "schedule", "constant") == "constant" else _NOT_COMPARED[1:]
    same = (isinstance(ck, dict) and "optimizer" in ck and ck.get("model") == model.config()
            and ck.get("task") == task.config()
            and {k: v for k, v in {**_DEFAULTS, **ck.get("train", {})}.items() if k not in skip}
            == {k: v for k, v in {**_DEFAULTS, **vars(cfg), "seed": seed}.items() if k not in skip})
    epoch = ck.get("epoch") if isinstance(ck, dict) else None
    if not same or not isinstance(epoch, int) or not 0 < epoch <= cfg.epochs:
        return 0
    check_optimizer_moments(ck["optimizer"], path)  # before anything is loaded: nothing trains on NaN
    model.load_state_dict(ck["state"])
    opt.load_state_dict(ck["optimizer"])
    losses[:] = list(ck.get("losses", []))
    return epoch


def save_checkpoint(path: str, model: TanhRNN, task: Task, cfg, epoch: int, optimizer=None,
                    losses=None) -> None:
    """Write model weights, model/task/training config (and the optimiser state, so a partly
    trained run resumes exactly; and the per-batch training losses, if given) to `path` (atomically)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    atomic_save({"model": model.config(), "state": model.state_dict(), "task": task.config(),
                 "train": vars(cfg).copy(), "epoch": epoch,
                 **({} if optimizer is None else {"optimizer": optimizer.state_dict()}),
                 **({} if losses is None else {"losses": [float(v) for v in losses]})}, path)
