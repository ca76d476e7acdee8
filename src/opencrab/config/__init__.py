"""Configuration: the packaged `default.toml`, the schema and the layered loader."""

from __future__ import annotations

from opencrab.config.loader import load_settings
from opencrab.config.models import ModelRef, ProviderConfig, Settings

__all__ = ["ModelRef", "ProviderConfig", "Settings", "load_settings"]
