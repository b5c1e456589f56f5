"""A schema registry spoken to over its Confluent-compatible HTTP API, as a client application would."""

from __future__ import annotations

import json
from typing import Any

import requests

CT = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


def register(url: str, subject: str, schema: Any) -> int:
    answer = requests.post(
        f"{url}/apis/ccompat/v7/subjects/{subject}/versions",
        headers=CT,
        data=json.dumps({"schema": json.dumps(schema)}),
        timeout=10,
    )
    answer.raise_for_status()
    return int(answer.json()["id"])


def version(url: str, subject: str, number: int | str) -> dict[str, Any] | None:
    answer = requests.get(f"{url}/apis/ccompat/v7/subjects/{subject}/versions/{number}", timeout=10)
    return None if answer.status_code == 404 else dict(answer.json())


def versions(url: str, subject: str) -> list[int]:
    answer = requests.get(f"{url}/apis/ccompat/v7/subjects/{subject}/versions", timeout=10)
    return [] if answer.status_code == 404 else list(answer.json())
