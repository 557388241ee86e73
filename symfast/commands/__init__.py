"""Subcommands of the `symfast` CLI: each module here defines `NAME`, `HELP`,
`add_arguments(parser)` and `run(args) -> int`; `symfast.cli` discovers them.

Input errors and internal errors are kept apart: a command raises `UsageError` (or
converts a library `ValueError` about the user's input with `input_errors(...)`),
which the CLI prints as one line with exit status 2. Anything else is a bug and keeps
its traceback. The option types below (`device`, `positive_int`, ...) validate values
while parsing, so a bad value also ends in one line and exit 2.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import pickle


class UsageError(Exception):
    """Raised by commands for bad user input; printed as one line without a traceback (exit 2)."""


_INPUT = (ValueError, TypeError, KeyError, EOFError, OSError)
# What a damaged file makes torch.load and the structure checks after it raise (truncated zip:
# RuntimeError; refused pickle: UnpicklingError; wrong nesting: AttributeError/IndexError).
_LOADING = _INPUT + (RuntimeError, pickle.UnpicklingError, AttributeError, IndexError, FloatingPointError)


@contextlib.contextmanager
def input_errors(what: str = "", loading: bool = False):
    """Turn the errors raised while reading user input into a UsageError.

    Use it only around calls whose errors describe the user's input (reading a spec or a
    file the user named, validating settings), never around computation. `loading=True`
    is for reading a file back (a damaged file raises a wider set of exceptions).
    """
    try:
        yield
    except UsageError:
        raise
    except _LOADING if loading else _INPUT as e:
        detail = (e.strerror if isinstance(e, OSError) and e.strerror else str(e)) or type(e).__name__
        detail = " ".join(detail.split())
        raise UsageError(f"{what}: {detail}" if what and what not in detail else detail) from None


@contextlib.contextmanager
def output_errors(path: str):
    """Writing `path` failed for a reason of the user's environment (full or read-only disk): one line.

    torch.save reports a failed write as a RuntimeError from its zip writer; that and OSError
    are the only errors converted.
    """
    try:
        yield
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    except RuntimeError as e:
        if "PytorchStreamWriter failed" not in str(e) and "file write failed" not in str(e):
            raise
        raise UsageError(f"cannot write {path}: the write failed (disk full or not writable?)") from None


def check_backend(backend: str, device: str) -> None:
    """Reject a training backend this build or device cannot run, before anything trains."""
    from symfast.readout.training import check_backend as check_training_backend

    with input_errors("--backend"):
        check_training_backend(backend, device)


# -- option types: argparse turns their ArgumentTypeError into one line and exit 2 ---------------
def device(text: str) -> str:
    """A torch device string that exists on this machine ("cpu", "cuda", "cuda:1")."""
    import torch

    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError):
        raise argparse.ArgumentTypeError(f"unknown device {text!r}; use cpu or cuda[:N]") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text!r}: this torch build or machine has no CUDA device; use cpu")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text!r}: only {torch.cuda.device_count()} CUDA device(s)")
    elif dev.type != "cpu":
        raise argparse.ArgumentTypeError(f"unsupported device {text!r}; use cpu or cuda[:N]")
    return text


def positive_int(text: str) -> int:
    """An integer >= 1."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {v}")
    return v


def finite_float(text: str) -> float:
    """A finite float (rejects nan and inf)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


MAX_LR = 10.0


def learning_rate(text: str) -> float:
    """A learning rate in (0, MAX_LR]; larger values only diverge."""
    v = finite_float(text)
    if not 0 < v <= MAX_LR:
        raise argparse.ArgumentTypeError(f"expected a learning rate in (0, {MAX_LR:g}], got {text!r}")
    return v


# Options validated the same way in every command that has them (applied by symfast.cli, so
# commands declare them as usual).
OPTION_TYPES = {"--device": device, "--threads": positive_int, "--lr": learning_rate, "--threshold": finite_float}
