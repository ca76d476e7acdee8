"""Prompt texts per language: every text OpenCrab itself puts in front of a model.

Each language is one TOML file beside this module (`en.toml`, `ja.toml`, `zh.toml`): one
key per text, `{name}` placeholders the code fills in (`{{` and `}}` are literal braces).
A translator edits those files, nothing else; `ja` is seed 001's text verbatim. Every file
has exactly the keys and placeholders of `en.toml` (a test checks it). The standard skill
manuals are per language too, in `opencrab/skills/<language>/`.

Which language an agent speaks is `[agent] language` (en by default), overridden per
agent (persona file, REST `language`, `opencrab agent create --language`).

Example:
    texts = prompts("ja")
    texts.render("identity", name="Aki", role="Facilitator")   # "【IDENTITY】\\n名前: Aki…"
    texts["truncated"]                                          # "\\n…（省略）"
"""

from __future__ import annotations

import functools
import string
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, cast, get_args

from opencrab.errors import ValidationError

Language = Literal["en", "ja", "zh"]
LANGUAGES: tuple[Language, ...] = get_args(Language)
DEFAULT_LANGUAGE: Language = "en"
PROMPTS_DIR = Path(__file__).resolve().parent


def check_language(value: object) -> Language:
    """`value` as a Language; a ValidationError naming the allowed values otherwise."""
    if isinstance(value, str) and value.strip().lower() in LANGUAGES:
        return cast("Language", value.strip().lower())
    raise ValidationError(f"language {value!r} is not one of {', '.join(LANGUAGES)}")


class Prompts(Mapping[str, str]):
    """One language's texts: `texts[key]` is the raw text, `render` fills placeholders."""

    def __init__(self, language: Language, texts: Mapping[str, str]) -> None:
        self.language = language
        self._texts = dict(texts)

    def __getitem__(self, key: str) -> str:
        return self._texts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def render(self, key: str, **fields: Any) -> str:
        """The text of `key` with its `{placeholders}` filled from `fields`."""
        return self._texts[key].format(**fields)


def placeholders(text: str) -> set[str]:
    """The `{name}` placeholders a text uses."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@functools.cache
def prompts(language: Language) -> Prompts:
    """The texts of `language`, read from its TOML file once and cached."""
    language = check_language(language)
    path = PROMPTS_DIR / f"{language}.toml"
    with path.open("rb") as file:
        data = tomllib.load(file)
    bad = [key for key, value in data.items() if not isinstance(value, str)]
    if bad:
        raise ValidationError(f"{path}: {bad[0]!r} must be a string")
    return Prompts(language, data)
