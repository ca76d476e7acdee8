"""Identity (seed 001 "Identity"): the agent's name and role among others.

Roles are the seed's `AgentRole` enum: Discussant, Facilitator, Observer or
Custom("…"). `build_context` renders the 【IDENTITY】 block in the agent's language (under
`ja` the seed's format), with the role as Rust's `{:?}` prints it (`Facilitator`,
`Custom("司会補佐")`).

Example:
    who = Identity(name="Aki", role=AgentRole.parse("facilitator"), job_title="PM")
    who.build_context("ja")
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_serializer
from pydantic.alias_generators import to_camel

from opencrab.errors import ValidationError
from opencrab.prompts import Language, prompts

BUILT_IN_ROLES = ("Discussant", "Facilitator", "Observer")
MAX_CUSTOM_ROLE = 57  # stored as "custom:<name>" in a 64-character column


class AgentRole(BaseModel):
    """Discussant, Facilitator, Observer, or a custom role name."""

    model_config = ConfigDict(frozen=True)

    kind: str = "Discussant"
    custom: str | None = None

    @classmethod
    def discussant(cls) -> AgentRole:
        return cls(kind="Discussant")

    @classmethod
    def facilitator(cls) -> AgentRole:
        return cls(kind="Facilitator")

    @classmethod
    def observer(cls) -> AgentRole:
        return cls(kind="Observer")

    @classmethod
    def custom_role(cls, name: str) -> AgentRole:
        name = name.strip()
        if not name or len(name) > MAX_CUSTOM_ROLE:
            raise ValidationError(f"a custom role needs 1 to {MAX_CUSTOM_ROLE} characters")
        return cls(kind="Custom", custom=name)

    @classmethod
    def parse(cls, value: Any) -> AgentRole:
        """From "facilitator", "Custom(\\"x\\")", "custom:x", {"custom": "x"} or a role."""
        if isinstance(value, AgentRole):
            return value
        if isinstance(value, dict):
            if set(value) == {"custom"} and isinstance(value["custom"], str):
                return cls.custom_role(value["custom"])
            if set(value) >= {"kind"}:
                kind = value.get("kind")
                return (
                    cls.custom_role(str(value.get("custom") or ""))
                    if kind == "Custom"
                    else cls.parse(kind)
                )
        if isinstance(value, str):
            text = value.strip()
            for name in BUILT_IN_ROLES:
                if text.lower() == name.lower():
                    return cls(kind=name)
            lowered = text.lower()
            if lowered.startswith("custom:"):
                return cls.custom_role(text[len("custom:") :])
            if lowered.startswith("custom(") and text.endswith(")"):
                inner = text[len("custom(") : -1].strip()
                try:
                    inner = json.loads(inner) if inner.startswith('"') else inner
                except json.JSONDecodeError:
                    raise ValidationError(f"role {value!r}: bad quoting in Custom(...)") from None
                return cls.custom_role(str(inner))
        raise ValidationError(
            f"role {value!r} is not one of discussant, facilitator, observer, "
            'or custom:NAME / {"custom": NAME}'
        )

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        """What the API documents: the forms a role is written in (see `parse`)."""
        name = {"type": "string", "minLength": 1, "maxLength": MAX_CUSTOM_ROLE, "pattern": r"\S"}
        return {
            "description": "discussant, facilitator, observer, or a custom role: "
            '"custom:NAME" or {"custom": NAME}',
            "anyOf": [
                {"type": "string", "enum": [r.lower() for r in BUILT_IN_ROLES]},
                {
                    "type": "string",
                    "pattern": rf"^custom:\s*\S.{{0,{MAX_CUSTOM_ROLE - 1}}}$",
                    "maxLength": len("custom:") + MAX_CUSTOM_ROLE,
                },
                {
                    "type": "object",
                    "properties": {"custom": name},
                    "required": ["custom"],
                    "additionalProperties": False,
                },
            ],
        }

    def stored(self) -> str:
        """The `identity.role` column value."""
        return f"custom:{self.custom}" if self.kind == "Custom" else self.kind.lower()

    def __str__(self) -> str:
        """Rust's Debug form of the seed's enum."""
        if self.kind == "Custom":
            return f"Custom({json.dumps(self.custom, ensure_ascii=False)})"
        return self.kind

    @model_serializer
    def _serialize(self) -> str | dict[str, str]:
        return {"custom": self.custom or ""} if self.kind == "Custom" else self.kind.lower()


class Identity(BaseModel):
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, populate_by_name=True
    )  # API JSON: camelCase

    name: str = Field(min_length=1, max_length=100)
    role: AgentRole = Field(default_factory=AgentRole.discussant)
    job_title: str | None = None
    organization: str | None = None
    image_url: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, value: Any) -> AgentRole:
        try:
            return AgentRole.parse(value)
        except ValidationError as exc:
            raise ValueError(str(exc)) from None

    def build_context(self, language: Language) -> str:
        """The 【IDENTITY】 section in `language` (the seed's format under ja)."""
        texts = prompts(language)
        text = texts.render("identity", name=self.name, role=self.role)
        if self.job_title:
            text += texts.render("identity_job_title", job_title=self.job_title)
        if self.organization:
            text += texts.render("identity_organization", organization=self.organization)
        return text
