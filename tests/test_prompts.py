"""Prompt texts per language: every file has en's keys and placeholders, ja is the seed's
text, en carries no Japanese, and a language outside en/ja/zh is refused by name."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import opencrab.config
from opencrab.config import load_settings
from opencrab.core.skill_files import load_skill_dirs
from opencrab.core.skills import PACKAGED_DIR
from opencrab.errors import ConfigError, ValidationError
from opencrab.prompts import (
    LANGUAGES,
    PROMPTS_DIR,
    Language,
    check_language,
    placeholders,
    prompts,
)

CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uff00-\uffef\u3000-\u303f]")


def test_the_three_languages_have_a_file_each() -> None:
    assert LANGUAGES == ("en", "ja", "zh")
    assert sorted(p.stem for p in PROMPTS_DIR.glob("*.toml")) == ["en", "ja", "zh"]


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_language_has_the_keys_and_placeholders_of_en(language: Language) -> None:
    reference, texts = prompts("en"), prompts(language)
    assert set(texts) == set(reference)
    for key in reference:
        assert placeholders(texts[key]) == placeholders(reference[key]), key
        texts.render(key, **dict.fromkeys(placeholders(texts[key]), "X"))  # all fields named


def test_texts_are_read_once_and_cached() -> None:
    assert prompts("ja") is prompts("ja")
    assert prompts("en") is not prompts("ja")


def test_ja_is_the_seed_text() -> None:
    ja = prompts("ja")
    assert ja["instruction"] == (
        "【指示】\n"
        "上記のスキルマニュアルに従って、次に取るべきアクションを選択してください。\n"
        "必ず1つ以上のアクションを呼び出してください。\n"
    )
    assert ja["skills_header"] == "【利用可能なスキル】\n"
    assert ja.render("identity", name="Aki", role="Facilitator") == (
        "【IDENTITY】\n名前: Aki\n役割: Facilitator"
    )
    assert ja.render("incoming_message", text="hi") == "受信メッセージ: hi"
    assert ja["llm_config"].endswith(
        "LLMを切り替えたい場合は select_llm アクションを使用してください。"
    )


def test_en_and_its_skill_manuals_have_no_japanese() -> None:
    en = prompts("en")
    for key, text in en.items():
        assert not CJK.search(text), key
    docs, problems = load_skill_dirs([PACKAGED_DIR], "en")
    assert problems == []
    for doc in docs:
        assert not CJK.search(doc.description + doc.guidance), doc.name
    raw = (PROMPTS_DIR / "en.toml").read_text(encoding="utf-8")
    assert not CJK.search(raw)


@pytest.mark.parametrize("language", LANGUAGES)
def test_standard_skills_keep_names_actions_and_versions_across_languages(
    language: Language,
) -> None:
    reference, _ = load_skill_dirs([PACKAGED_DIR], "ja")
    docs, problems = load_skill_dirs([PACKAGED_DIR], language)
    assert problems == []
    assert {d.name: (d.actions, d.version) for d in docs} == {
        d.name: (d.actions, d.version) for d in reference
    }
    for doc in docs:
        assert Path(doc.file_path).parent.name == language


def test_check_language_names_the_allowed_values() -> None:
    assert check_language("ja") == "ja"
    assert check_language(" ZH ") == "zh"
    for bad in ("fr", "", None, 3):
        with pytest.raises(ValidationError, match="is not one of en, ja, zh"):
            check_language(bad)


def test_agent_language_setting_defaults_to_en_and_is_checked(tmp_path: Path) -> None:
    assert load_settings(env={}).agent.language == "en"
    assert load_settings(env={"OPENCRAB_AGENT__LANGUAGE": "ja"}).agent.language == "ja"
    config = tmp_path / "c.toml"
    config.write_text('[agent]\nlanguage = "fr"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_settings(config_file=config, env={})
    message = str(caught.value)
    assert "agent.language" in message
    assert "'en', 'ja' or 'zh'" in message


def test_packaged_default_toml_documents_the_language() -> None:
    default = Path(opencrab.config.__file__).with_name("default.toml")
    assert tomllib.loads(default.read_text(encoding="utf-8"))["agent"]["language"] == "en"
