"""Skipping a class whose `setup_cache` cannot measure (an optional peer missing, the extension not
built, a full-size-only set).

asv hands `setup_cache`'s value to `setup` and to the benchmarks only when it is not None; a None
leaves `setup` one argument short and the benchmark fails instead of being skipped. So such a
`setup_cache` returns `skip(reason)`, and `setup` calls `raise_if_skipped` first (asv reports a
NotImplementedError raised in setup as skipped).
"""


def skip(reason: str) -> dict:
    return {"skipped": reason}


def raise_if_skipped(cache) -> None:
    if isinstance(cache, dict) and "skipped" in cache:
        raise NotImplementedError(cache["skipped"])
