"""DataFrames of the layerwise results that still answer the call and indexing forms of the
earlier API (a text `table()`, `counts()` as a list or dict) with a DeprecationWarning.

Derived frames (slices, copies, arithmetic) are plain `pandas.DataFrame`s; only the frame a
result hands out carries the old forms.
"""
from __future__ import annotations

import warnings

from symfast._optional import require

pd = require("pandas", "the layerwise sweeps (their tables)")

__all__ = ["CompatFrame", "compat_frame"]


class CompatFrame(pd.DataFrame):
    """A DataFrame that, for old callers, is also callable (returning the earlier text) and takes
    the earlier list index / dict key where that is not a column label (returning the earlier item)."""

    _metadata = ["_old_text", "_old_items", "_old_what", "_hint"]

    @property
    def _constructor(self):
        return pd.DataFrame

    def __call__(self, *args, **kwargs):
        text = getattr(self, "_old_text", None)
        if text is None:
            raise TypeError("'DataFrame' object is not callable")
        warnings.warn(f"calling {self._old_what}() is deprecated: {self._hint}", DeprecationWarning, stacklevel=2)
        return text() if callable(text) else text

    def __getitem__(self, key):
        items = getattr(self, "_old_items", None)
        if items is not None and _old_key(key, items) and not _is_column(self, key):
            warnings.warn(f"{self._old_what}[{key!r}] is deprecated: {self._hint}", DeprecationWarning, stacklevel=2)
            return items[key]
        return super().__getitem__(key)


def _old_key(key, items) -> bool:
    if isinstance(items, dict):
        return isinstance(key, str) and key in items
    return isinstance(key, int) and not isinstance(key, bool) and -len(items) <= key < len(items)


def _is_column(frame: pd.DataFrame, key) -> bool:
    try:
        return key in frame.columns
    except TypeError:
        return False


def compat_frame(rows: list, columns: list, *, old_what: str, hint: str, old_text=None,
                 old_items=None) -> CompatFrame:
    """A CompatFrame of `rows` (dicts) with `columns`; `old_text` (a str or a callable giving it) is
    what calling the frame returns, `old_items` (a list or dict) what the old index/key returns;
    `old_what` names the old form and `hint` the new one in the warning."""
    f = CompatFrame(pd.DataFrame(rows, columns=columns))
    f._old_text, f._old_items, f._old_what, f._hint = old_text, old_items, old_what, hint
    return f
