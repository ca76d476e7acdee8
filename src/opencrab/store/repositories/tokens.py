"""The `api_tokens` rows (the server's bearer tokens, stored by the SHA-256 of the secret)
and the `login_sessions` rows (the dashboard's sign-ins, stored the same way).

Every function runs inside the caller's transaction; `opencrab.auth.TokenStore` is the
service over them (secrets, names, scopes, revocation rules).

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
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from opencrab.store.tables import TOKEN_SCOPES, api_tokens, login_sessions


class Scope(StrEnum):
    """What a token may do; each scope includes the ones before it."""

    read = "read"  # every GET, the dashboard's pages, following sessions live
    chat = "chat"  # + sending messages: chat, the WebSocket's chat, /v1 chat completions
    operate = "operate"  # + changing state: approvals, agents, settings, imports, agent mode
    admin = "admin"  # + what changes security (tool approval policies)

    def covers(self, needed: Scope) -> bool:
        """Whether a token of this scope may do what needs `needed`."""
        return TOKEN_SCOPES.index(self.value) >= TOKEN_SCOPES.index(needed.value)


@dataclass(frozen=True)
class ApiToken:
    """One API token as stored (never its secret or hash)."""

    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    scope: Scope = Scope.admin

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
        scope=Scope(row.scope),
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
            scope=token.scope.value,
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
    """Mark the token revoked at `now`, and end its sign-ins."""
    conn.execute(api_tokens.update().where(api_tokens.c.id == token_id).values(revoked_at=now))
    s = login_sessions.c
    conn.execute(
        login_sessions.update()
        .where(s.token_id == token_id, s.ended_at.is_(None))
        .values(ended_at=now)
    )


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


def insert_login(
    conn: Connection,
    *,
    login_id: str,
    token_id: str,
    session_hash: str,
    now: datetime,
    expires_at: datetime,
) -> None:
    """Store a sign-in of `token_id` by the hash of its session secret."""
    conn.execute(
        login_sessions.insert().values(
            id=login_id,
            token_id=token_id,
            session_hash=session_hash,
            created_at=now,
            expires_at=expires_at,
        )
    )


def login_with_hash(
    conn: Connection, session_hash: str, now: datetime
) -> tuple[str, ApiToken] | None:
    """(the sign-in's id, its token) for a live sign-in of an active token, or None."""
    s, t = login_sessions.c, api_tokens.c
    row = conn.execute(
        sa.select(s.id.label("login_id"), api_tokens)
        .join(api_tokens, t.id == s.token_id)
        .where(
            s.session_hash == session_hash,
            s.ended_at.is_(None),
            s.expires_at > now,
            t.revoked_at.is_(None),
        )
    ).first()
    return None if row is None else (str(row.login_id), _token(row))


def end_login(conn: Connection, session_hash: str, now: datetime) -> bool:
    """End the sign-in with this hash (signed out); whether one was still live."""
    s = login_sessions.c
    done = conn.execute(
        login_sessions.update()
        .where(s.session_hash == session_hash, s.ended_at.is_(None))
        .values(ended_at=now)
    )
    return bool(done.rowcount)


def live_logins_among(conn: Connection, ids: Iterable[str], now: datetime) -> set[str]:
    """Which of these sign-in ids are live: not ended, not expired, their token active."""
    s, t = login_sessions.c, api_tokens.c
    found = conn.execute(
        sa.select(s.id)
        .join(api_tokens, t.id == s.token_id)
        .where(
            s.id.in_(list(ids)),
            s.ended_at.is_(None),
            s.expires_at > now,
            t.revoked_at.is_(None),
        )
    ).scalars()
    return {str(i) for i in found}


def forget_old_logins(conn: Connection, before: datetime) -> int:
    """Delete sign-ins that ended or expired before `before`; how many."""
    s = login_sessions.c
    done = conn.execute(
        login_sessions.delete().where(sa.or_(s.expires_at < before, s.ended_at < before))
    )
    return int(done.rowcount or 0)
