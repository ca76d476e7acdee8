"""OpenCrab: a self-hosted framework and server for autonomous LLM agents."""

from __future__ import annotations

__version__ = "0.1.0"
"""The package version; pyproject.toml reads it from here (hatch), so it is never looked
up in the installed metadata, which costs tens of milliseconds at every start."""

__all__ = ["__version__"]
