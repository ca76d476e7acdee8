"""The key that encrypts API keys stored by the dashboard (Fernet, from `cryptography`).

The key comes from the environment variable `OPENCRAB_SECRET_KEY` when it is set, else
from the file `secret.key` in the data directory, created on first use with mode 0600
(readable by its owner only). A key that cannot be read or used is a clear ConfigError:
stored rows are never touched, so restoring the right key makes them readable again.
A missing key file while encrypted rows exist is such an error too — a new key would
make the stored keys unreadable for good. New secrets of the dashboard's gateways and MCP
servers are encrypted only with a key that decrypts every stored one (`box_for_writing`).

Example:
    box = SecretBox.load(data_dir, create=True)
    token = box.encrypt("sk-…")
    box.decrypt(token)  # -> "sk-…"
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken

from opencrab.errors import ConfigError, ConflictError

ENV_VAR = "OPENCRAB_SECRET_KEY"
FILE_NAME = "secret.key"


class SecretBox:
    """Encrypts and decrypts short secrets with one Fernet key."""

    def __init__(self, key: bytes, source: str) -> None:
        self.source = source
        """Where the key came from: the environment variable or the file's path."""
        try:
            self._fernet = Fernet(key)
        except (ValueError, TypeError):
            raise ConfigError(
                "is not a Fernet key (32 url-safe base64-encoded bytes); restore the "
                f"original key (the file, or {ENV_VAR}) — stored API keys cannot be read "
                "without it",
                source=source,
            ) from None

    @classmethod
    def load(
        cls, data_dir: Path, *, create: bool, env: Mapping[str, str] | None = None
    ) -> SecretBox:
        """The key from `OPENCRAB_SECRET_KEY` or `data_dir/secret.key`; with `create`, a
        new key file (mode 0600) is written when there is neither."""
        env = os.environ if env is None else env
        if env.get(ENV_VAR):
            return cls(env[ENV_VAR].strip().encode(), f"environment {ENV_VAR}")
        path = Path(data_dir) / FILE_NAME
        if not path.exists():
            if not create:
                raise ConfigError(
                    f"the key file is missing while encrypted API keys are stored; restore "
                    f"it or set {ENV_VAR} (the stored keys are kept)",
                    source=str(path),
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(Fernet.generate_key())
        try:
            key = path.read_bytes().strip()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the key file: {exc.strerror}", source=str(path)
            ) from None
        return cls(key, str(path))

    def encrypt(self, secret: str) -> str:
        """`secret` as a Fernet token (text)."""
        return self._fernet.encrypt(secret.encode("utf-8")).decode("ascii")

    def decrypts(self, token: str) -> bool:
        """Whether this key decrypts `token`."""
        try:
            self.decrypt(token)
        except ConfigError:
            return False
        return True

    def decrypt(self, token: str) -> str:
        """The secret in `token`; ConfigError when this key did not encrypt it."""
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            raise ConfigError(
                "this key does not decrypt the stored API keys (was the key file replaced "
                f"or {ENV_VAR} changed?); restore the original key — the stored keys are kept",
                source=self.source,
            ) from None


def box_for_writing(load: Callable[..., SecretBox], stored: Mapping[str, str]) -> SecretBox:
    """The key to encrypt new secrets with: `load(create=…)`'s, when it decrypts every
    token in `stored` (what each one is -> its token), loaded with `create` (a new key
    file) only while nothing is stored. Two keys would leave some stored secrets
    unreadable whichever is kept, so otherwise ConflictError says what to do; the caller
    writes nothing then.

    Example:
        box = box_for_writing(runtime.llm_settings.box, {"the API key of openai": token})
    """
    try:
        box = load(create=not stored)
    except ConfigError as exc:
        raise ConflictError(
            f"the secrets are not stored: {exc}; restore the key file, or set {ENV_VAR}"
        ) from None
    unreadable = [what for what, token in sorted(stored.items()) if not box.decrypts(token)]
    if unreadable:
        raise ConflictError(
            f"the secrets are not stored: {box.source} does not decrypt {unreadable[0]}; "
            f"restore the original key (the key file, or {ENV_VAR})"
        )
    return box
