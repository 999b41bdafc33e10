"""Base of every job kind's parameters schema."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class JobParams(BaseModel):
    """Unknown names are refused (422); each name may be given in snake_case (as the
    algorithm's own parameter) or in camelCase (as the rest of the API)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")
