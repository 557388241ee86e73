"""The `symfast` command line: `symfast <command> --help` for each command.

Conventions shared by every command (applied once, in `symfast.commands.runner`): `--version`; defaults shown
in `--help`; one `--quiet` (the older `--no-progress` is a hidden alias); `--device`,
`--threads`, `--lr` and `--threshold` validated while parsing; progress lines through
`logging` (logger "symfast", INFO; `--quiet` shows warnings only).

Bad input (unknown names, values of the wrong type or range, unreadable or corrupt
input files, unwritable output, a full or read-only disk) ends with a one-line message
and exit status 2, never a traceback. Any other exception is a bug and keeps its traceback.
"""
from __future__ import annotations

import importlib
import pkgutil
import signal
import sys

from symfast import _interrupt as interrupt
from symfast import commands
from symfast._optional import MissingExtra, require
from symfast._version import __version__
from symfast.commands.runner import INTERRUPTED, Parser, command_parser, execute


def _command_modules():
    """The modules of `symfast.commands` that define a command (a NAME, add_arguments and run)."""
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        mod = importlib.import_module(f"symfast.commands.{info.name}")
        if hasattr(mod, "NAME"):
            yield mod


def build_parser() -> Parser:
    parser = Parser(prog="symfast", description="read symmetries out of trained neural-network weights")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for mod in _command_modules():
        command_parser(mod, sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP))
    return parser


def _missing_extra() -> str | None:
    """The one line naming the extra to install when the studies' tables or figures cannot be made."""
    try:
        require("pandas", "the symfast command line")
        require("matplotlib", "the symfast command line (its figures)")
    except MissingExtra as e:
        return f"symfast: error: {e}"
    return None


def main(argv=None) -> int:
    """Run `symfast ARGV` in this process; the exit status (130 after a Ctrl-C)."""
    missing = _missing_extra()
    if missing:
        print(missing, file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    return execute(args, args.command)


def run() -> None:
    """The `symfast` program: `main` on sys.argv, then the end of the process, where a Ctrl-C during
    shutdown (atexit callbacks, finalisers) still ends it with 130 and one line instead of being lost."""
    name = "symfast"
    missing = _missing_extra()
    if missing:
        print(missing, file=sys.stderr)
        sys.exit(2)
    try:
        with interrupt.watch():
            args = build_parser().parse_args()
            name = f"symfast {args.command}"
            status = execute(args, args.command)
            interrupt.exit_process(status, f"{name}: interrupted")
    except KeyboardInterrupt:  # between the command's end and the last handler: ignore more, say it once
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        interrupt.exit_process(INTERRUPTED, f"{name}: interrupted", report=True)


if __name__ == "__main__":
    run()
