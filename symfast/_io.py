"""Crash-safe writes shared by the studies (ensembles, training checkpoints)."""
from __future__ import annotations

import os

import torch

__all__ = ["atomic_save"]


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
