"""``ferry bench --header-cost``: what the provenance header costs per record, CPU and bytes.

No cluster, no replicator: the copier's per-record header work is run in a loop on this process
(CPU time, ``time.process_time``), header on and off, for the cases the copier meets:

* ``off``: the record's headers handed on as they are (what a copy without Ferry's header does);
* ``local``: a record without the header gets one (version 2, ``2|<source>|0|<tag>|<offset>``);
* ``hop``: a copy's header is read, checked by loop prevention and replaced (path one longer);
* ``tree``: the same with a distributor's copy-flags decision;
* ``local-3``, ``hop-3``: ``local`` and ``hop`` in version 3 (an exactly-once route's header: no source
  offset); ``bare-3``: a record with no headers at all in version 3 (its copies share one list).

Each case runs the copier's own code for it, :class:`common.core.provenance.Stamper` (the header's
prefix is built once per route and per previous header; only the source offset is formatted per
record).

The cases run interleaved, in rounds (each round times every case on an equal share of the
records), and each case's figure is its median round: on a shared, loaded machine a burst of
load then hits every case alike instead of one case's whole run. The load average before and
after and the CPU count are printed with the figures, so a reader can judge them.

Bytes per record are exact: what the header adds to a record in Kafka's record format v2
(a varint header count is there anyway; each header adds varint key length, key, varint value
length, value), for source offsets of the given size. Figures go to stdout (and JSON with
``--json``), never into an assert.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from ferry.common.core.provenance import HEADER, Stamper, TopicStamper, encode
from ferry.common.core.topology import copy_flags

_APP_HEADERS: list[tuple[str, bytes | None]] = [("trace-id", b"0af7651916cd43dd8448eb211c80319c"), ("type", b"order")]


def _varint_size(value: int) -> int:
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def header_bytes(value: bytes) -> int:
    """Bytes one header with this value adds to a record (format v2)."""
    key = HEADER.encode()
    return _varint_size(len(key)) + len(key) + _varint_size(len(value)) + len(value)


def _stamper(origins: frozenset[str] | None, level: int | None) -> TopicStamper:
    """The copier's stamper for topic t of a route src -> dst (worker/copier.py builds it the same way)."""
    if origins is None and level is None:
        return Stamper("src").for_topic("t", "t")
    return Stamper("src", lambda previous: copy_flags(previous, "dst", origins, level)).for_topic("t", "t")


def _time(records: int, work: Callable[[int], Any]) -> float:
    started = time.process_time()
    for offset in range(records):
        work(offset)
    return (time.process_time() - started) / records * 1e9


def _load() -> list[float]:
    """The 1, 5 and 15-minute load averages (empty where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def measure(records: int, rounds: int = 5) -> dict[str, Any]:
    """ns of CPU per record for each case (median and fastest of ``rounds`` interleaved rounds), and bytes per
    record."""
    local = list(_APP_HEADERS)
    hop = [*_APP_HEADERS, (HEADER, encode(("a",), 0, 123456789, "t"))]
    tree_copy = [*_APP_HEADERS, (HEADER, encode(("c1",), 4, 123456789, "t"))]
    plain, looping, tree = _stamper(None, None), _stamper(frozenset({"a", "src"}), None), _stamper(None, 1)
    cases = {
        "off": lambda offset: list(local),
        "local": lambda offset: plain.stamp(local, offset),
        "hop": lambda offset: looping.stamp(hop, offset),
        "tree": lambda offset: tree.stamp(tree_copy, offset),
        # Version 3, an exactly-once route's: no source offset.
        "local-3": lambda offset: plain.stamp_transactional(local, offset),
        "bare-3": lambda offset: plain.stamp_transactional(None, offset),
        "hop-3": lambda offset: looping.stamp_transactional(hop, offset),
    }
    rounds = max(1, min(rounds, records))
    samples: dict[str, list[float]] = {name: [] for name in cases}
    load_before = _load()
    for _ in range(rounds):
        for name, work in cases.items():
            samples[name].append(_time(records // rounds, work))
    cpu = {name: statistics.median(times) for name, times in samples.items()}
    off = cpu["off"]
    return {
        "records": records,
        "rounds": rounds,
        "cpus": os.cpu_count(),
        "loadAverage": {"before": load_before, "after": _load()},
        "cpuNsPerRecord": {name: round(ns) for name, ns in cpu.items()},
        "cpuNsPerRecordFastestRound": {name: round(min(times)) for name, times in samples.items()},
        "cpuNsAddedPerRecord": {name: round(ns - off) for name, ns in cpu.items() if name != "off"},
        "bytesPerRecord": {
            "one hop, offset 41": header_bytes(encode(("src",), 0, 41, "t")),
            "one hop, offset 123456789": header_bytes(encode(("src",), 0, 123456789, "t")),
            "two hops, flags 5, offset 123456789": header_bytes(encode(("c1", "c3"), 5, 123456789, "t")),
            "version 3, one hop": header_bytes(encode(("src",), 0, None, "t")),
            "version 3, two hops, flags 5": header_bytes(encode(("c1", "c3"), 5, None, "t")),
        },
    }


def run(records: int, json_file: str | None) -> int:
    result = measure(records)
    load = result["loadAverage"]
    print(
        f"provenance header cost, {records:,} records per case in {result['rounds']} interleaved rounds "
        f"(CPU time of this process; median round, fastest round)"
    )
    print(f"machine: {result['cpus']} CPUs, load average (1/5/15 min) {load['before']} before, {load['after']} after")
    print(f"{'case':<8} {'header':<7} {'ns/record':>10} {'fastest':>8} {'added':>8}")
    for name, ns in result["cpuNsPerRecord"].items():
        added = result["cpuNsAddedPerRecord"].get(name)
        fastest = result["cpuNsPerRecordFastestRound"][name]
        print(
            f"{name:<8} {'off' if name == 'off' else 'on':<7} {ns:>10} {fastest:>8} {'' if added is None else added:>8}"
        )
    print("bytes added per record:")
    for name, size in result["bytesPerRecord"].items():
        print(f"  {name}: {size}")
    if json_file:
        with open(json_file, "w") as handle:
            json.dump(result, handle, indent=2)
    return 0
