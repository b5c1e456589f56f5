"""A route's failover as a state machine, and the recovery point (RPO) of an unplanned one.

Pure: no I/O, no clock (times are passed in).

A route's failover state lives in ZooKeeper (``failover/<route>``, :mod:`common.zk.layout`), so a
command that dies halfway is retried and goes on from the phase it reached. States::

    ACTIVE ──request──> REQUESTED ──> DRAINING (planned: wait for quiet source, route copies the rest)
                                 └──> SYNCING (unplanned: straight from the last checkpoints)
    DRAINING ──> SYNCING (final checkpoint and group sync, verified) ──> FAILED_OVER (route stopped)
    FAILED_OVER ──failback──> FAILING_BACK (the reverse route copies what the destination got since)
    FAILING_BACK ──planned failover of the reverse route, then restore──> ACTIVE

``ACTIVE`` is the absence of a node. A route is *stopped* (the leader drops its partitions from the
ideal state, workers stop copying it) from ``SYNCING`` on: a planned failover only stops copying
once the destination holds everything, an unplanned one at once. A second ``failover`` of a route
that is already failed over (or failing back) is refused with the current state, never run twice by
accident; a ``failover`` of a route whose state is REQUESTED, DRAINING or SYNCING resumes it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict

from ferry.common.model import encode

ACTIVE = "ACTIVE"
REQUESTED = "REQUESTED"
DRAINING = "DRAINING"
SYNCING = "SYNCING"
FAILED_OVER = "FAILED_OVER"
FAILING_BACK = "FAILING_BACK"

STATES = (ACTIVE, REQUESTED, DRAINING, SYNCING, FAILED_OVER, FAILING_BACK)
IN_PROGRESS = frozenset({REQUESTED, DRAINING, SYNCING})
STOPPED = frozenset({SYNCING, FAILED_OVER, FAILING_BACK})  # the route copies nothing

TRANSITIONS: Mapping[str, frozenset[str]] = {
    ACTIVE: frozenset({REQUESTED}),
    REQUESTED: frozenset({DRAINING, SYNCING}),
    DRAINING: frozenset({SYNCING}),
    SYNCING: frozenset({FAILED_OVER}),
    FAILED_OVER: frozenset({FAILING_BACK, ACTIVE}),
    FAILING_BACK: frozenset({ACTIVE}),
}


class TransitionRefused(ValueError):
    """A transition the state machine does not have (e.g. a second failover of a failed-over route)."""


def check_transition(current: str, wanted: str) -> None:
    """Raises :class:`TransitionRefused` unless ``current -> wanted`` is a transition (or a no-op)."""
    if current == wanted:
        return
    if wanted not in TRANSITIONS.get(current, frozenset()):
        raise TransitionRefused(f"the route is {current}: it cannot go to {wanted}")


PLANNED_PATH = (REQUESTED, DRAINING, SYNCING, FAILED_OVER)
UNPLANNED_PATH = (REQUESTED, SYNCING, FAILED_OVER)


def phases_ahead(current: str, planned: bool) -> list[str]:
    """The phases a failover from ``current`` goes through: all of them from ``ACTIVE``; from a phase
    in progress, that phase again (each is idempotent, a retry runs it anew) and the ones after."""
    path = PLANNED_PATH if planned else UNPLANNED_PATH
    if current not in path:
        return list(path)
    if current == REQUESTED:
        return list(path[1:])
    return list(path[path.index(current) :])


def is_stopped(state: str) -> bool:
    """Whether a route in ``state`` is copied by nobody."""
    return state in STOPPED


def partition_key(topic: str, partition: int) -> str:
    """``topic/partition``: the key of per-partition maps in the state's JSON."""
    return f"{topic}/{partition}"


# -- the RPO of an unplanned failover ---------------------------------------------------------------
#
# The leader looks at the source's log ends every ``lag_interval_s`` and keeps them in ZooKeeper
# (``source_ends/<route>``, :class:`SourceEndsPayload`) with the rate each partition was produced at
# between its two last looks. What an unplanned failover reports is a range:
#
# - the lower bound: records the leader saw at the source that never reached the destination (exact);
# - an upper estimate: the lower bound plus, per partition, the last measured produce rate times the
#   time since the leader's last look: what producers probably wrote after it, which nobody saw.
#
# The node is written only when something in it changed: the ends moved, or a rate did (a source
# that goes quiet is written once more, with rates of 0). So its ``at`` is the leader's last look
# whenever the rates are not 0, and with rates of 0 the time since does not matter.


class SourceEndsPayload(BaseModel):
    """``source_ends/<route>``: the source log ends the leader last saw, when, and at what rate each grew.

    ``rates`` (records a second, per ``topic/partition``) is absent from a node an older Ferry wrote:
    it reads with no rate known. A partition is missing from ``rates`` until two looks measured it.
    Fields a newer Ferry adds are ignored; the keys are written sorted."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    at: float | None = None  # when the leader wrote the node (seconds since the epoch)
    ends: dict[str, int] = {}
    rates: dict[str, float] | None = None

    def to_bytes(self) -> bytes:
        payload = self.model_dump(mode="json")
        if payload["rates"] is None:
            del payload["rates"]
        return encode(payload)

    @classmethod
    def from_bytes(cls, data: bytes | None) -> SourceEndsPayload | None:
        """The node's payload; None for no data. A node that is not what Ferry writes: ``ValueError``."""
        if not data:
            return None
        return cls.model_validate_json(data)


RATE_DECIMALS = 3  # records a second, rounded: the node stays small and a quiet rate is exactly 0


def next_source_ends(old: SourceEndsPayload | None, ends: Mapping[str, int], now: float) -> SourceEndsPayload | None:
    """The node after a look at the source that found ``ends`` at ``now``; None when it need not be
    written (nothing in it changed: neither an end nor a rate).

    A partition's rate is how much its end grew since the node was last written, over the time since.
    Unknown (left out) on its first look, when the end went back (a topic created again), or when the
    node has no time. Partitions not in ``ends`` keep their end and rate. After a quiet spell the first
    rate is averaged over the spell (the quiet looks wrote nothing): low for one look."""
    old_ends = dict(old.ends) if old is not None else {}
    old_rates = dict(old.rates or {}) if old is not None else {}
    elapsed = (now - old.at) if old is not None and old.at is not None else 0.0
    rates = dict(old_rates)
    for key, end in ends.items():
        before = old_ends.get(key)
        if before is None or elapsed <= 0 or end < before:
            rates.pop(key, None)
        else:
            rates[key] = round((end - before) / elapsed, RATE_DECIMALS)
    merged = {**old_ends, **ends}
    if old is not None and merged == old_ends and (old.rates is not None and rates == old_rates):
        return None
    return SourceEndsPayload(at=now, ends=merged, rates=rates)


@dataclass(frozen=True)
class PartitionRpo:
    """What an unplanned failover left at the source of one partition."""

    topic: str
    partition: int
    source_end: int | None  # last log-end offset seen at the source (None: never seen)
    copied: int  # source offset up to which the destination holds everything
    last_copy_ms: int | None  # when the last copy was acknowledged (None: unknown)
    rate: float | None = None  # records a second produced at the source, last measured (None: unknown)
    unseen_s: float = 0.0  # seconds from the leader's last look at the source to the report

    @property
    def lost(self) -> int | None:
        """The lower bound: records known to be at the source and not at the destination (None: unknown)."""
        return None if self.source_end is None else max(0, self.source_end - self.copied)

    @property
    def lost_estimate(self) -> int | None:
        """The upper estimate: :attr:`lost` and what the source probably took since the leader's last
        look (the last measured rate times :attr:`unseen_s`, rounded); :attr:`lost` when the rate is
        unknown. None when :attr:`lost` is."""
        lost = self.lost
        if lost is None or not self.rate or self.unseen_s <= 0:
            return lost
        return lost + math.floor(self.rate * self.unseen_s + 0.5)


def unseen_s(seen_at: float | None, now: float) -> float:
    """Seconds from the leader's last look at the source (``seen_at``) to ``now``: 0 when it never
    looked, or when ``now`` is earlier (a clock behind the leader's)."""
    return 0.0 if seen_at is None else max(0.0, now - seen_at)


def rpo(
    last_ends: Mapping[str, int],
    copied: Mapping[str, int],
    last_copy_ms: Mapping[str, int] | None = None,
    rates: Mapping[str, float] | None = None,
    unseen: float = 0.0,
) -> list[PartitionRpo]:
    """Per partition (keys :func:`partition_key`), the RPO: the last-seen source log-end offsets
    against the source offsets whose copies reached the destination; with ``rates`` (records a second
    per partition, None: none known) and ``unseen`` (:func:`unseen_s`), its upper estimate too."""
    rows = []
    for key in sorted(set(last_ends) | set(copied)):
        topic, _, partition = key.rpartition("/")
        rows.append(
            PartitionRpo(
                topic,
                int(partition),
                last_ends.get(key),
                copied.get(key, 0),
                (last_copy_ms or {}).get(key),
                (rates or {}).get(key),
                unseen,
            )
        )
    return rows


@dataclass(frozen=True)
class RpoRange:
    """A route's RPO: between :attr:`lower` records and about :attr:`upper`."""

    lower: int  # records the leader saw at the source that never reached the destination
    upper: int  # lower + what the source probably took since the leader's last look
    unrated: int  # partitions seen at the source whose produce rate is unknown (counted at their lower bound)
    unseen_s: float

    @property
    def note(self) -> str | None:
        """Why the upper estimate may be short, for a person; None when nothing is missing."""
        if self.unrated:
            return (
                f"the produce rate at the source is unknown for {self.unrated} "
                f"partition{'s' if self.unrated != 1 else ''} (source ends kept by an older Ferry, or seen "
                "once): the estimate counts only the records seen there"
            )
        return None


def rpo_range(rows: list[PartitionRpo]) -> RpoRange:
    """The sums of :func:`rpo`'s rows (a partition never seen at the source counts 0 in both)."""
    seen = [r for r in rows if r.lost is not None]
    return RpoRange(
        lower=sum(r.lost or 0 for r in seen),
        upper=sum(r.lost_estimate or 0 for r in seen),
        unrated=sum(1 for r in seen if r.rate is None),
        unseen_s=max((r.unseen_s for r in rows), default=0.0),
    )


def quiet(ends_before: Mapping[str, int], ends_now: Mapping[str, int]) -> bool:
    """Whether no log-end offset moved between two reads (producers on the source stopped)."""
    return dict(ends_before) == dict(ends_now)


def behind(source_ends: Mapping[str, int], committed: Mapping[str, int]) -> dict[str, int]:
    """Per partition, the records the route still has to copy (only partitions that lag)."""
    out = {}
    for key, end in source_ends.items():
        lag = end - committed.get(key, 0)
        if lag > 0:
            out[key] = lag
    return out
