"""Kafka clients built on first use, one per key (a cluster, or a cluster and a group), kept for
the owner's life: a metadata request reuses the connection the last one opened."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

Key = TypeVar("Key", bound=Hashable)


class ClientPool(Generic[Key]):
    """``pool[key]`` builds the client with ``build(key)`` the first time, then hands the same one back."""

    def __init__(self, build: Callable[[Key], Any]) -> None:
        self._build = build
        self._clients: dict[Key, Any] = {}

    def __getitem__(self, key: Key) -> Any:
        client = self._clients.get(key)
        if client is None:
            client = self._clients[key] = self._build(key)
        return client

    def __contains__(self, key: object) -> bool:
        """Whether the client for ``key`` was built already."""
        return key in self._clients

    def __iter__(self) -> Iterator[Any]:
        """The clients built so far."""
        return iter(list(self._clients.values()))

    def clear(self) -> None:
        """Forgets every client (the caller closes them first, as each kind closes differently)."""
        self._clients.clear()
