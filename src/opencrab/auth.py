"""API bearer tokens and the dashboard's sign-ins: created once, stored as SHA-256 hashes,
revocable.

A token is `ocb_` followed by 43 URL-safe characters (256 random bits); only its hash
and its first characters (to tell tokens apart in lists) are stored, so a leaked
database gives no usable token. With that much entropy a plain SHA-256 is the right
hash: there is nothing for a slow password hash to protect against. Each token has a
`Scope` (read ⊂ chat ⊂ operate ⊂ admin; `admin` unless told otherwise).

Signing in to the dashboard exchanges a token for a sign-in: `ocs_` and 256 random bits,
stored the same way, ending after `LOGIN_DAYS` days, at sign-out, or when its token is
revoked. The browser's cookie carries that, never the token. The rows are read and
written through store/repositories/tokens.py; this is the service over them.

Example:
    tokens = TokenStore(db)
    token, secret = tokens.create("ci", Scope.read)   # show `secret` once
    tokens.verify(secret)                              # -> the ApiToken, or None
    login = tokens.sign_in(token)                      # the cookie's value
    tokens.signed_in(login)                            # -> (sign-in id, ApiToken), or None
    tokens.sign_out(login)
    tokens.revoke("ci")                                # its sign-ins end too
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from uuid import uuid4

from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.store import Database
from opencrab.store.repositories import tokens as repo
from opencrab.store.repositories.tokens import ApiToken as ApiToken  # re-exported
from opencrab.store.repositories.tokens import Scope as Scope  # re-exported

PREFIX = "ocb_"
LOGIN_PREFIX = "ocs_"
LOGIN_DAYS = 7  # a sign-in ends this long after it began
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

    def create(self, name: str, scope: Scope = Scope.admin) -> tuple[ApiToken, str]:
        """A new token named `name` that may do what `scope` allows; the secret is
        returned here and never again."""
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
            scope=Scope(scope),
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
        """Revoke the active token with this id, name or shown prefix; its sign-ins end."""
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

    def sign_in(self, token: ApiToken) -> str:
        """A new sign-in for `token`; its secret (the cookie's value) is returned only here."""
        secret = LOGIN_PREFIX + secrets.token_urlsafe(32)
        now = datetime.now(UTC)
        with self.db.write() as conn:
            repo.forget_old_logins(conn, now - timedelta(days=LOGIN_DAYS))
            repo.insert_login(
                conn,
                login_id=str(uuid4()),
                token_id=token.id,
                session_hash=hash_token(secret),
                now=now,
                expires_at=now + timedelta(days=LOGIN_DAYS),
            )
        return secret

    def signed_in(self, secret: str) -> tuple[str, ApiToken] | None:
        """(the sign-in's id, its token) while the sign-in is live, else None."""
        if not secret.startswith(LOGIN_PREFIX) or len(secret) > 200:
            return None
        with self.db.read() as conn:
            return repo.login_with_hash(conn, hash_token(secret), datetime.now(UTC))

    def sign_out(self, secret: str) -> bool:
        """End the sign-in whose secret this is; whether it was live."""
        if not secret.startswith(LOGIN_PREFIX) or len(secret) > 200:
            return False
        with self.db.write() as conn:
            return repo.end_login(conn, hash_token(secret), datetime.now(UTC))

    def ended_logins_among(self, ids: Iterable[str]) -> set[str]:
        """Which of these sign-in ids ended, expired, lost their token or never existed."""
        wanted = set(ids)
        if not wanted:
            return set()
        with self.db.read() as conn:
            return wanted - repo.live_logins_among(conn, wanted, datetime.now(UTC))
