"""The provenance header: where a copied record came from, written by Ferry on every copy.

Pure: bytes in, bytes out; no I/O, no clock.

One Kafka record header, key :data:`HEADER`, value ASCII text in ``|``-separated fields::

    2|<path>|<copy flags>|<topic tag>|<source offset>
    e.g.  2|a|0|e52ffdee|41     a record produced on cluster a, copied once, to topic "orders"
                                (tag e52ffdee), from offset 41 of a's partition
          2|a,b|5|e52ffdee|7    produced on a, copied to b, then from offset 7 of b's partition to
                                "orders" here

- ``2``: the format's version. A reader refuses versions it does not know (:class:`ProvenanceError`).
- ``path``: the clusters the record was written to before the one it is on, comma-separated, in
  order: the first is the cluster the record first entered (its *origin*), the last is the source
  of the route that wrote this copy. Cluster names (``[A-Za-z0-9_-]``) never hold ``,`` or ``|``.
- ``copy flags``: Axual's distribution-tree bitmask, as a decimal integer; 0 outside a tree.
- ``topic tag``: the topic the copy was written to, as :func:`topic_tag` (CRC-32 of the name, 8
  lowercase hex digits). It binds the header to the copy it describes: stream processors forward a
  record's headers to the records they derive from it, so a header can be found on a record of
  another topic that Ferry never wrote. Such a header is *foreign*: the record is read as local
  (below), and its copy is stamped afresh.
- ``source offset``: the record's offset in the source partition of the route that wrote this copy
  (the same partition number: Ferry copies partition to partition). It lets a worker resume from
  the destination and build the exact offset map: a route's source offsets are committed at the
  source after its copies reached the destination (after the transaction that made them visible, on
  an exactly-once route), so after a crash between the two, the copies past the committed offset
  say themselves which source records the destination holds.

Version ``3`` (``3|<path>|<copy flags>|<topic tag>``, no source offset) is defined and read, and
:meth:`TopicStamper.stamp_transactional` writes it, but no route writes it yet: an exactly-once
route's copies past its committed offset would then be known only from the offset map committed
with them, which the resume does not read (docs/design.md, "The provenance header").

Version ``1`` (``1|<path>|<copy flags>|<source offset>``), written by Ferry before the topic tag,
is still read: it carries no tag, so it counts as bound to whatever topic it is on.

A record without the header, or with a foreign one, is *local*: its origin is the cluster it is
on, and its flags are 0. Ferry keeps every other header of a record untouched and in order; its
own header is replaced on each copy (never stacked), and always put last.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from ferry.common.errors import FerryError

HEADER = "ferry.provenance"
VERSION = b"2"  # with the copy's source offset: at-least-once routes
TRANSACTIONAL_VERSION = b"3"  # without: defined and read, written by no route yet
UNBOUND_VERSION = b"1"  # the format before the topic tag: read, no longer written

Headers = list[tuple[str, bytes | None]]
T = TypeVar("T")


class ProvenanceError(FerryError):
    """A provenance header that this version of Ferry cannot read."""


def topic_tag(topic: str) -> bytes:
    """The header's tag of ``topic``: its name's CRC-32, 8 lowercase hex digits (fixed size)."""
    return b"%08x" % zlib.crc32(topic.encode())


@dataclass(frozen=True)
class Provenance:
    """What a copy's header says (see the module docstring)."""

    path: tuple[str, ...]
    flags: int
    source_offset: int | None  # None: a version 3 header
    topic_tag: bytes | None = None  # None: a version 1 header, bound to any topic

    @property
    def origin(self) -> str:
        return self.path[0]

    @property
    def source(self) -> str:
        """The source cluster of the route that wrote this copy."""
        return self.path[-1]

    def passed_through(self, cluster: str) -> bool:
        return cluster in self.path

    def bound_to(self, topic: str) -> bool:
        """Whether this header describes a copy written to ``topic`` (else it was forwarded there: foreign)."""
        return self.topic_tag is None or self.topic_tag == topic_tag(topic)


def encode(path: Sequence[str], flags: int, source_offset: int | None, topic: str | None = None) -> bytes:
    """The header of a copy written to ``topic``: version 2, or version 3 without ``source_offset``;
    without ``topic``, version 1 (what older Ferry wrote)."""
    if topic is None:
        if source_offset is None:
            raise ValueError("a version 1 header carries a source offset")
        return b"1|%s|%d|%d" % (",".join(path).encode(), flags, source_offset)
    if source_offset is None:
        return _transactional(path, flags, topic_tag(topic))
    return _prefix(path, flags, topic_tag(topic)) + b"%d" % source_offset


def decode(value: bytes | None) -> Provenance:
    """Reads a header value; anything malformed raises :class:`ProvenanceError`."""
    if not value:
        raise ProvenanceError(f"empty {HEADER} header")
    fields = value.split(b"|")
    if fields[0] == VERSION:
        if len(fields) != 5 or not _is_tag(fields[3]):
            raise ProvenanceError(f"malformed {HEADER} header {value[:100]!r}")
        tag: bytes | None = fields[3]
    elif fields[0] == TRANSACTIONAL_VERSION:
        if len(fields) != 4 or not _is_tag(fields[3]):
            raise ProvenanceError(f"malformed {HEADER} header {value[:100]!r}")
        return _transactional_provenance(value, fields)
    elif fields[0] == UNBOUND_VERSION:
        if len(fields) != 4:
            raise ProvenanceError(f"malformed {HEADER} header {value[:100]!r}")
        tag = None
    else:
        raise ProvenanceError(f"{HEADER} header of unknown version {fields[0][:10]!r}")
    if not fields[1]:
        raise ProvenanceError(f"malformed {HEADER} header {value[:100]!r}")
    try:
        path = tuple(fields[1].decode("ascii").split(","))
        flags, offset = int(fields[2]), int(fields[-1])
    except ValueError:
        raise ProvenanceError(f"malformed {HEADER} header {value[:100]!r}") from None
    if not all(path) or flags < 0 or offset < 0:
        raise ProvenanceError(f"malformed {HEADER} header {value[:100]!r}")
    return Provenance(path, flags, offset, tag)


def _transactional_provenance(value: bytes, fields: list[bytes]) -> Provenance:
    """A version 3 header's fields (four, the tag checked) read."""
    try:
        path = tuple(fields[1].decode("ascii").split(","))
        flags = int(fields[2])
    except ValueError:
        raise ProvenanceError(f"malformed {HEADER} header {value[:100]!r}") from None
    if not fields[1] or not all(path) or flags < 0:
        raise ProvenanceError(f"malformed {HEADER} header {value[:100]!r}")
    return Provenance(path, flags, None, fields[3])


def _is_tag(field: bytes) -> bool:
    return len(field) == 8 and all(c in b"0123456789abcdef" for c in field)


def split(headers: Sequence[tuple[str, bytes | None]] | None) -> tuple[Headers, bytes | None]:
    """A record's headers without Ferry's own, and the value of Ferry's own (None when absent)."""
    if not headers:
        return [], None
    own: bytes | None = None
    others: Headers = []
    for key, value in headers:
        if key == HEADER:
            own = value if value is not None else b""  # present but empty: malformed, not absent
        else:
            others.append((key, value))
    return others, own


def read(headers: Sequence[tuple[str, bytes | None]] | None, topic: str | None = None) -> Provenance | None:
    """The provenance of a record of ``topic``, or None for a local record (no header, or a foreign one).

    Without ``topic`` the header is read whatever topic it is bound to (tools, tests)."""
    _, own = split(headers)
    if own is None:
        return None
    provenance = decode(own)
    return provenance if topic is None or provenance.bound_to(topic) else None


def stamp(
    headers: Sequence[tuple[str, bytes | None]] | None,
    source_cluster: str,
    source_offset: int | None,
    flags: int | None = None,
    *,
    source_topic: str,
    destination_topic: str,
) -> Headers:
    """The headers of the copy to ``destination_topic`` of a record read at ``source_offset`` of
    ``source_topic`` on ``source_cluster`` (None: a version 3 header, which carries no offset).

    The application's headers stay as they are; Ferry's own is replaced, its path extended by
    ``source_cluster`` and its flags kept (or set to ``flags`` when given). A foreign header (bound
    to another topic than ``source_topic``) is replaced as if the record were local.
    """
    others, own = split(headers)
    previous = None if own is None else decode(own)
    if previous is None or not previous.bound_to(source_topic):
        path: tuple[str, ...] = (source_cluster,)
        kept_flags = 0
    else:
        path = (*previous.path, source_cluster)
        kept_flags = previous.flags
    others.append((HEADER, encode(path, kept_flags if flags is None else flags, source_offset, destination_topic)))
    return others


class Stamper:
    """Stamps the copies of one route's records: :func:`stamp` (and a route's copy decision), per record cheaply.

    Built once per route; :meth:`for_topic` gives the stamper of one source topic (and its
    destination topic), kept while the route runs, which the copy loop takes once per run of a
    partition's records. See :class:`TopicStamper`.

    ``decide``: the route's copy decision for a record's provenance (None for a local record, or
    one whose header is foreign): the copy's flags, or None to skip the record
    (:func:`common.core.topology.copy_flags`); without it every record is copied and keeps its flags.
    """

    MAX_TOPICS = 4096  # topic stampers kept; all are dropped beyond (each is rebuilt on its next run)

    def __init__(self, source_cluster: str, decide: Callable[[Provenance | None], int | None] | None = None) -> None:
        self._source = source_cluster
        self._decide = decide
        self._topics: dict[tuple[str, str], TopicStamper] = {}

    def for_topic(self, source_topic: str, destination_topic: str) -> TopicStamper:
        try:
            return self._topics[source_topic, destination_topic]
        except KeyError:
            pass
        if len(self._topics) >= self.MAX_TOPICS:
            self._topics.clear()
        stamper = self._topics[source_topic, destination_topic] = TopicStamper(
            source_cluster=self._source,
            decide=self._decide,
            source_topic=source_topic,
            destination_topic=destination_topic,
        )
        return stamper


class TopicStamper:
    """Stamps the copies of one source topic's records to one destination topic: :func:`stamp` per record cheaply.

    Stateless to its callers; it only caches. Two forms, of the same signature, so that the copy loop
    takes either per partition: :meth:`stamp` writes version 2 (the copy's source offset last),
    :meth:`stamp_transactional` version 3 (no offset: see the module docstring).

    A version 2 value is ``<prefix><source offset>``, and the prefix depends only on the previous
    header's path, flags and topic tag, never on the offset. A version 3 value is the whole header
    without an offset. So the prefix (or value) of a local record's copy is built once, and each previous
    header (its value up to its last ``|``, or all of a version 3 value) maps to its copy's prefix (or
    value, or "skip") in a bounded cache; a foreign header's (one whose tag is not the source topic's)
    maps to the local record's. A record costs one scan of its headers, for version 2 a concatenation,
    and for a further hop one dictionary look-up and the check of the previous source offset. A record
    with no headers at all costs nothing in version 3: its copy's headers are one list, shared by every
    such copy (never changed: the producer only reads it). The result is equal to :func:`stamp` with
    the flags ``decide`` chose (property-tested); malformed headers raise :class:`ProvenanceError`
    exactly where :func:`decode` does.
    """

    MAX_CACHED = 1024  # distinct previous headers remembered (paths x flags x tags); the cache is emptied beyond

    def __init__(
        self,
        *,
        source_cluster: str,
        decide: Callable[[Provenance | None], int | None] | None,
        source_topic: str,
        destination_topic: str,
    ) -> None:
        self._source = source_cluster
        self._decide = decide
        self._source_topic = source_topic
        self._tag = topic_tag(destination_topic)
        local_flags = 0 if decide is None else decide(None)
        self._local_prefix = None if local_flags is None else _prefix((source_cluster,), local_flags, self._tag)
        # Version 3: the header itself (name and value), shared by the copies that carry it.
        self._local_header = (
            None if local_flags is None else (HEADER, _transactional((source_cluster,), local_flags, self._tag))
        )
        self._local_only: Headers | None = None if self._local_header is None else [self._local_header]
        self._hop_prefixes: dict[bytes, bytes | None] = {}
        self._hop_headers: dict[bytes, tuple[str, bytes] | None] = {}

    def stamp(self, headers: list[tuple[str, bytes | None]] | None, source_offset: int) -> Headers | None:
        """The copy's headers, version 2, for a record read at ``source_offset`` (a new list), or None: skip it."""
        own: bytes | None = None
        if headers:
            for name, value in headers:
                if name == HEADER:
                    own = value if value is not None else b""  # the last one counts, as in split()
            if own is None:
                prefix = self._local_prefix
                return None if prefix is None else [*headers, (HEADER, prefix + str(source_offset).encode())]
            headers = [header for header in headers if header[0] != HEADER]
            hop_prefix = self._hop(own, self._hop_prefixes, self._local_prefix, _prefix)
            return None if hop_prefix is None else [*headers, (HEADER, hop_prefix + str(source_offset).encode())]
        prefix = self._local_prefix
        return None if prefix is None else [(HEADER, prefix + str(source_offset).encode())]

    def stamp_transactional(self, headers: list[tuple[str, bytes | None]] | None, source_offset: int) -> Headers | None:
        """The copy's headers, version 3, or None: skip it. ``source_offset`` is not written (the signature is
        :meth:`stamp`'s). A record without headers gets the list shared by all such copies; others a new list."""
        if not headers:
            return self._local_only
        own: bytes | None = None
        for name, value in headers:
            if name == HEADER:
                own = value if value is not None else b""  # the last one counts, as in split()
        if own is None:
            header = self._local_header
            return None if header is None else [*headers, header]
        headers = [header for header in headers if header[0] != HEADER]
        hop_header = self._hop(own, self._hop_headers, self._local_header, _transactional_header)
        return None if hop_header is None else [*headers, hop_header]

    def _hop(
        self, own: bytes, cache: dict[bytes, T | None], local: T | None, build: Callable[[Sequence[str], int, bytes], T]
    ) -> T | None:
        """What the copy of a record whose header is ``own`` carries (``build``'s version 2 prefix or version 3
        header; ``local`` for a foreign header), or None: skip it; ``cache`` remembers it per previous header."""
        if own[:2] == b"3|":  # no offset: the whole value is the key
            head, tail = own, None
        else:
            head, _, tail = own.rpartition(b"|")
        try:
            stamped = cache[head]
        except KeyError:
            previous = decode(own)  # raises for anything malformed, the offset included
            if not previous.bound_to(self._source_topic):
                stamped = local  # forwarded by an application: the record is local here
            else:
                flags = previous.flags if self._decide is None else self._decide(previous)
                stamped = None if flags is None else build((*previous.path, self._source), flags, self._tag)
            if len(cache) >= self.MAX_CACHED:
                cache.clear()
            cache[head] = stamped
            return stamped
        if tail is not None:
            # The head was valid when cached; decode() would still refuse a bad offset after it.
            try:
                offset = int(tail)
            except ValueError:
                offset = -1
            if offset < 0:
                raise ProvenanceError(f"malformed {HEADER} header {own[:100]!r}")
        return stamped


def _prefix(path: Sequence[str], flags: int, tag: bytes) -> bytes:
    """:func:`encode`'s value without the source offset."""
    return b"2|%s|%d|%s|" % (",".join(path).encode(), flags, tag)


def _transactional(path: Sequence[str], flags: int, tag: bytes) -> bytes:
    """A version 3 header's value."""
    return b"3|%s|%d|%s" % (",".join(path).encode(), flags, tag)


def _transactional_header(path: Sequence[str], flags: int, tag: bytes) -> tuple[str, bytes]:
    """A version 3 header, name and value."""
    return HEADER, _transactional(path, flags, tag)
