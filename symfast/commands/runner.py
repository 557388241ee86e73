"""Running one command: the parser conventions every command shares, and the one place where
errors become exit statuses (bad input: one line and exit 2; Ctrl-C: exit 130).

`symfast.cli` builds the whole `symfast` parser from the command modules; `invoke` runs one
command module on its own argv (how `symfast reproduce` runs the studies).
"""
from __future__ import annotations

import argparse
import errno
import logging
import re
import sys

from symfast import _interrupt as interrupt
from symfast.commands import OPTION_TYPES, UsageError

__all__ = ["Parser", "HelpFormatter", "apply_conventions", "setup_logging", "execute", "invoke", "INTERRUPTED"]

# OS errors that describe the user's environment (a path, a disk), not a bug.
_ENV_ERRNOS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ENOTDIR,
               errno.EISDIR, errno.ENAMETOOLONG}
_ENV_ERRORS = (FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError)
INTERRUPTED = 130  # the exit status of a Ctrl-C (128 + SIGINT)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (pytest and callers may swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


def is_flag(action) -> bool:
    """Whether an option is an on/off switch (takes no value)."""
    return isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction))


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default exactly once: appended as "(default: X)" unless the help text already
    states it (e.g. "default 1500 in 2D, 300 in 3D"); an unset default reads "not set", never "None".
    On/off flags show none: absent means off."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (re.search(r"\bdefault\b", text, flags=re.I) or not action.option_strings or action.required
                or action.default is argparse.SUPPRESS or is_flag(action)):
            return text
        if action.default is None:
            return f"{text} (default: not set)"
        return super()._get_help_string(action)


class Parser(argparse.ArgumentParser):
    """argparse with each default shown once in --help and usage errors on one line."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", HelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def apply_conventions(p: argparse.ArgumentParser) -> None:
    """Shared option types, a help string on every option (so its default shows), one --quiet."""
    for action in p._actions:
        for opt in action.option_strings:
            if opt in OPTION_TYPES:
                action.type = OPTION_TYPES[opt]
        if action.help is None:
            action.help = " "  # ArgumentDefaultsHelpFormatter then appends the default
    opts = p._option_string_actions
    if "--no-progress" in opts and "--quiet" not in opts:
        old = opts.pop("--no-progress")
        old.option_strings, old.help = ["--quiet"], "no progress bars or progress lines"
        opts["--quiet"] = old
        p.add_argument("--no-progress", dest=old.dest, action="store_true", help=argparse.SUPPRESS)
    elif "--quiet" not in opts:
        p.add_argument("--quiet", action="store_true", help="no progress lines (warnings and results only)")


def setup_logging(quiet: bool) -> None:
    log = logging.getLogger("symfast")
    if not any(getattr(h, "_symfast_cli", False) for h in log.handlers):
        h = _StderrHandler()
        h.setFormatter(logging.Formatter("%(message)s"))
        h._symfast_cli = True
        log.addHandler(h)
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


def execute(args, command: str) -> int:
    """Run a parsed command (`args._run`) and turn its errors into exit statuses."""
    import matplotlib

    matplotlib.use("Agg")  # the commands only write figures to files (the library itself never switches)
    setup_logging(bool(getattr(args, "quiet", False) or getattr(args, "no_progress", False)))
    with interrupt.watch():  # a Ctrl-C swallowed on the way (a finaliser, a broad except) still ends in 130
        try:
            status = int(args._run(args) or 0)
        except UsageError as e:
            print(f"symfast {command}: error: {e}", file=sys.stderr)
            return 2
        except OSError as e:
            if e.errno not in _ENV_ERRNOS and not isinstance(e, _ENV_ERRORS):
                raise
            where = f"{e.filename}: " if e.filename else ""
            print(f"symfast {command}: error: {where}{e.strerror or e}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            status = None
        got = interrupt.take()  # also forgets a Ctrl-C the command reported itself (its status 130)
        if status is None or (got and status != INTERRUPTED):
            with interrupt.reporting():  # a second Ctrl-C cannot break the message
                print(f"symfast {command}: interrupted", file=sys.stderr)
                interrupt.take()
            return INTERRUPTED
        return status


def command_parser(module, parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Fill `parser` with a command module's options and the shared conventions."""
    module.add_arguments(parser)
    apply_conventions(parser)
    parser.set_defaults(_run=module.run)
    return parser


def invoke(module, argv) -> int:
    """`symfast <module.NAME> <argv>`: one command module run on its own arguments."""
    prog = f"symfast {module.NAME}"
    args = command_parser(module, Parser(prog=prog, description=module.HELP)).parse_args(list(argv))
    return execute(args, module.NAME)
