"""The layer that set a configuration value: its label, and how to look one up.

The loader records, for every leaf it merged, the label of the layer that set it (see
opencrab.config.provenance for what the labels are and what they mean for model
choice). These few names sit in their own module because the schema (`Settings.origin`)
and provenance both need them, and provenance reads the schema.
"""

from __future__ import annotations

from collections.abc import Mapping

KeyPath = tuple[str | int, ...]
DEFAULT_SOURCE = "packaged default.toml"


def origin_of(origins: Mapping[KeyPath, str], path: KeyPath) -> str:
    """The layer that set `path`, or the nearest enclosing key that was set.

    A whole table set at once records its leaves, so any leaf below tells the layer;
    a key no layer set is the packaged default.
    """
    for end in range(len(path), 0, -1):
        if path[:end] in origins:
            return origins[path[:end]]
    for known, source in origins.items():
        if known[: len(path)] == path:
            return source
    return DEFAULT_SOURCE
