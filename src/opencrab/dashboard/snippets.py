"""Search hits in context: a line cut around its first match, the matches marked.

`snippet` returns plain pieces, never HTML: a template prints each piece escaped and
wraps the matching ones in `<mark>`, so nothing in the text can become markup.

Example:
    snippet("明日は東京へ行きます", ["東京"])
    # [("明日は", False), ("東京", True), ("へ行きます", False)]
"""

from __future__ import annotations

import re
from collections.abc import Sequence

ELLIPSIS = "…"


def snippet(text: str, terms: Sequence[str], *, width: int = 240) -> list[tuple[str, bool]]:
    """About `width` characters of `text` around its first match, as (piece, is_match) pairs.

    Terms match case-insensitively; a longer term wins over a shorter one it contains.
    Without a match the start of the text is shown. A cut end gets an ellipsis piece.
    """
    words = sorted({t for t in terms if t}, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(w) for w in words), re.IGNORECASE) if words else None
    first = pattern.search(text) if pattern else None
    start = 0
    if first is not None and len(text) > width:
        start = max(0, min(first.start() - width // 3, len(text) - width))
    end = min(len(text), start + width)
    window = text[start:end]
    pieces: list[tuple[str, bool]] = [(ELLIPSIS, False)] if start > 0 else []
    done = 0
    for match in pattern.finditer(window) if pattern else ():
        if match.start() > done:
            pieces.append((window[done : match.start()], False))
        pieces.append((match.group(), True))
        done = match.end()
    if done < len(window):
        pieces.append((window[done:], False))
    if end < len(text):
        pieces.append((ELLIPSIS, False))
    return pieces
