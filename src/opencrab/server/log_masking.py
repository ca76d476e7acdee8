"""Bearer tokens kept out of the server's log lines.

A token can reach a log line inside a URL: uvicorn prints the whole request line, query
string included, for accepted and refused requests alike (the access lines, and the lines
it writes for every WebSocket), so `/api/ws?access_token=ocb_…` would be kept in any log
collector. `MaskTokens` rewrites each record a handler writes: the value of every
`access_token=` parameter and anything shaped like a token (`ocb_…`, opencrab.auth.PREFIX,
also URL-encoded) become `***`. `log_config()` is uvicorn's logging configuration with the
filter on each of its handlers and on a root handler for our own loggers (which otherwise
reach stderr through logging's last-resort handler, unfiltered).

Example:
    uvicorn.Config(app, log_config=log_config())
    mask_tokens("GET /api/ws?access_token=ocb_abc")  # -> "GET /api/ws?access_token=***"
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"
_QUERY = re.compile(r"(?i)(access_token=)[^&\s\"'#;,]*")
_TOKEN = re.compile(r"(?i)\bocb(?:_|%5f)[A-Za-z0-9_%-]*")


def mask_tokens(text: str) -> str:
    """`text` with every `access_token=` value and every `ocb_…` token replaced by ***."""
    if "ocb" not in text.lower() and "access_token" not in text.lower():
        return text
    return _TOKEN.sub("ocb_" + MASK, _QUERY.sub(r"\g<1>" + MASK, text))


def _masked(value: Any) -> Any:
    """A log argument with tokens masked: text as text, anything else only when its text
    held a token (numbers stay numbers, so `%d` still formats)."""
    if isinstance(value, str):
        return mask_tokens(value)
    if value is None or isinstance(value, int | float):
        return value
    text = str(value)
    masked = mask_tokens(text)
    return value if masked == text else masked


class MaskTokens(logging.Filter):
    """A handler filter that masks bearer tokens in the message, its arguments (kept in
    place: uvicorn's access formatter reads them one by one) and the traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = mask_tokens(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(a) for a in record.args)
        elif isinstance(record.args, Mapping):
            record.args = {k: _masked(v) for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_tokens(record.exc_text)
        return True


def log_config() -> dict[str, Any]:
    """uvicorn's logging configuration with `MaskTokens` on every handler, and the root
    logger (our own loggers, warnings and worse) written through uvicorn's stderr handler."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config.setdefault("filters", {})["mask_tokens"] = {"()": MaskTokens}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("mask_tokens")
    config["root"] = {"handlers": ["default"], "level": "WARNING"}
    return config
