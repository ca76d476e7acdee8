"""Soul (seed 001 "Soul"): who the agent is inside — social style, Big Five, thinking style.

`build_context` renders the 【SOUL】 block in the agent's language (numbers with one
decimal); under `ja` it is the seed's block exactly. Custom traits, when there are any,
follow it: `custom_traits["values"]` (a list or a text) as the agent's values, then every
other trait as a `name: value` line, so what the persona editor defines reaches the model.

Example:
    soul = Soul(persona_name="慎重な分析家",
                social_style=SocialStyle(assertiveness=-0.4, responsiveness=-0.6))
    soul.social_style.style_name   # "Analytical" (from the quadrant when not given)
    print(soul.build_context("ja"))
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

from opencrab.prompts import Language, prompts

STYLE_NAMES = ("Driving", "Expressive", "Amiable", "Analytical")


class _Strict(BaseModel):
    """Unknown keys are refused; JSON (the API) is camelCase, snake_case is read too."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True)


class SocialStyle(_Strict):
    """The four-quadrant social style."""

    assertiveness: float = Field(default=0.0, ge=-1.0, le=1.0)  # -1 asks … 1 tells
    responsiveness: float = Field(default=0.0, ge=-1.0, le=1.0)  # -1 thinks … 1 feels
    style_name: str = ""  # Driving, Expressive, Amiable, Analytical; derived when empty

    @model_validator(mode="after")
    def _name_from_quadrant(self) -> SocialStyle:
        if not self.style_name:
            self.style_name = quadrant(self.assertiveness, self.responsiveness)
        return self


def quadrant(assertiveness: float, responsiveness: float) -> str:
    """The style name of a point: assertive+feeling Expressive, assertive+thinking Driving."""
    if assertiveness >= 0:
        return "Expressive" if responsiveness >= 0 else "Driving"
    return "Amiable" if responsiveness >= 0 else "Analytical"


class Personality(_Strict):
    """Big Five traits, each 0 … 1."""

    openness: float = Field(default=0.5, ge=0.0, le=1.0)
    conscientiousness: float = Field(default=0.5, ge=0.0, le=1.0)
    extraversion: float = Field(default=0.5, ge=0.0, le=1.0)
    agreeableness: float = Field(default=0.5, ge=0.0, le=1.0)
    neuroticism: float = Field(default=0.5, ge=0.0, le=1.0)


class ThinkingStyle(_Strict):
    """Leanings such as logical, intuitive, analytical, creative; empty shows the language's
    default (logical, then intuitive)."""

    primary: str = ""
    secondary: str = ""
    description: str = ""


class Soul(_Strict):
    persona_name: str = Field(min_length=1, max_length=200)
    social_style: SocialStyle = Field(default_factory=SocialStyle)
    personality: Personality = Field(default_factory=Personality)
    thinking_style: ThinkingStyle = Field(default_factory=ThinkingStyle)
    custom_traits: dict[str, Any] | None = None

    def build_context(self, language: Language) -> str:
        """The 【SOUL】 section in `language` (the seed's format under ja)."""
        s, p, t = self.social_style, self.personality, self.thinking_style
        texts = prompts(language)
        block = texts.render(
            "soul",
            persona=self.persona_name,
            style=s.style_name,
            assertiveness=_f1(s.assertiveness),
            responsiveness=_f1(s.responsiveness),
            openness=_f1(p.openness),
            conscientiousness=_f1(p.conscientiousness),
            extraversion=_f1(p.extraversion),
            agreeableness=_f1(p.agreeableness),
            neuroticism=_f1(p.neuroticism),
            primary=t.primary or texts["soul_default_primary"],
            secondary=t.secondary or texts["soul_default_secondary"],
            description=t.description,
        )
        traits = _traits(self.custom_traits, language)
        return block.rstrip("\n") + traits if traits else block


def _traits(traits: dict[str, Any] | None, language: Language) -> str:
    """The lines after the SOUL block: values, then the other custom traits; "" for none."""
    if not traits:
        return ""
    texts = prompts(language)
    lines: list[str] = []
    values = traits.get("values")
    if isinstance(values, list):
        values = texts["soul_values_separator"].join(_text(v) for v in values if _text(v))
    if isinstance(values, str) and values.strip():
        lines.append(texts.render("soul_values", values=values.strip()))
    others = [(str(k), _text(v)) for k, v in traits.items() if k != "values"]
    others = [(k, v) for k, v in others if v]
    if others:
        lines.append(texts["soul_traits"])
        lines += [texts.render("soul_trait", name=k, value=v) for k, v in others]
    return "".join("\n" + line for line in lines)


def _text(value: Any) -> str:
    """A trait's value as one line: text as it is, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return " ".join(text.split())


def _f1(value: float) -> str:
    """Rust's `{:.1}`."""
    return f"{value:.1f}"
