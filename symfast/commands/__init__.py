"""Subcommands of the `symfast` CLI: each module here defines `NAME`, `HELP`,
`add_arguments(parser)` and `run(args) -> int`; `symfast.cli` discovers them."""
