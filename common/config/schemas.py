"""The ``heartbeats``, ``schemas`` (schema registries and their authentication) and ``logging``
sections.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator

from ferry.common.config.base import _Strict, _valid_regexes
from ferry.common.core.schemas import SubjectFormat


class HeartbeatsConfig(_Strict):
    interval_s: float = Field(0.0, ge=0)
    """>0: the leader writes ferry.heartbeats on every route's source this often and every route mirrors it (GET
    /heartbeats, ferry_controller_heartbeat_* metrics); 0: off"""


class RegistryAuthConfig(_Strict):
    """HTTP basic auth for a schema registry."""

    username: str = Field(min_length=1)
    """the user name"""
    password: SecretStr
    """the password; e.g. ${env:DST_REGISTRY_PASSWORD} or ${file:/etc/ferry/registry.password}"""


class RegistryConfig(_Strict):
    """A cluster's schema registry (Confluent-compatible API; Apicurio Registry 2.x for IDs)."""

    url: str = Field(pattern=r"^https?://[^\s/]+(/[^\s]*)?$", description="base URL, e.g. http://registry:8080")
    # How subjects are named on this cluster: {topic} exactly once, plus names from subject_vars.
    subject_format: str = "{topic}-value"
    """how subjects are named on this cluster"""
    subject_vars: dict[str, str] = Field(default_factory=dict)
    """the other {names} of subject_format"""
    auth: RegistryAuthConfig | None = None
    """HTTP basic auth; absent: none"""
    timeout_s: float = Field(10.0, gt=0, le=300)
    """per request; temporary failures retry up to 2x this"""

    @model_validator(mode="after")
    def _format(self) -> RegistryConfig:
        SubjectFormat(self.subject_format, self.subject_vars)  # its checks: {topic} once, every field defined
        if "topic" in self.subject_vars:
            raise ValueError("subject_vars may not define 'topic' (it comes from the subject)")
        return self

    @property
    def base_url(self) -> str:
        return self.url.rstrip("/")


class SchemasConfig(_Strict):
    """Schema distribution: the leader copies subject versions from the primary cluster's
    registry to the other clusters' registries, keeping schema IDs."""

    primary: str = Field(description="the cluster whose registry is the source of truth")
    registries: dict[str, RegistryConfig]
    """cluster name -> its schema registry (Apicurio Registry 2.x, Confluent-compatible API)"""
    # The clusters to distribute to (default: every other cluster with a registry).
    targets: list[str] | None = None
    """where to distribute; absent: every other cluster in registries"""
    # Only primary subjects whose full name matches one of these (default: all that fit the format).
    include: list[str] = Field(default_factory=lambda: [".*"])
    """only primary subjects whose full name matches one of these"""
    interval_s: float = Field(10.0, gt=0)
    """how often the leader runs a distribution pass"""
    # Subject versions per import request to a target (bounds a request's size; a pass
    # interrupted between requests leaves the rest for the next pass).
    import_batch: int = Field(50, ge=1, le=10_000)
    """subject versions per import request to a target, in order"""

    @field_validator("include")
    @classmethod
    def _regexes(cls, value: list[str]) -> list[str]:
        return _valid_regexes(value)

    @model_validator(mode="after")
    def _known(self) -> SchemasConfig:
        if self.primary not in self.registries:
            raise ValueError(f"primary {self.primary!r} has no entry in registries (known: {sorted(self.registries)})")
        for target in self.targets or []:
            if target not in self.registries:
                raise ValueError(f"target {target!r} has no entry in registries")
            if target == self.primary:
                raise ValueError(f"target {target!r} is the primary")
        return self

    @property
    def target_names(self) -> list[str]:
        if self.targets is not None:
            return list(self.targets)
        return sorted(name for name in self.registries if name != self.primary)

    def wants(self, subject: str) -> bool:
        return any(re.fullmatch(pattern, subject) for pattern in self.include)


class LoggingConfig(_Strict):
    format: Literal["text", "json"] = "text"
    """text: time, level, logger and message on a line; json: one JSON object per line (time, level, logger, message,
    exception, and the worker, route, topic, partition a line is about); `--log-format` overrides"""


# A problem for pydantic to report: where (loc), its error type, and the message.
