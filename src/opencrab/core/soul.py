"""Soul (seed 001 "Soul"): who the agent is inside — social style, Big Five, thinking style.

`build_context` renders the seed's 【SOUL】 block exactly (numbers with one decimal).

Example:
    soul = Soul(persona_name="慎重な分析家",
                social_style=SocialStyle(assertiveness=-0.4, responsiveness=-0.6))
    soul.social_style.style_name   # "Analytical" (from the quadrant when not given)
    print(soul.build_context())
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.alias_generators import to_camel

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
    primary: str = "論理的"  # logical, intuitive, analytical, creative …
    secondary: str = "直感的"
    description: str = ""


class Soul(_Strict):
    persona_name: str = Field(min_length=1, max_length=200)
    social_style: SocialStyle = Field(default_factory=SocialStyle)
    personality: Personality = Field(default_factory=Personality)
    thinking_style: ThinkingStyle = Field(default_factory=ThinkingStyle)
    custom_traits: dict[str, Any] | None = None

    def build_context(self) -> str:
        """The 【SOUL】 section, in the seed's format."""
        s, p, t = self.social_style, self.personality, self.thinking_style
        return (
            "【SOUL】\n"
            f"ペルソナ: {self.persona_name}\n"
            f"ソーシャルスタイル: {s.style_name}"
            f"（主張性: {_f1(s.assertiveness)}, 感情性: {_f1(s.responsiveness)}）\n"
            "性格特性:\n"
            f"  - 開放性: {_f1(p.openness)}\n"
            f"  - 誠実性: {_f1(p.conscientiousness)}\n"
            f"  - 外向性: {_f1(p.extraversion)}\n"
            f"  - 協調性: {_f1(p.agreeableness)}\n"
            f"  - 神経症傾向: {_f1(p.neuroticism)}\n"
            f"思考スタイル: {t.primary}（副: {t.secondary}）\n"
            f"{t.description}"
        )


def _f1(value: float) -> str:
    """Rust's `{:.1}`."""
    return f"{value:.1f}"
