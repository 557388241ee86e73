"""The `symfast` command line: `symfast <command> --help` for each command.

Conventions shared by every command (applied here, once): `--version`; defaults shown
in `--help`; one `--quiet` (the older `--no-progress` is a hidden alias); `--device`,
`--threads`, `--lr` and `--threshold` validated while parsing; progress lines through
`logging` (logger "symfast", INFO; `--quiet` shows warnings only).

Bad input (unknown names, values of the wrong type or range, unreadable or corrupt
input files, unwritable output, a full or read-only disk) ends with a one-line message
and exit status 2, never a traceback. Any other exception is a bug and keeps its traceback.
"""
from __future__ import annotations

import argparse
import errno
import importlib
import logging
import pkgutil
import sys

from symfast import commands
from symfast.commands import OPTION_TYPES, UsageError

# OS errors that describe the user's environment (a path, a disk), not a bug.
_ENV_ERRNOS = {errno.ENOENT, errno.EACCES, errno.EPERM, errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.ENOTDIR,
               errno.EISDIR, errno.ENAMETOOLONG}
_ENV_ERRORS = (FileNotFoundError, PermissionError, NotADirectoryError, IsADirectoryError)


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is at the time (pytest and callers may swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


class _Parser(argparse.ArgumentParser):
    """argparse with defaults in --help and usage errors on one line."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", argparse.ArgumentDefaultsHelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        yield importlib.import_module(f"symfast.commands.{info.name}")


def _apply_conventions(p: argparse.ArgumentParser) -> None:
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


def _version() -> str:
    import symfast

    return symfast.__version__


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="symfast", description="Read symmetries out of trained weights.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        _apply_conventions(p)
        p.set_defaults(_run=mod.run)
    return parser


def _setup_logging(quiet: bool) -> None:
    log = logging.getLogger("symfast")
    if not any(getattr(h, "_symfast_cli", False) for h in log.handlers):
        h = _StderrHandler()
        h.setFormatter(logging.Formatter("%(message)s"))
        h._symfast_cli = True
        log.addHandler(h)
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")  # the commands only write figures to files (the library itself never switches)
    _setup_logging(bool(getattr(args, "quiet", False) or getattr(args, "no_progress", False)))
    try:
        return int(args._run(args) or 0)
    except UsageError as e:
        print(f"symfast {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        if e.errno not in _ENV_ERRNOS and not isinstance(e, _ENV_ERRORS):
            raise
        where = f"{e.filename}: " if e.filename else ""
        print(f"symfast {args.command}: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"symfast {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
