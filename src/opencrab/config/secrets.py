"""Configured secrets kept out of stored and shown text.

A provider, or a proxy in front of it, may echo the API key in an error body ("Incorrect
API key provided: sk-…"). Every secret of the configuration (each `SecretStr`: provider
API keys, the Discord token) and the database URL's password is replaced by
`<redacted>` wherever such text is kept: the LLM router passes every provider error
through `redact_error` before it is recorded, raised or logged. API keys stored through
the dashboard (opencrab.llm.live_settings) are added to the router's redactor as they are
read or set, and `redact_logs` filters every log line through it.

Example:
    redactor = Redactor.from_settings(settings)
    redactor.redact("bad key sk-abc123…")  # -> "bad key <redacted>"
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

from pydantic import BaseModel, SecretStr
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from opencrab.config.models import Settings
from opencrab.config.provenance import REDACTED

MIN_SECRET_CHARS = 4  # shorter values are not secrets worth the name and would garble text


def configured_secrets(settings: Settings) -> set[str]:
    """Every secret value in the configuration: SecretStr fields and the database password."""
    found: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, SecretStr):
            found.add(value.get_secret_value())
        elif isinstance(value, BaseModel):
            for name in type(value).model_fields:
                walk(getattr(value, name))
            for item in (value.model_extra or {}).values():  # open tables: [gateway.*]
                walk(item)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list | tuple):
            for item in value:
                walk(item)

    walk(settings)
    if settings.database.url:
        try:
            password = make_url(settings.database.url).password
        except ArgumentError:
            password = None
        if password:
            found.add(str(password))
    return {s for s in found if len(s) >= MIN_SECRET_CHARS}


class Redactor:
    """Replaces known secrets (as written, JSON-escaped or URL-encoded) by `<redacted>`."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        for secret in secrets:
            self.add(secret)

    @classmethod
    def from_settings(cls, settings: Settings) -> Redactor:
        """A redactor for every secret of `settings`."""
        return cls(configured_secrets(settings))

    def add(self, secret: str | SecretStr | None) -> None:
        """Also redact `secret` (ignored when empty or too short to be one)."""
        if isinstance(secret, SecretStr):
            secret = secret.get_secret_value()
        if not secret or len(secret) < MIN_SECRET_CHARS or secret in self._secrets:
            return
        self._secrets.add(secret)
        forms = {form for s in self._secrets for form in _written_forms(s)}
        alternatives = sorted(forms, key=len, reverse=True)  # the longest form wins
        self._pattern = re.compile("|".join(re.escape(f) for f in alternatives))

    def redact(self, text: str) -> str:
        """`text` with every known secret replaced."""
        if self._pattern is None or not text:
            return text
        return self._pattern.sub(REDACTED, text)

    def leaks(self, text: str) -> bool:
        """Whether `text` contains a known secret."""
        return self._pattern is not None and self._pattern.search(text) is not None

    def redact_error(self, exc: BaseException) -> None:
        """Redact an exception's message in place; cut off the exceptions it was raised
        from when their text holds a secret (an SDK error keeps the whole body)."""
        leaked = any(isinstance(a, str) and self.leaks(a) for a in exc.args)
        exc.args = tuple(self.redact(a) if isinstance(a, str) else a for a in exc.args)
        cause = exc.__cause__ or exc.__context__
        seen: set[int] = set()
        while not leaked and cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            leaked = self.leaks(str(cause)) or self.leaks(repr(cause))
            cause = cause.__cause__ or cause.__context__
        if leaked:
            exc.__cause__ = None
            exc.__context__ = None
            exc.__suppress_context__ = True


class RedactingFilter(logging.Filter):
    """A log filter that redacts the redactor's secrets from messages and tracebacks."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if self.redactor.leaks(message):
            record.msg, record.args = self.redactor.redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text and self.redactor.leaks(record.exc_text):
            record.exc_text = self.redactor.redact(record.exc_text)
        return True


LOG_NAMES = ("", "uvicorn", "uvicorn.error", "uvicorn.access")
"""Loggers whose handlers get the filter: the root and uvicorn's own."""


def redact_logs(redactor: Redactor) -> RedactingFilter:
    """Redact `redactor`'s secrets (stored keys added later included) from every log line
    the handlers of the root and uvicorn loggers write; returns the filter installed."""
    found = RedactingFilter(redactor)
    for name in LOG_NAMES:
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(found)
    return found


def stop_redacting_logs(found: RedactingFilter) -> None:
    """Remove a filter `redact_logs` installed."""
    for name in LOG_NAMES:
        for handler in logging.getLogger(name).handlers:
            handler.removeFilter(found)


def _written_forms(secret: str) -> set[str]:
    """`secret` as text, JSON (ASCII or not, `/` escaped or not) and URLs write it."""
    escaped = json.dumps(secret)[1:-1]
    as_is = json.dumps(secret, ensure_ascii=False)[1:-1]
    return {
        secret,
        escaped,
        as_is,
        escaped.replace("/", "\\/"),
        as_is.replace("/", "\\/"),
        quote(secret),
        quote(secret, safe=""),
    }
