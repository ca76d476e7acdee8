"""API bearer tokens: created once, stored as SHA-256 hashes, revocable.

A token is `ocb_` followed by 43 URL-safe characters (256 random bits); only its hash
and its first characters (to tell tokens apart in lists) are stored, so a leaked
database gives no usable token. With that much entropy a plain SHA-256 is the right
hash: there is nothing for a slow password hash to protect against. The rows are read
and written through store/repositories/tokens.py; this is the service over them.

Example:
    tokens = TokenStore(db)
    token, secret = tokens.create("dashboard")   # show `secret` once
    tokens.verify(secret)                        # -> the ApiToken, or None
    tokens.revoke("dashboard")
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from uuid import uuid4

from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.store import Database
from opencrab.store.repositories import tokens as repo
from opencrab.store.repositories.tokens import ApiToken as ApiToken  # re-exported

PREFIX = "ocb_"
SHOWN_CHARS = 8  # of the secret, after the prefix, kept to tell tokens apart
TOUCH_EVERY_SECS = 60.0  # last_used_at is written at most this often per token


def hash_token(secret: str) -> str:
    """The stored form of a secret: its SHA-256, hex."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


class TokenStore:
    """The server's bearer tokens; see the module docstring."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._touched: dict[str, float] = {}

    def create(self, name: str) -> tuple[ApiToken, str]:
        """A new token named `name`; the secret is returned here and never again."""
        name = name.strip()
        if not name or len(name) > 64 or any(ord(c) < 32 for c in name):
            raise ValidationError("a token name is 1 to 64 printable characters")
        if any(t.name == name for t in self.list() if t.active):
            raise ConflictError(f"an active token is already named {name!r}")
        secret = PREFIX + secrets.token_urlsafe(32)
        token = ApiToken(
            id=str(uuid4()),
            name=name,
            prefix=secret[: len(PREFIX) + SHOWN_CHARS],
            created_at=datetime.now(UTC),
            last_used_at=None,
            revoked_at=None,
        )
        with self.db.write() as conn:
            repo.insert_token(conn, token, token_hash=hash_token(secret))
        return token, secret

    def list(self, *, include_revoked: bool = False) -> list[ApiToken]:
        """The tokens, oldest first; only the active ones unless `include_revoked`."""
        with self.db.read() as conn:
            return repo.list_tokens(conn, include_revoked=include_revoked)

    def has_active(self) -> bool:
        """Whether any token is active (then the API requires one)."""
        with self.db.read() as conn:
            return repo.any_active(conn)

    def revoke(self, name_or_id: str) -> ApiToken:
        """Revoke the active token with this id, name or shown prefix."""
        matches = [
            token for token in self.list() if name_or_id in (token.id, token.name, token.prefix)
        ]
        if not matches:
            raise NotFoundError(f"no active token {name_or_id!r}")
        if len(matches) > 1:
            raise ConflictError(f"{name_or_id!r} names {len(matches)} tokens; use the id")
        now = datetime.now(UTC)
        with self.db.write() as conn:
            repo.revoke_token(conn, matches[0].id, now)
        return replace(matches[0], revoked_at=now)

    def revoked_among(self, ids: Iterable[str]) -> set[str]:
        """Which of these token ids are revoked (or no longer exist)."""
        wanted = set(ids)
        if not wanted:
            return set()
        with self.db.read() as conn:
            return wanted - repo.active_among(conn, wanted)

    def verify(self, secret: str) -> ApiToken | None:
        """The active token whose secret this is, or None; notes when it was last used."""
        if not secret.startswith(PREFIX) or len(secret) > 200:
            return None
        with self.db.read() as conn:
            token = repo.active_token_with_hash(conn, hash_token(secret))
        if token is None:
            return None
        now = time.monotonic()
        if now - self._touched.get(token.id, float("-inf")) >= TOUCH_EVERY_SECS:
            self._touched[token.id] = now
            with self.db.write() as conn:
                repo.touch_token(conn, token.id, datetime.now(UTC))
        return token
