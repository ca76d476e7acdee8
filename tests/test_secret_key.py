"""config.secret_key.box_for_writing: the key new secrets (a gateway's, an MCP server's)
are encrypted with decrypts every stored one, or nothing is written and the error says
what to do. Real key files in a temporary data directory."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from opencrab.config.secret_key import FILE_NAME, SecretBox, box_for_writing
from opencrab.errors import ConflictError


def loader(data_dir: Path) -> Callable[..., SecretBox]:
    def load(*, create: bool) -> SecretBox:
        return SecretBox.load(data_dir, create=create, env={})

    return load


def test_the_first_secret_makes_the_key_file(tmp_path: Path) -> None:
    box = box_for_writing(loader(tmp_path), {})
    assert (tmp_path / FILE_NAME).exists()
    assert box.decrypt(box.encrypt("xoxb-カニ")) == "xoxb-カニ"


def test_a_key_that_decrypts_every_stored_secret_is_used(tmp_path: Path) -> None:
    first = SecretBox.load(tmp_path, create=True, env={})
    stored = {"the API key of openai": first.encrypt("sk-1"), "gateway slack's": first.encrypt("t")}
    box = box_for_writing(loader(tmp_path), stored)
    assert box.decrypt(stored["gateway slack's"]) == "t"


def test_a_stored_secret_of_another_key_is_named_and_nothing_is_made(tmp_path: Path) -> None:
    SecretBox.load(tmp_path, create=True, env={})
    other = SecretBox(Fernet.generate_key(), "another key")
    with pytest.raises(ConflictError) as raised:
        box_for_writing(loader(tmp_path), {"MCP server tracker's secrets": other.encrypt("x")})
    assert str(tmp_path / FILE_NAME) in str(raised.value)
    assert "does not decrypt MCP server tracker's secrets" in str(raised.value)
    assert "restore the original key" in str(raised.value)


def test_a_missing_key_file_while_secrets_are_stored_is_not_replaced(tmp_path: Path) -> None:
    token = SecretBox(Fernet.generate_key(), "gone").encrypt("sk-1")
    with pytest.raises(ConflictError, match="restore the key file, or set OPENCRAB_SECRET_KEY"):
        box_for_writing(loader(tmp_path), {"the API key of openai": token})
    assert not (tmp_path / FILE_NAME).exists()
