"""Crash-safe writes shared by the studies and commands (ensembles, checkpoints, tables, figures).

Every write goes to a temporary file in the target's directory (PID in its name), is
fsynced and renamed over the target, then the directory is fsynced: a crash, kill -9 or
full disk leaves the old file (or none), never a partial one. A Ctrl-C that arrives during
the write is held until the file is complete and then delivered. A failed write (full or
read-only disk) raises `OSError` with the target's path as `filename`; torch's zip writer,
which reports the failure of its file as a `RuntimeError`, is unwrapped to that `OSError`.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import signal
import threading

import torch

__all__ = ["atomic_save", "atomic_path", "atomic_write", "atomic_write_bytes", "safe_load", "sigint_deferred"]


def _tmp_for(path: str) -> str:
    folder, name = os.path.split(path)
    stem, ext = os.path.splitext(name)  # keep the extension: writers such as savefig infer the format
    return os.path.join(folder, f".{stem}.tmp-{os.getpid()}{ext}")


def _fsync_dir(folder: str) -> None:
    try:
        fd = os.open(folder or ".", os.O_RDONLY)
    except OSError:  # directories cannot be opened on some platforms; the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync directories
    finally:
        os.close(fd)


def _write_error(e: BaseException, path: str) -> BaseException:
    """The error a failed write of `path` should raise: an OSError naming `path`, or the interrupt.

    torch.save runs the file's write inside its C++ zip writer, which replaces whatever the
    write raised (ENOSPC, a KeyboardInterrupt) by `RuntimeError('... unexpected pos ...')`
    with the original as its context.
    """
    seen, cause = set(), e
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, KeyboardInterrupt):
            return KeyboardInterrupt(f"interrupted while writing {path}; the previous file is intact")
        if isinstance(cause, OSError):
            return OSError(cause.errno or errno.EIO, cause.strerror or str(cause), path)
        cause = cause.__cause__ or cause.__context__
    if isinstance(e, RuntimeError) and any(s in str(e) for s in ("PytorchStreamWriter", "file write failed",
                                                                 "unexpected pos", "inline_container")):
        return OSError(errno.EIO, "the write failed (disk full or not writable?)", path)
    return e


@contextlib.contextmanager
def atomic_path(path):
    """Yield a temporary path beside `path` (same extension) to write to; on success it becomes `path`.

    `with atomic_path("t.csv") as tmp: df.to_csv(tmp)` leaves either the old `t.csv` or the
    complete new one, never a partial or empty file. Ctrl-C during the block is held until the
    rename is done; a failed write raises OSError naming `path` and removes the temporary file.
    """
    path = os.fspath(path)
    tmp = _tmp_for(path)
    with sigint_deferred():
        try:
            yield tmp
            with open(tmp, "rb+") as f:
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except (OSError, RuntimeError, KeyboardInterrupt) as e:
            err = _write_error(e, path)
            if err is e:
                raise
            raise err from None
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
        _fsync_dir(os.path.dirname(path))


def atomic_write(path, writer) -> None:
    """`writer(tmp)` writes a temporary path beside `path`; the complete file then replaces `path`
    (`atomic_write("t.csv", lambda p: df.to_csv(p, index=False))`, `atomic_write("f.png", fig.savefig)`)."""
    with atomic_path(path) as tmp:
        writer(tmp)


def atomic_write_bytes(path, data: bytes) -> None:
    """Write `data` to `path` atomically (see `atomic_path`)."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(data)


def atomic_save(obj, path) -> None:
    """torch.save to `path` atomically (see `atomic_path`): an interrupted or failed save leaves the
    old file (if any) and no temporary file; a full disk raises OSError naming `path`."""
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        torch.save(obj, f)


def safe_load(path, what: str, data: bytes | None = None):
    """torch.load(weights_only=True) on CPU; a truncated or corrupt file raises ValueError naming it.

    This is the package's one loader of torch files: a results folder may come from someone else,
    and weights_only refuses any pickled object that is not plain data, so loading never runs code.
    `data`: the file's bytes, already read (`read_bounded`); `path` then only names it in errors.
    """
    path = os.fspath(path)
    try:
        return torch.load(path if data is None else io.BytesIO(data), map_location="cpu", weights_only=True)
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except Exception as e:  # EOFError, RuntimeError (zip), UnpicklingError, ...: all mean "not readable"
        detail = str(e).strip().splitlines()[0][:160] if str(e).strip() else ""
        raise ValueError(f"{path}: cannot read {what} file; it is truncated, corrupt or not such a file "
                         f"({type(e).__name__}: {detail})") from None


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
