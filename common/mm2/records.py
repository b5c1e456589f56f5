"""MirrorMaker 2's records of progress, decoded, and where a route taking over its mirror starts.

Pure: bytes in, values out; no I/O, no clock. The formats (Kafka 3.x/4.x, ``connect-mirror``):

- Connect's offsets topic (``mm2-offsets.<source>.internal`` on the target in dedicated mode):
  key ``["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"t"}]``, value
  ``{"offset":N}``, N the source offset of the last record MirrorMaker 2 copied and flushed (it
  restarts at N + 1); a null value deletes the key.
- Offset syncs (``mm2-offset-syncs.<target>.internal``, on the source by default): key
  ``int16 length, topic, int32 partition``, value ``int64 upstream offset, int64 downstream offset``
  (the source record at ``upstream`` is the destination record at ``downstream``).
- Checkpoints (``<source>.checkpoints.internal`` on the target): key ``int16 length, group,
  int16 length, topic`` (the *destination* topic) ``, int32 partition``, value ``int16 version
  (0), int64 upstream, int64 downstream, int16 length, metadata``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

Decoded = TypeVar("Decoded")


class RecordError(ValueError):
    """A record that is not in MirrorMaker 2's format."""


@dataclass(frozen=True)
class SourceOffset:
    """A MirrorSourceConnector's offset: ``offset`` is the last record copied of ``topic``/``partition``."""

    connector: str
    cluster: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetSync:
    topic: str
    partition: int
    upstream: int
    downstream: int


@dataclass(frozen=True)
class Checkpoint:
    group: str
    topic: str  # on the destination
    partition: int
    upstream: int
    downstream: int


def _string(data: bytes, at: int) -> tuple[str, int]:
    if at + 2 > len(data):
        raise RecordError("truncated string length")
    (length,) = struct.unpack_from(">h", data, at)
    end = at + 2 + length
    if length < 0 or end > len(data):
        raise RecordError("truncated string")
    return data[at + 2 : end].decode("utf-8"), end


def _int(data: bytes, at: int, fmt: str) -> tuple[int, int]:
    size = struct.calcsize(fmt)
    if at + size > len(data):
        raise RecordError("truncated number")
    return struct.unpack_from(fmt, data, at)[0], at + size


def source_offset_key(key: bytes) -> SourceOffset | None:
    """A Connect offsets-topic key, or None when it is not a MirrorSourceConnector's (another connector's)."""
    try:
        connector, partition = json.loads(key)
        return SourceOffset(
            str(connector), str(partition["cluster"]), str(partition["topic"]), int(partition["partition"])
        )
    except (ValueError, TypeError, KeyError):
        return None


def source_offset_value(value: bytes | None) -> int | None:
    """The last copied source offset of a Connect offsets-topic value (None: deleted or not MirrorMaker 2's)."""
    if value is None:
        return None
    try:
        return int(json.loads(value)["offset"])
    except (ValueError, TypeError, KeyError):
        return None


def offset_sync(key: bytes, value: bytes) -> OffsetSync:
    topic, at = _string(key, 0)
    partition, _ = _int(key, at, ">i")
    upstream, at = _int(value, 0, ">q")
    downstream, _ = _int(value, at, ">q")
    return OffsetSync(topic, partition, upstream, downstream)


def checkpoint(key: bytes, value: bytes) -> Checkpoint:
    group, at = _string(key, 0)
    topic, at = _string(key, at)
    partition, _ = _int(key, at, ">i")
    _version, at = _int(value, 0, ">h")
    upstream, at = _int(value, at, ">q")
    downstream, _ = _int(value, at, ">q")
    return Checkpoint(group, topic, partition, upstream, downstream)


def decoded(
    found: Iterable[tuple[bytes | None, bytes | None]], decode: Callable[[bytes, bytes], Decoded]
) -> Iterator[Decoded]:
    """What ``decode`` (:func:`offset_sync`, :func:`checkpoint`) reads of a topic's records, in their
    order; tombstones and records not in its format are passed over."""
    for key, value in found:
        if key is None or value is None:
            continue
        try:
            yield decode(key, value)
        except RecordError:
            continue


def encode_offset_sync(sync: OffsetSync) -> tuple[bytes, bytes]:
    """The key and value MirrorMaker 2 writes for ``sync`` (for tests and tools)."""
    name = sync.topic.encode()
    return (
        struct.pack(">h", len(name)) + name + struct.pack(">i", sync.partition),
        struct.pack(">qq", sync.upstream, sync.downstream),
    )


def encode_checkpoint(point: Checkpoint) -> tuple[bytes, bytes]:
    """The key and value MirrorMaker 2 writes for ``point`` (for tests and tools)."""
    group, topic = point.group.encode(), point.topic.encode()
    return (
        struct.pack(">h", len(group))
        + group
        + struct.pack(">h", len(topic))
        + topic
        + struct.pack(">i", point.partition),
        struct.pack(">hqqh", 0, point.upstream, point.downstream, 0),
    )


@dataclass(frozen=True)
class TakeoverStart:
    """Where a partition taking over from MirrorMaker 2 starts, and how many records it copies again.

    ``start``: the source offset to consume from (None: MirrorMaker 2 left no record of this
    partition; the route's reset policy decides). ``recopied``: records MirrorMaker 2 already wrote
    to the destination at or after ``start`` (None: unknown, no offset sync to place them).
    ``basis``: ``offsets`` (Connect's offsets topic), ``offset-syncs``, or ``none``.
    """

    start: int | None
    recopied: int | None
    basis: str


def takeover_start(last_copied: int | None, sync: OffsetSync | None, destination_end: int) -> TakeoverStart:
    """The start of a partition MirrorMaker 2 mirrored.

    ``last_copied``: MirrorMaker 2's flushed offset (Connect's offsets topic); ``sync``: its
    latest offset sync for the partition; ``destination_end``: the destination partition's log-end
    offset now. The start is one past the last flushed record (never later, so nothing is lost),
    else one past the latest sync's upstream offset. The destination records from the sync's
    downstream offset on are the source records from its upstream offset on, in order, so MirrorMaker
    2 wrote ``destination_end - downstream`` records from ``upstream`` on; those at or after the start
    are copied again (exact while the source offsets have no gaps: no compaction, no transaction
    markers; with gaps the count is an upper bound).
    """
    if last_copied is not None:
        start, basis = last_copied + 1, "offsets"
    elif sync is not None:
        start, basis = sync.upstream + 1, "offset-syncs"
    else:
        return TakeoverStart(None, None, "none")
    if sync is None:
        return TakeoverStart(start, None, basis)
    written_from_sync = max(0, destination_end - sync.downstream)
    return TakeoverStart(start, max(0, written_from_sync - (start - sync.upstream)), basis)


def seeded_offset(point: Checkpoint | None, committed: int) -> int | None:
    """The destination offset MirrorMaker 2's checkpoint gives a group committed at ``committed`` on
    the source, or None. A checkpoint at or below the committed offset is a position the group
    had passed, so it skips nothing (exact when they are equal); a checkpoint above it is of a
    later position and says nothing of this one."""
    if point is None or point.upstream > committed:
        return None
    return point.downstream
