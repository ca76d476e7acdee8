"""The LLM settings as the API and the settings page show them: every provider's switch,
key (its last four characters) and base URL, the aliases and the fallback chain, each
with where its value comes from (opencrab.llm.live_settings), and the audit of changes."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from opencrab.core.runtime import Runtime
from opencrab.llm.live_settings import ProviderView, Source
from opencrab.reports.model import ApiModel


class ValueSource(ApiModel):
    kind: Literal["packaged", "file", "environment", "flag", "dashboard", "unset"]
    label: str
    locked: bool

    @classmethod
    def of(cls, source: Source) -> ValueSource:
        return cls(kind=source.kind, label=source.label, locked=source.locked)


class ProviderSettings(ApiModel):
    name: str
    enabled: bool
    enabled_source: ValueSource
    has_key: bool
    """Whether calls to the provider carry a key (false when the one stored cannot be used)."""
    key_last4: str | None = None
    key_source: ValueSource
    key_problem: str | None = None
    """Why a stored or configured key is not used: it cannot be decrypted, or it belongs
    to another origin than the base URL's. Null when there is none."""
    needs_key: str | None = None
    """Where to set the key the settings need for this provider (it is used and has none
    yet; calls to it fail with this text). Null when it needs none or has one."""
    base_url: str | None = None
    base_url_source: ValueSource
    takes_key: bool
    takes_base_url: bool
    key_env: str | None = None
    """The environment variable the provider's key is read from (what the provider
    declares); null when it takes no key."""

    @classmethod
    def of(cls, view: ProviderView) -> ProviderSettings:
        return cls(
            name=view.name,
            enabled=view.enabled,
            enabled_source=ValueSource.of(view.enabled_source),
            has_key=view.has_key,
            key_last4=view.key_last4,
            key_source=ValueSource.of(view.key_source),
            key_problem=view.key_problem,
            needs_key=view.needs_key,
            base_url=view.base_url,
            base_url_source=ValueSource.of(view.base_url_source),
            takes_key=view.takes_key,
            takes_base_url=view.takes_base_url,
            key_env=view.key_env,
        )


class ProviderChanged(ProviderSettings):
    key_cleared: str | None = None
    """Why this change cleared the stored key (its base URL moved to another origin
    and no key was given with it); null when it did not."""


class AliasSetting(ApiModel):
    alias: str
    provider: str
    model: str
    source: ValueSource


class FallbackSetting(ApiModel):
    chain: list[str]
    source: ValueSource


class LlmSettingsView(ApiModel):
    providers: list[ProviderSettings]
    aliases: list[AliasSetting]
    fallback: FallbackSetting


class AuditRecord(ApiModel):
    at: datetime
    actor: str
    target: str
    action: str
    detail: str


def settings_view(runtime: Runtime) -> LlmSettingsView:
    """Providers, aliases and the fallback chain with their sources (never a key)."""
    live = runtime.llm_settings
    chain, chain_source = live.chain_view()
    return LlmSettingsView(
        providers=[ProviderSettings.of(v) for v in live.provider_views()],
        aliases=[
            AliasSetting(
                alias=alias, provider=t.provider, model=t.model, source=ValueSource.of(src)
            )
            for alias, t, src in live.alias_views()
        ],
        fallback=FallbackSetting(chain=chain, source=ValueSource.of(chain_source)),
    )


def audit_records(runtime: Runtime, limit: int, offset: int) -> list[AuditRecord]:
    """Who changed which LLM setting and when, newest first (never a secret)."""
    entries = runtime.llm_settings.audit_log(limit, offset)
    return [
        AuditRecord(at=e.at, actor=e.actor, target=e.target, action=e.action, detail=e.detail)
        for e in entries
        if e.at is not None
    ]
