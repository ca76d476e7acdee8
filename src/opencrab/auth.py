"""API bearer tokens: created once, stored as SHA-256 hashes, revocable.

A token is `ocb_` followed by 43 URL-safe characters (256 random bits); only its hash
and its first characters (to tell tokens apart in lists) are stored, so a leaked
database gives no usable token. With that much entropy a plain SHA-256 is the right
hash: there is nothing for a slow password hash to protect against.

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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from uuid import uuid4

import sqlalchemy as sa

from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.store import Database
from opencrab.store.tables import api_tokens

PREFIX = "ocb_"
SHOWN_CHARS = 8  # of the secret, after the prefix, kept to tell tokens apart
TOUCH_EVERY_SECS = 60.0  # last_used_at is written at most this often per token


@dataclass(frozen=True)
class ApiToken:
    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


def hash_token(secret: str) -> str:
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
            conn.execute(
                api_tokens.insert().values(
                    id=token.id,
                    name=token.name,
                    token_hash=hash_token(secret),
                    prefix=token.prefix,
                    created_at=token.created_at,
                )
            )
        return token, secret

    def list(self, *, include_revoked: bool = False) -> list[ApiToken]:
        query = sa.select(api_tokens).order_by(api_tokens.c.created_at)
        if not include_revoked:
            query = query.where(api_tokens.c.revoked_at.is_(None))
        with self.db.read() as conn:
            return [_token(row) for row in conn.execute(query)]

    def has_active(self) -> bool:
        with self.db.read() as conn:
            found = conn.execute(
                sa.select(api_tokens.c.id).where(api_tokens.c.revoked_at.is_(None)).limit(1)
            ).first()
        return found is not None

    def revoke(self, name_or_id: str) -> ApiToken:
        """Revoke the active token with this id, name or shown prefix."""
        t = api_tokens.c
        matches = [
            token for token in self.list() if name_or_id in (token.id, token.name, token.prefix)
        ]
        if not matches:
            raise NotFoundError(f"no active token {name_or_id!r}")
        if len(matches) > 1:
            raise ConflictError(f"{name_or_id!r} names {len(matches)} tokens; use the id")
        now = datetime.now(UTC)
        with self.db.write() as conn:
            conn.execute(api_tokens.update().where(t.id == matches[0].id).values(revoked_at=now))
        return replace(matches[0], revoked_at=now)

    def revoked_among(self, ids: Iterable[str]) -> set[str]:
        """Which of these token ids are revoked (or no longer exist)."""
        wanted = set(ids)
        if not wanted:
            return set()
        t = api_tokens.c
        with self.db.read() as conn:
            active = conn.execute(
                sa.select(t.id).where(t.id.in_(wanted), t.revoked_at.is_(None))
            ).scalars()
            return wanted - {str(i) for i in active}

    def verify(self, secret: str) -> ApiToken | None:
        """The active token whose secret this is, or None; notes when it was last used."""
        if not secret.startswith(PREFIX) or len(secret) > 200:
            return None
        t = api_tokens.c
        with self.db.read() as conn:
            row = conn.execute(
                sa.select(api_tokens).where(
                    t.token_hash == hash_token(secret), t.revoked_at.is_(None)
                )
            ).first()
        if row is None:
            return None
        token = _token(row)
        now = time.monotonic()
        if now - self._touched.get(token.id, float("-inf")) >= TOUCH_EVERY_SECS:
            self._touched[token.id] = now
            with self.db.write() as conn:
                conn.execute(
                    api_tokens.update()
                    .where(t.id == token.id)
                    .values(last_used_at=datetime.now(UTC))
                )
        return token


def _token(row: sa.Row[object]) -> ApiToken:
    return ApiToken(
        id=str(row.id),
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )
