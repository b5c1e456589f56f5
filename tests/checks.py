"""Assertions shared by the tests."""

from __future__ import annotations

from typing import Any


def assert_json_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status
    assert response.is_json
    body: dict[str, Any] = response.get_json()
    assert body["status"] == status
    assert isinstance(body["error"], str) and body["error"]
    return body
