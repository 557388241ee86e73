"""Crash-safe writes and safe reads shared by the studies and commands (ensembles, checkpoints,
tables, figures, sweep batches): the one place for each.

Reads: `safe_load` is the package's only `torch.load` (weights_only=True: loading never runs
code); `read_bounded` reads a file only when that is bounded (a regular file, inside a given
folder, at most a given size).

Writes: every write goes to a temporary file in the target's directory (host and PID in its
name; `remove_stale_temps` deletes those of dead local writers), is fsynced and renamed over
the target, then the directory is fsynced: a crash, kill -9 or full disk leaves the old file
(or none), never a partial one. A Ctrl-C that arrives during
the write is held until the file is complete and then delivered. A failed write (full or
read-only disk) raises `OSError` with the target's path as `filename`; torch's zip writer,
which reports the failure of its file as a `RuntimeError`, is unwrapped to that `OSError`.
"""
from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import signal
import socket
import stat
import threading

import torch

__all__ = ["HOST_TAG", "atomic_save", "atomic_path", "atomic_write", "atomic_write_bytes", "is_stale_temp",
           "read_bounded", "remove_stale_temps", "safe_load", "sigint_deferred"]


# This machine in temporary file names: several hosts may write one folder on a shared file system,
# and only a temporary file of this host can be checked for a live writer (by its PID).
HOST_TAG = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname()) or "localhost"
_TMP = re.compile(r"\.tmp-(?:(?P<host>[A-Za-z0-9_]+)-)?(?P<pid>[^.-]*)(?:\.[^.]*)?$")


def _tmp_for(path: str) -> str:
    folder, name = os.path.split(path)
    stem, ext = os.path.splitext(name)  # keep the extension: writers such as savefig infer the format
    return os.path.join(folder, f".{stem}.tmp-{HOST_TAG}-{os.getpid()}{ext}")


def is_stale_temp(name: str) -> bool:
    """Whether `name` is a temporary file of an atomic write whose process, on this host, no longer runs.

    Names: `.<stem>.tmp-<host>-<pid><ext>` (this module), `<name>.tmp-<host>-<pid>` and `.<stem>.tmp-<pid><ext>`
    (earlier versions; no host means this host). A live writer's file, or another host's, is not stale.
    """
    m = _TMP.search(name)
    if m is None:
        return False
    if m["host"] is not None and m["host"] != HOST_TAG:
        return False  # another machine's writer (shared file system): cannot tell
    if not m["pid"].isdigit():
        return True  # legacy names without a PID ("merge")
    try:
        os.kill(int(m["pid"]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False  # alive, owned by someone else (or not a PID)
    return False


def remove_stale_temps(folder) -> list[str]:
    """Delete the temporary files that killed writers (kill -9, power loss) left in `folder`; returns them."""
    removed = []
    try:
        names = os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return removed
    for name in names:
        if ".tmp-" in name and is_stale_temp(name):
            try:
                os.remove(os.path.join(folder, name))
                removed.append(os.path.join(folder, name))
            except (FileNotFoundError, IsADirectoryError, PermissionError):
                pass  # gone meanwhile, or not ours to remove
    return removed


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


def read_bounded(path, limit: int, inside=None) -> bytes:
    """The bytes of the regular file `path`, read only when that cannot take unbounded time or memory.

    Refused with a one-line ValueError naming `path`: a file that resolves (through symbolic links)
    outside the folder `inside`, anything but a regular file (a device such as /dev/zero, a FIFO, a
    directory), and a file of more than `limit` bytes (also one that grows past it while read).
    """
    path = os.fspath(path)
    if inside is not None:
        real, root = os.path.realpath(path), os.path.realpath(inside)
        if os.path.commonpath([real, root]) != root:
            raise ValueError(f"{path}: resolves to {real}, outside {os.fspath(inside)}; refused")
    # O_NONBLOCK: opening a FIFO must not wait for a writer (regular files ignore the flag)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{path}: not a regular file; refused")
        if st.st_size > limit:
            raise ValueError(f"{path}: {st.st_size} bytes, more than the {limit} bytes such a file can hold; "
                             "refused")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 24, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ValueError(f"{path}: grew past {limit} bytes while being read; refused")
        return b"".join(chunks)
    finally:
        os.close(fd)


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
