"""The base of every report's response model: camelCase JSON (seed 002's naming)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """JSON in camelCase (seed 002's naming); snake_case input is accepted too."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)
