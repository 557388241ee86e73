"""The `progress` argument of every public symfast function, in one place.

    progress=False (the default everywhere in the library; None means the same): silent.
    progress=True: a tqdm bar over the function's long loops (on stderr) and one INFO record per
        stage on the function's `symfast.*` logger (the command line shows these; a script shows
        them after `logging.basicConfig(level=logging.INFO)`).
    progress=callable: called with each stage's message (a str) and, in place of a bar, with a
        line "<what>: <done>/<total>" about every tenth of a loop (and at its end).

The command line turns progress on unless `--quiet` is given.
"""
from __future__ import annotations

import logging
from typing import Callable, Union

from symfast._interrupt import check

__all__ = ["Progress", "reporter", "Reporter"]

Progress = Union[bool, Callable[[str], None], None]


class Reporter:
    """What a `progress` argument asks for: `reporter(progress)(message)` reports a stage,
    `reporter(progress).bar(total, desc)` a loop (`update`, `set_postfix`, `close`)."""

    def __init__(self, progress: Progress = False, logger: str = "symfast"):
        if not (progress is None or isinstance(progress, bool) or callable(progress)):
            raise TypeError(f"progress must be True, False or a callable taking a str, got {progress!r}")
        self.progress = bool(progress) if progress is None or isinstance(progress, bool) else progress
        self.log = logging.getLogger(logger)

    @property
    def enabled(self) -> bool:
        return self.progress is not False

    def __bool__(self) -> bool:
        return self.enabled

    def __call__(self, message: str) -> None:
        check()  # a Ctrl-C a finaliser swallowed is raised here (symfast._interrupt)
        if self.progress is True:
            self.log.info(message)
        elif self.enabled:
            self.progress(message)

    def bar(self, total: int, desc: str = "", initial: int = 0, unit: str = "it"):
        """A loop of `total` items starting at `initial`: a tqdm bar (True), lines to the callable, or nothing."""
        if self.progress is True:
            from tqdm.auto import tqdm

            return _Checked(tqdm(total=total, initial=initial, desc=desc, unit=unit, leave=False))
        return _Lines(self.progress if self.enabled else None, total, desc, initial)


class _Checked:
    """A tqdm bar whose updates raise a Ctrl-C a finaliser swallowed (symfast._interrupt)."""

    def __init__(self, bar):
        self.bar = bar

    def update(self, n: int = 1):
        check()
        return self.bar.update(n)

    def __getattr__(self, name):
        return getattr(self.bar, name)


class _Lines:
    """A bar's interface reporting "<desc>: <done>/<total> (postfix)" to a callable about every tenth."""

    def __init__(self, fn, total: int, desc: str, initial: int):
        self.fn, self.total, self.desc, self.n, self.postfix = fn, int(total), desc, int(initial), ""
        self.step = max(1, self.total // 10)
        self._last = self.n

    def update(self, n: int = 1) -> None:
        check()
        self.n += n
        if self.fn is not None and (self.n - self._last >= self.step or self.n == self.total):
            self._last = self.n
            self.fn(f"{self.desc}: {self.n}/{self.total}" + (f" ({self.postfix})" if self.postfix else ""))

    def set_postfix(self, refresh: bool = True, **kw) -> None:
        self.postfix = ", ".join(f"{k}={v}" for k, v in kw.items())

    def close(self) -> None:
        pass


def reporter(progress: Progress = False, logger: str = "symfast") -> Reporter:
    """The Reporter for a `progress` argument (TypeError for anything but a bool, None or a callable)."""
    return progress if isinstance(progress, Reporter) else Reporter(progress, logger)
