"""The webhook's signing secret: from the environment, else stored encrypted.

The environment variable `[inbox] webhook_secret_env` (default
OPENCRAB_INBOX_WEBHOOK_SECRET) wins; else the secret set with `PUT
/api/inbox/webhook-secret`, kept in `inbox_secrets` encrypted with the data directory's
key (config/secret_key.py, the key that encrypts stored API keys). It is never shown:
the API says only where it comes from.

Example:
    set_webhook_secret(runtime, "a long random string")
    webhook_secret(runtime)    # -> the environment's, else that one
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Literal

from opencrab.config.secret_key import SecretBox
from opencrab.core.runtime import Runtime
from opencrab.errors import ConfigError, ValidationError
from opencrab.store.repositories import inbox as repo

NAME = "webhook"
MIN_SECRET = 16
MAX_SECRET = 512

SecretSource = Literal["environment", "stored"]


def webhook_secret(runtime: Runtime) -> str | None:
    """The signing secret, or None when neither the environment nor the store has one
    (or the stored one cannot be decrypted: the data directory's key changed)."""
    given = os.environ.get(runtime.settings.inbox.webhook_secret_env, "")
    if given:
        return given
    with runtime.db.read() as conn:
        stored = repo.stored_secret(conn, NAME)
    if stored is None:
        return None
    try:
        return SecretBox.load(runtime.settings.data_dir, create=False).decrypt(stored[0])
    except ConfigError:
        return None


def secret_source(runtime: Runtime) -> SecretSource | None:
    """Where the signing secret comes from (None: nowhere)."""
    if os.environ.get(runtime.settings.inbox.webhook_secret_env):
        return "environment"
    with runtime.db.read() as conn:
        return "stored" if repo.stored_secret(conn, NAME) is not None else None


def set_webhook_secret(runtime: Runtime, secret: str | None) -> None:
    """Store the signing secret encrypted (None: remove it); ValidationError for one
    shorter than 16 or longer than 512 characters."""
    box = None
    if secret is not None:
        if not MIN_SECRET <= len(secret) <= MAX_SECRET:
            raise ValidationError(
                f"secret: must be {MIN_SECRET} to {MAX_SECRET} characters long (got {len(secret)})"
            )
        box = SecretBox.load(runtime.settings.data_dir, create=True)
    with runtime.db.write() as conn:
        encrypted = None if box is None or secret is None else box.encrypt(secret)
        repo.save_secret(conn, NAME, encrypted, datetime.now(UTC))
