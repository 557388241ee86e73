"""The `symfast` command line: `symfast <command> --help` for each command.

Bad input (unknown names, non-positive sizes, unwritable output) ends with a
one-line message and exit status 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from symfast import commands
from symfast.commands import UsageError


def _command_modules():
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        yield importlib.import_module(f"symfast.commands.{info.name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="symfast", description="Read symmetries out of trained weights.")
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except (UsageError, ValueError, FileNotFoundError, PermissionError) as e:
        print(f"symfast {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"symfast {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
