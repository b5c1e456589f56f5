"""An operator's controls over a running fleet: paused partitions, cordoned and drained workers,
the autobalancing switch and route throttles, and how a route's budget splits across its workers.

Pure: plain data in, plain data out; no I/O, no clock.

The controls are desired state (``controls/desired`` in ZooKeeper), applied whole, never as deltas:

- ``paused``: route -> topic -> the paused partitions (None: every partition of the topic). A paused
  partition keeps its worker; the worker stops consuming it after committing what was acknowledged.
- ``cordoned``: worker -> ``cordon`` (receives nothing new, keeps what it holds) or ``drain``
  (receives nothing new and gives away what it holds, with the usual flush-and-commit handoff).
- ``autobalancing``: False skips the rebalance after a worker joins; None: the config's.
- ``throttles``: route -> its budget (bytes/s and records/s, each None for no limit); overrides
  the route's configured throttle.

:func:`shares` splits each route's budget across the workers that serve it by their share of the
route's partitions (``controls/shares``, written by the leader with ``controller.balance: count``;
with ``load`` the split follows measured demand: :mod:`common.core.operate.load_shares`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ferry.common.model import IdealState, PartitionKey, TopicKey, decode, encode

CORDON = "cordon"
DRAIN = "drain"


@dataclass(frozen=True)
class Throttle:
    """A rate budget; None: no limit on that measure."""

    max_bytes_per_s: float | None = None
    max_records_per_s: float | None = None

    def limited(self) -> bool:
        return self.max_bytes_per_s is not None or self.max_records_per_s is not None

    def to_json(self) -> dict[str, float | None]:
        return {"max_bytes_per_s": self.max_bytes_per_s, "max_records_per_s": self.max_records_per_s}

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Throttle:
        def rate(name: str) -> float | None:
            value = raw.get(name)
            return None if value is None else float(value)

        return cls(rate("max_bytes_per_s"), rate("max_records_per_s"))


@dataclass(frozen=True)
class Controls:
    """``controls/desired``: see the module docstring."""

    paused: dict[str, dict[str, frozenset[int] | None]] = field(default_factory=dict)
    cordoned: dict[str, str] = field(default_factory=dict)
    autobalancing: bool | None = None
    throttles: dict[str, Throttle] = field(default_factory=dict)

    def is_paused(self, partition: PartitionKey) -> bool:
        topics = self.paused.get(partition.route)
        if not topics or partition.topic not in topics:
            return False
        numbers = topics[partition.topic]
        return numbers is None or partition.partition in numbers

    def paused_among(self, partitions: Iterable[PartitionKey]) -> frozenset[PartitionKey]:
        """The paused ones of ``partitions``."""
        if not self.paused:
            return frozenset()
        return frozenset(p for p in partitions if self.is_paused(p))

    def paused_partitions(self, ideal: Mapping[TopicKey, IdealState]) -> set[PartitionKey]:
        """Every paused partition of the topics in ``ideal`` (a partition number beyond its topic's count
        is left out); costs what is paused, not the whole ideal state."""
        found: set[PartitionKey] = set()
        for route, topics in self.paused.items():
            for topic, numbers in topics.items():
                state = ideal.get(TopicKey(route, topic))
                if state is None:
                    continue
                wanted = range(state.partitions) if numbers is None else (n for n in numbers if n < state.partitions)
                found.update(PartitionKey(route, topic, n) for n in wanted)
        return found

    def drained(self) -> set[str]:
        return {w for w, how in self.cordoned.items() if how == DRAIN}

    def pause(self, route: str, topic: str, partitions: Iterable[int] | None) -> Controls:
        """With ``partitions`` (None: the whole topic) of ``route``/``topic`` paused too."""
        topics = dict(self.paused.get(route, {}))
        if partitions is None:
            topics[topic] = None
        else:
            known = topics.get(topic, frozenset())
            if known is not None:  # a whole paused topic stays whole
                topics[topic] = known | frozenset(partitions)
        return self._with(paused={**self.paused, route: topics})

    def resume(self, route: str, topic: str, partitions: Iterable[int] | None) -> Controls:
        """With ``partitions`` (None: every partition) of ``route``/``topic`` no longer paused.

        Resuming some partitions of a topic paused whole is refused (ValueError): the topic's
        partition count is not known here, and a pause of the whole topic covers partitions added later.
        """
        topics = dict(self.paused.get(route, {}))
        if topic not in topics:
            return self
        known = topics[topic]
        if partitions is None:
            del topics[topic]
        elif known is None:
            raise ValueError(f"{topic} is paused as a whole topic: resume it whole")
        else:
            left = known - frozenset(partitions)
            if left:
                topics[topic] = left
            else:
                del topics[topic]
        paused = {**self.paused, route: topics}
        if not topics:
            del paused[route]
        return self._with(paused=paused)

    def cordon(self, worker: str, how: str) -> Controls:
        return self._with(cordoned={**self.cordoned, worker: how})

    def uncordon(self, worker: str) -> Controls:
        return self._with(cordoned={w: how for w, how in self.cordoned.items() if w != worker})

    def with_autobalancing(self, enabled: bool) -> Controls:
        return self._with(autobalancing=enabled)

    def throttle(self, route: str, throttle: Throttle) -> Controls:
        """With ``route``'s run-time budget set (a budget without any limit removes the override)."""
        throttles = {r: t for r, t in self.throttles.items() if r != route}
        if throttle.limited():
            throttles[route] = throttle
        return self._with(throttles=throttles)

    def _with(self, **changed: Any) -> Controls:
        values = {
            "paused": self.paused,
            "cordoned": self.cordoned,
            "autobalancing": self.autobalancing,
            "throttles": self.throttles,
            **changed,
        }
        return Controls(**values)

    def to_json(self) -> dict[str, Any]:
        return {
            "paused": {
                route: {
                    topic: None if numbers is None else sorted(numbers) for topic, numbers in sorted(topics.items())
                }
                for route, topics in sorted(self.paused.items())
            },
            "cordoned": dict(sorted(self.cordoned.items())),
            "autobalancing": self.autobalancing,
            "throttles": {route: t.to_json() for route, t in sorted(self.throttles.items())},
        }

    def to_bytes(self) -> bytes:
        return encode(self.to_json())

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | None) -> Controls:
        if not raw:
            return cls()
        paused = {
            str(route): {
                str(topic): None if numbers is None else frozenset(int(n) for n in numbers)
                for topic, numbers in topics.items()
            }
            for route, topics in (raw.get("paused") or {}).items()
        }
        cordoned = {str(w): str(how) for w, how in (raw.get("cordoned") or {}).items() if how in (CORDON, DRAIN)}
        enabled = raw.get("autobalancing")
        throttles = {str(r): Throttle.from_json(t) for r, t in (raw.get("throttles") or {}).items()}
        return cls(paused, cordoned, None if enabled is None else bool(enabled), throttles)

    @classmethod
    def from_bytes(cls, data: bytes | None) -> Controls:
        """A node that does not parse reads as no controls at all (ValueError for the caller to log)."""
        raw = decode(data)
        if raw is not None and not isinstance(raw, dict):
            raise ValueError("controls must be a JSON object")
        return cls.from_json(raw)


Shares = dict[str, dict[str, Throttle]]
"""worker -> route -> that worker's part of the route's budget (``controls/shares``)."""


def shares(budgets: Mapping[str, Throttle], assignment: Mapping[PartitionKey, str]) -> Shares:
    """Each route's budget split across the workers that hold its partitions, by their share of them.

    A route with a budget and no assigned partition gets no entry. A worker with k of a route's n
    partitions gets k/n of each limit.
    """
    counts: dict[str, Counter[str]] = {}
    for partition, worker in assignment.items():
        if partition.route in budgets:
            counts.setdefault(partition.route, Counter())[worker] += 1
    result: Shares = {}
    for route, by_worker in sorted(counts.items()):
        budget = budgets[route]
        total = sum(by_worker.values())
        for worker, count in sorted(by_worker.items()):
            part = count / total
            result.setdefault(worker, {})[route] = Throttle(
                None if budget.max_bytes_per_s is None else budget.max_bytes_per_s * part,
                None if budget.max_records_per_s is None else budget.max_records_per_s * part,
            )
    return result


def shares_to_bytes(value: Shares) -> bytes:
    return encode({w: {r: t.to_json() for r, t in sorted(routes.items())} for w, routes in sorted(value.items())})


def shares_from_bytes(data: bytes | None) -> Shares:
    raw = decode(data)
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError("throttle shares must be a JSON object")
    return {str(w): {str(r): Throttle.from_json(t) for r, t in routes.items()} for w, routes in raw.items()}
