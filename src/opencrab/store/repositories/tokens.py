"""The `api_tokens` rows: the server's bearer tokens, stored by the SHA-256 of the secret.

Every function runs inside the caller's transaction; `opencrab.auth.TokenStore` is the
service over them (secrets, names, revocation rules).

Example:
    with db.write() as conn:
        insert_token(conn, token, token_hash=hash_of_secret)
    with db.read() as conn:
        active_token_with_hash(conn, hash_of_secret)     # the ApiToken, or None
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import api_tokens


@dataclass(frozen=True)
class ApiToken:
    """One API token as stored (never its secret or hash)."""

    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @property
    def active(self) -> bool:
        """Not revoked."""
        return self.revoked_at is None


def _token(row: Any) -> ApiToken:
    return ApiToken(
        id=str(row.id),
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        revoked_at=row.revoked_at,
    )


def insert_token(conn: Connection, token: ApiToken, *, token_hash: str) -> None:
    """Store a new token with the hash of its secret."""
    conn.execute(
        api_tokens.insert().values(
            id=token.id,
            name=token.name,
            token_hash=token_hash,
            prefix=token.prefix,
            created_at=token.created_at,
        )
    )


def list_tokens(conn: Connection, *, include_revoked: bool = False) -> list[ApiToken]:
    """The tokens, oldest first; only the active ones unless `include_revoked`."""
    query = sa.select(api_tokens).order_by(api_tokens.c.created_at)
    if not include_revoked:
        query = query.where(api_tokens.c.revoked_at.is_(None))
    return [_token(row) for row in conn.execute(query)]


def any_active(conn: Connection) -> bool:
    """Whether at least one token is not revoked."""
    found = conn.execute(
        sa.select(api_tokens.c.id).where(api_tokens.c.revoked_at.is_(None)).limit(1)
    ).first()
    return found is not None


def revoke_token(conn: Connection, token_id: str, now: datetime) -> None:
    """Mark the token revoked at `now`."""
    conn.execute(api_tokens.update().where(api_tokens.c.id == token_id).values(revoked_at=now))


def active_among(conn: Connection, ids: Iterable[str]) -> set[str]:
    """Which of these token ids exist and are not revoked."""
    t = api_tokens.c
    found = conn.execute(
        sa.select(t.id).where(t.id.in_(list(ids)), t.revoked_at.is_(None))
    ).scalars()
    return {str(i) for i in found}


def active_token_with_hash(conn: Connection, token_hash: str) -> ApiToken | None:
    """The active token whose secret hashes to `token_hash`, or None."""
    t = api_tokens.c
    row = conn.execute(
        sa.select(api_tokens).where(t.token_hash == token_hash, t.revoked_at.is_(None))
    ).first()
    return None if row is None else _token(row)


def touch_token(conn: Connection, token_id: str, now: datetime) -> None:
    """Note that the token was used at `now`."""
    conn.execute(api_tokens.update().where(api_tokens.c.id == token_id).values(last_used_at=now))
