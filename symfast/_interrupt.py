"""Ctrl-C on the command line: never lost, always exit 130 with one line.

Python drops a KeyboardInterrupt in three places: one raised inside a finaliser (`__del__`, a weakref
callback, garbage collection at any point of a run) is printed as "Exception ignored" and the run goes
on; one raised in an atexit callback is printed the same way and the exit status stays 0; and a Ctrl-C
that arrives in the last moments of interpreter shutdown is cleared unhandled (exit 0). So, while a
command runs (`watch`), every Ctrl-C is recorded as well as raised; one swallowed by a finaliser is
raised again at the next progress update or stage message (`check`), and a command that returns
normally after an interrupt that never reached its handler still ends with 130. The process ends in
`exit_process`: atexit callbacks run under a handler that exits 130 at once, then the process exits
with SIGINT blocked, 130 if one arrived meanwhile.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading

__all__ = ["watch", "check", "take", "reporting", "exit_process"]

_state = {"pending": False, "lost": False, "raise": True}


def _on_sigint(signum, frame):
    _state["pending"] = True
    if _state["raise"]:
        raise KeyboardInterrupt


def _unraisable(prev):
    def hook(u):
        if u.exc_type is not None and issubclass(u.exc_type, KeyboardInterrupt):
            _state["lost"] = True  # a Ctrl-C raised inside a finaliser: delivered again by `check`
            return
        prev(u)
    return hook


@contextlib.contextmanager
def watch():
    """Within the block (main thread only): a Ctrl-C raises KeyboardInterrupt as usual and is recorded,
    and one swallowed by a finaliser is noted (`check`, `take`)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old, old_hook = signal.signal(signal.SIGINT, _on_sigint), sys.unraisablehook
    sys.unraisablehook = _unraisable(old_hook)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)
        sys.unraisablehook = old_hook


def check() -> None:
    """Raise KeyboardInterrupt again when a Ctrl-C was swallowed by a finaliser since the last check."""
    if _state["lost"]:
        _state["lost"] = False
        raise KeyboardInterrupt


def take() -> bool:
    """Whether a Ctrl-C arrived since the last call (and forget it): the caller reports it."""
    got = _state["pending"] or _state["lost"]
    _state["pending"] = _state["lost"] = False
    return got


@contextlib.contextmanager
def reporting():
    """Within the block a Ctrl-C is only recorded, not raised: the interrupt is being reported already."""
    raising, _state["raise"] = _state["raise"], False
    try:
        yield
    finally:
        _state["raise"] = raising


def exit_process(status: int, message: str, report: bool = False) -> None:
    """End the process with `status` after the usual shutdown (non-daemon threads, atexit callbacks,
    flushed streams), where a Ctrl-C ends it with 130 and `message` on stderr instead of being lost.
    report: the status is already 130 from an interrupt not yet reported: write `message` first."""
    said = [False]

    def say():
        if not said[0]:
            said[0] = True
            os.write(2, f"{message}\n".encode())

    def interrupted(signum=None, frame=None):
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        say()
        os._exit(130)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, interrupted)
    if report:
        say()
    try:  # what interpreter shutdown would run (private hooks: the process ends below without that shutdown)
        getattr(threading, "_shutdown", lambda: None)()
        getattr(atexit, "_run_exitfuncs", lambda: None)()
    except KeyboardInterrupt:
        interrupted()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    for _ in range(2):  # a backward jump: Python runs a handler due for a signal that arrived just before
        pass
    if _state["pending"] or signal.SIGINT in signal.sigpending():
        interrupted()
    os._exit(status)
