"""Figures in the report: each distinct image once (by content hash), recompressed for the
self-contained HTML page, and linked instead of embedded once the page's image budget is spent.

A figure that appears twice under different names (same bytes) is shown once; the later mention
points back to it. PNGs are re-encoded as 256-colour palette PNGs (plots have few colours, so this
is lossless to the eye and typically 2-4x smaller) and scaled down to `MAX_WIDTH` pixels.
"""
from __future__ import annotations

import base64
import hashlib
import io
import os
from urllib.parse import quote

__all__ = ["FigureStore", "MAX_WIDTH", "EMBED_BUDGET"]

MAX_WIDTH = 1600  # px: wider figures are scaled down for the page (the PNG beside the report keeps its size)
EMBED_BUDGET = 1_800_000  # bytes of base64 images in one HTML page; later figures are linked, not embedded


def _compress(data: bytes) -> bytes:
    """A smaller PNG of the same figure (palette, at most MAX_WIDTH wide), or `data` if not smaller."""
    try:
        from PIL import Image
    except ImportError:  # Pillow comes with matplotlib; without it the figure is embedded as it is
        return data
    try:
        img = Image.open(io.BytesIO(data))
        img.load()
    except OSError:
        return data
    img = img.convert("RGBA")
    if img.width > MAX_WIDTH:
        img = img.resize((MAX_WIDTH, round(img.height * MAX_WIDTH / img.width)), Image.LANCZOS)
    out = io.BytesIO()
    img.quantize(256, method=Image.Quantize.FASTOCTREE).save(out, format="PNG", optimize=True)
    return out.getvalue() if out.tell() < len(data) else data


class FigureStore:
    """Remembers the figures of one report by content: `key(path)` is the same for byte-identical
    files; `img(path)` returns the <img> (embedded while the budget lasts, else a link relative to
    `base`, the report's folder).

    Figure paths are read as the file system reads them: absolute, or relative to the current
    working directory (where the run that made them started), never to `base`."""

    def __init__(self, base: str = ".", budget: int | None = None):
        self.base, self.used = os.path.abspath(base), 0
        self.budget = EMBED_BUDGET if budget is None else budget
        self.seen: dict = {}  # content hash -> anchor id of its first appearance

    @staticmethod
    def _full(path: str) -> str:
        return os.path.abspath(path)

    def relative(self, path: str) -> str:
        """`path` relative to the report's folder, with "/" separators (a link that works wherever the
        folder is opened from, or moved to with its figures)."""
        return os.path.relpath(self._full(path), self.base).replace(os.sep, "/")

    def key(self, path: str) -> str | None:
        """sha256 of the file's bytes, or None if it cannot be read."""
        try:
            with open(self._full(path), "rb") as f:
                return hashlib.sha256(f.read()).hexdigest()
        except OSError:
            return None

    def first(self, path: str) -> tuple[bool, str]:
        """(is this the first appearance of its content, anchor id of the first appearance)."""
        k = self.key(path) or f"missing:{path}"
        if k in self.seen:
            return False, self.seen[k]
        self.seen[k] = f"fig-{len(self.seen) + 1}"
        return True, self.seen[k]

    def img(self, path: str) -> str:
        """The <img> element for a figure: embedded (compressed) within the budget, else linked."""
        import html

        full, rel = self._full(path), self.relative(path)
        try:
            with open(full, "rb") as f:
                data = _compress(f.read())
        except OSError:
            return f"<p>(figure {html.escape(rel)} missing)</p>"
        b64 = base64.b64encode(data).decode()
        if self.used + len(b64) > self.budget:
            link = html.escape(quote(rel))
            return (f'<a href="{link}"><img src="{link}" style="max-width:100%" '
                    f'alt="{html.escape(rel)}"></a><br><small>(linked, not embedded: the page keeps its figures '
                    f'under {self.budget / 1e6:.1f} MB; open the report from its folder)</small>')
        self.used += len(b64)
        return f'<img src="data:image/png;base64,{b64}" style="max-width:100%" alt="{html.escape(rel)}">'
