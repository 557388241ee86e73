"""Subcommands of the `symfast` CLI: each module here defines `NAME`, `HELP`,
`add_arguments(parser)` and `run(args) -> int`; `symfast.cli` discovers them."""


class UsageError(Exception):
    """Raised by commands for bad user input; printed as one line without a traceback (exit 2)."""
