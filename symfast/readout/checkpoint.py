"""Checkpoints of `fit_sdf` runs: one step boundary's parameters, Adam state, per-model generator
states and losses, written atomically and read back only after every field is checked (a damaged
or foreign file is refused in one line naming it, nothing loaded), and the subset of a run's
checkpoint that holds some of its shapes (`checkpoint_subset`, for the adaptive budget)."""
from __future__ import annotations

import torch

from symfast._io import atomic_save, safe_load

__all__ = ["adam_steps", "save_checkpoint", "resume", "check_adam_state", "checkpoint_subset"]


def adam_steps(opt, params) -> int:
    """Updates Adam has applied (its per-parameter step counter; 0 before the first)."""
    state = opt.state.get(params[0], {})
    return int(state["step"]) if "step" in state else 0


def save_checkpoint(path, config, targets, params, opt, gens, losses, step):
    atomic_save({"config": config, "targets": targets, "step": int(step),
                 "params": [p.detach().cpu() for p in params], "opt": opt.state_dict(),
                 "gens": [g.get_state() for g in gens], "losses": losses}, path)


def resume(path, config, targets, params, opt, gens, losses) -> int:
    """Load a checkpoint into params/opt/gens/losses after checking every field; returns its step."""
    ck = safe_load(path, "fit_sdf checkpoint")
    keys = {"config", "step", "params", "opt", "gens", "losses"}  # (+ "targets" since shapes are stored)
    if not isinstance(ck, dict) or not keys <= set(ck):
        missing = sorted(keys - set(ck)) if isinstance(ck, dict) else "everything"
        raise ValueError(f"{path} is not a fit_sdf checkpoint (missing {missing}); remove it")
    saved = ck["config"] if isinstance(ck["config"], dict) else {}
    if {**saved, "steps": config["steps"]} != config or ck.get("targets", targets) != targets:
        raise ValueError(f"checkpoint {path} was written with other settings; remove it or change the path")
    saved_steps = saved.get("steps")
    if isinstance(saved_steps, bool) or not isinstance(saved_steps, int) or saved_steps < 1:
        raise ValueError(f"checkpoint {path} is damaged: steps {saved_steps!r}; remove it to retrain")
    if saved_steps > config["steps"]:
        raise ValueError(f"checkpoint {path} holds a run of {saved_steps} steps, more than steps={config['steps']}; "
                         f"ask for at least {saved_steps} steps or change the path")

    def bad(what):
        return ValueError(f"checkpoint {path} is damaged: {what}; remove it to retrain")

    step = ck["step"]
    if isinstance(step, bool) or not isinstance(step, int) or not 0 <= step <= saved_steps:
        raise bad(f"step {step!r} is not an integer in [0, {saved_steps}]")
    values = ck["params"]
    if not isinstance(values, list) or len(values) != len(params):
        raise bad(f"{len(values) if isinstance(values, list) else type(values).__name__} parameter tensors, "
                  f"expected {len(params)}")
    for i, (p, v) in enumerate(zip(params, values)):
        if not isinstance(v, torch.Tensor) or v.shape != p.shape or v.dtype != p.dtype:
            raise bad(f"parameter {i} is {getattr(v, 'shape', type(v).__name__)}, expected {list(p.shape)} {p.dtype}")
        if not torch.isfinite(v).all():
            raise bad(f"parameter {i} contains NaN or Inf")
    if not isinstance(ck["gens"], list) or len(ck["gens"]) != len(gens) or \
            not all(isinstance(s, torch.Tensor) and s.dtype == torch.uint8 for s in ck["gens"]):
        raise bad(f"expected {len(gens)} generator states")
    if not isinstance(ck["losses"], torch.Tensor) or ck["losses"].shape != (saved_steps, losses.shape[1]):
        raise bad(f"losses must be {[saved_steps, losses.shape[1]]}")
    check_adam_state(ck["opt"], params, opt.param_groups[0], bad)
    try:
        opt.load_state_dict(ck["opt"])
        for g, s in zip(gens, ck["gens"]):
            g.set_state(s)
    except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as e:
        raise bad(f"optimiser or generator state ({type(e).__name__}: {e})") from None
    if any(int(opt.state[p]["step"]) != step for p in params if p in opt.state) or \
            (step > 0 and len(opt.state) != len(params)):
        raise bad(f"optimiser state does not belong to step {step}")
    with torch.no_grad():
        for p, v in zip(params, values):
            p.copy_(v)
    losses[:saved_steps].copy_(ck["losses"])
    return step


def check_adam_state(sd, params, ours: dict, bad) -> None:
    """Raise bad(...) unless `sd` is Adam state for exactly `params`: one group with the run's
    hyperparameters (`ours`: the fresh optimiser's group), and per parameter a step count and finite
    moments of the parameter's shape (second moment >= 0)."""
    if not isinstance(sd, dict) or not isinstance(sd.get("state"), dict) or \
            not isinstance(sd.get("param_groups"), list) or len(sd["param_groups"]) != 1 or \
            not isinstance(sd["param_groups"][0], dict):
        raise bad("optimiser state is not one Adam parameter group")
    group = sd["param_groups"][0]
    if group.get("params") != list(range(len(params))):
        raise bad(f"optimiser parameter group holds parameters {group.get('params')!r}")
    for key in ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"):
        theirs = tuple(group[key]) if isinstance(group.get(key), (list, tuple)) else group.get(key)
        if theirs != (tuple(ours[key]) if isinstance(ours[key], (list, tuple)) else ours[key]):
            raise bad(f"optimiser {key} is {group.get(key)!r}, expected {ours[key]!r}")
    for k, st in sd["state"].items():
        if not isinstance(k, int) or not 0 <= k < len(params) or not isinstance(st, dict):
            raise bad(f"optimiser state for parameter {k!r}")
        step = st.get("step")
        if not isinstance(step, torch.Tensor) or step.numel() != 1 or not torch.isfinite(step).all() or step < 0:
            raise bad(f"optimiser step count of parameter {k} is {step!r}")
        for name in ("exp_avg", "exp_avg_sq"):
            t = st.get(name)
            if not isinstance(t, torch.Tensor) or t.shape != params[k].shape or t.dtype != params[k].dtype:
                raise bad(f"optimiser {name} of parameter {k} is {getattr(t, 'shape', type(t).__name__)}, "
                          f"expected {list(params[k].shape)} {params[k].dtype}")
            if not torch.isfinite(t).all() or (name == "exp_avg_sq" and (t < 0).any()):
                raise bad(f"optimiser {name} of parameter {k} holds NaN, Inf or negative values")


def checkpoint_subset(path, shapes, out) -> None:
    """Write to `out` the part of `fit_sdf` checkpoint `path` that holds `shapes` (names, a subset of
    the run's shapes): parameters, Adam moments, point generators and losses of their members.

    `fit_sdf(shapes, ..., checkpoint=out)` with the run's other settings then continues exactly as
    the full run would for these members (members train independently), e.g. with more steps.
    """
    ck = safe_load(path, "fit_sdf checkpoint")
    config = ck["config"]
    names = list(config["shapes"])
    missing = [s for s in shapes if s not in names]
    if missing:
        raise ValueError(f"checkpoint {path} holds shapes {names}, not {missing}")
    per_shape = len(config["seeds"])
    keep = [names.index(s) for s in shapes]
    idx = torch.tensor([k * per_shape + j for k in keep for j in range(per_shape)])
    B = len(names) * per_shape

    def rows(t):  # batched tensors have the members first; Adam's step counters are scalars
        return t[idx].clone() if isinstance(t, torch.Tensor) and t.ndim > 0 and t.shape[0] == B else t

    opt = ck["opt"]
    state = {k: {name: rows(v) for name, v in s.items()} for k, s in opt["state"].items()}
    atomic_save({"config": dict(config, shapes=list(shapes)), "targets": [ck["targets"][k] for k in keep],
                 "step": ck["step"], "params": [rows(p) for p in ck["params"]],
                 "opt": dict(opt, state=state), "gens": [ck["gens"][int(i)] for i in idx],
                 "losses": ck["losses"][:, idx].clone()}, out)
