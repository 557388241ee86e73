"""Crash-safe writes shared by the studies (ensembles, training checkpoints)."""
from __future__ import annotations

import contextlib
import os
import signal
import threading

import torch

__all__ = ["atomic_save", "safe_load", "sigint_deferred"]


def atomic_save(obj, path) -> None:
    """torch.save to `path` atomically: a temp file in the same directory (PID in its name),
    fsync, rename, fsync of the directory. An interrupted save leaves the old file (if any)
    and no temp file."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # directories cannot be opened on some platforms; the rename is still atomic
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def safe_load(path, what: str):
    """torch.load(weights_only=True) on CPU; a truncated or corrupt file raises ValueError naming it."""
    path = os.fspath(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as e:  # EOFError, RuntimeError (zip), UnpicklingError, ...: all mean "not readable"
        raise ValueError(f"{path}: cannot read {what} file; it is truncated, corrupt or not such a file "
                         f"({type(e).__name__}: {e})") from None


@contextlib.contextmanager
def sigint_deferred():
    """Hold a Ctrl-C that arrives inside the block and deliver it when the block ends (main
    thread with a Python SIGINT handler only; elsewhere the block runs as is)."""
    if threading.current_thread() is not threading.main_thread() or \
            not callable(signal.getsignal(signal.SIGINT)):
        yield
        return
    got = []
    old = signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        if got:
            signal.raise_signal(signal.SIGINT)
