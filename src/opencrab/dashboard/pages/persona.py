"""The persona editor (seed 001 "1. ペルソナ編集"): `/agents/{name}/persona`.

Big Five and social style as sliders, thinking style, values and custom traits, identity,
base prompt, heartbeat and language, with a sample conversation that previews the edits
before they are saved. The page renders the stored agent (the AgentStore read the REST
routes make); `static/js/persona.js` saves the form with one `PUT /api/agents/{id}` and
asks `POST /api/agents/{id}/preview` for the model's answer to the sample message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from opencrab.core.agent import Agent
from opencrab.core.heartbeat import prime_warning
from opencrab.core.identity import BUILT_IN_ROLES, MAX_CUSTOM_ROLE
from opencrab.core.soul import STYLE_NAMES, quadrant
from opencrab.dashboard.pages.common import PageAgent
from opencrab.dashboard.render import render
from opencrab.prompts import LANGUAGES, Language, prompts

router = APIRouter()


@dataclass(frozen=True)
class Trait:
    """One slider: its field, label and what each end of the scale means."""

    key: str
    label: str
    low: str
    high: str


BIG_FIVE = (
    Trait("openness", "Openness", "cautious", "curious"),
    Trait("conscientiousness", "Conscientiousness", "easy-going", "organised"),
    Trait("extraversion", "Extraversion", "reserved", "outgoing"),
    Trait("agreeableness", "Agreeableness", "challenging", "cooperative"),
    Trait("neuroticism", "Neuroticism", "calm", "sensitive"),
)
SOCIAL = (
    Trait("assertiveness", "Assertiveness", "asks", "tells"),
    Trait("responsiveness", "Responsiveness", "thinks (task first)", "feels (people first)"),
)
LANGUAGE_NAMES = {"en": "English", "ja": "Japanese", "zh": "Chinese"}
THINKING_STYLES = {
    "en": ("logical", "intuitive", "analytical", "creative"),
    "ja": ("論理的", "直感的", "分析的", "創造的"),
    "zh": ("逻辑型", "直觉型", "分析型", "创造型"),
}
SAMPLE_MESSAGES = {
    "en": "Hello! Could you introduce yourself, and tell me how you would start on a new project?",
    "ja": "こんにちは！自己紹介をして、新しいプロジェクトにどう取りかかるか教えてください。",
    "zh": "你好！请介绍一下你自己，并说说你会如何着手一个新项目。",
}


@router.get("/agents/{name}/persona", response_class=HTMLResponse)
async def persona(agent: PageAgent, request: Request) -> HTMLResponse:
    """The persona editor with the stored persona filled in."""
    social = agent.soul.social_style
    derived = quadrant(social.assertiveness, social.responsiveness)
    return render(
        request,
        "persona.html",
        title=f"Persona · {agent.name}",
        agent=agent,
        tab="persona",
        big_five=BIG_FIVE,
        social=SOCIAL,
        style_names=STYLE_NAMES,
        style_choice="" if social.style_name == derived else social.style_name,
        derived_style=derived,
        roles=BUILT_IN_ROLES,
        max_custom_role=MAX_CUSTOM_ROLE,
        languages=[(code, LANGUAGE_NAMES[code]) for code in LANGUAGES],
        thinking=THINKING_STYLES,
        thinking_defaults={code: _thinking_default(code) for code in LANGUAGES},
        samples=SAMPLE_MESSAGES,
        values_text=_values_text(agent),
        traits_text=_traits_text(agent),
        home_json=_json(agent.heartbeat.home, by_alias=True),
        metadata_json=_json(agent.identity.metadata),
        prime_note=prime_warning(agent.heartbeat.interval_secs),
    )


def _thinking_default(language: Language) -> str:
    """The thinking style the prompt shows when none is set, e.g. "logical / intuitive"."""
    texts = prompts(language)
    return f"{texts['soul_default_primary']} / {texts['soul_default_secondary']}"


def _values_text(agent: Agent) -> str:
    """`custom_traits["values"]` one per line."""
    values = (agent.soul.custom_traits or {}).get("values")
    if isinstance(values, list):
        return "\n".join(
            v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for v in values
        )
    return values if isinstance(values, str) else ""


def _traits_text(agent: Agent) -> str:
    """The other custom traits as `name: value` lines (values that are not plain text, or
    would read as something else, in JSON) — what persona.js parses back."""
    lines = []
    for name, value in (agent.soul.custom_traits or {}).items():
        if name == "values":
            continue
        plain = name == name.strip() and ":" not in name and not name.startswith('"') and name
        shown = name if plain else json.dumps(name, ensure_ascii=False)
        lines.append(f"{shown}: {_trait_value(value)}")
    return "\n".join(lines)


def _trait_value(value: Any) -> str:
    if isinstance(value, str) and value == value.strip() and "\n" not in value:
        try:
            json.loads(value)
        except ValueError:
            return value  # plain text that cannot be mistaken for JSON
    return json.dumps(value, ensure_ascii=False)


def _json(value: Any, *, by_alias: bool = False) -> str:
    """A hidden field's JSON, "" for none (sent back as null)."""
    if value is None:
        return ""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json", by_alias=by_alias)
    return json.dumps(value, ensure_ascii=False)
