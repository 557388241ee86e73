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
import sys

from symfast import commands
from symfast._optional import MissingExtra, require
from symfast._version import __version__
from symfast.commands.runner import Parser, command_parser, execute

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


def main(argv=None) -> int:
    try:  # the studies' tables and figures: one line naming the extra when either is missing
        require("pandas", "the symfast command line")
        require("matplotlib", "the symfast command line (its figures)")
    except MissingExtra as e:
        print(f"symfast: error: {e}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(argv)
    return execute(args, args.command)


if __name__ == "__main__":
    sys.exit(main())
