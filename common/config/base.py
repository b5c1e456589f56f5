"""Shared by the configuration's models: the strict base model (a field's docstring is its description)
and what a librdkafka property value may be.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from ferry.common.placeholders import Secret

# A librdkafka property value as YAML can spell it; a Secret (masked repr) when it came from a
# placeholder or its name says it is a secret.
ClientValue = Secret | str | int | float | bool


def _valid_regexes(patterns: list[str]) -> list[str]:
    """``patterns`` as they are, or a ValueError naming the first that is not a regular expression."""
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"{pattern!r} is not a valid regular expression: {exc}") from None
    return patterns


class _Strict(BaseModel):
    # A field's docstring is its description: docs/configuration.md is generated from them
    # (scripts/config_docs.py; `make lint` fails when the committed file is stale).
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)
