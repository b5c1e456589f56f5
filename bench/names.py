"""What ``ferry bench`` accepts by name: its systems and workload specs (pure and light: the CLI
checks its arguments before any heavy import)."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The default run, in order: the brokers' own limits, the native limit (the ceiling's loop in C),
# the ceiling, Ferry, MirrorMaker 2.
SYSTEMS = (
    "limit-produce",
    "limit-consume",
    "native",
    "ceiling",
    "ferry-1w",
    "ferry-2w",
    "mm2-t1",
    "mm2-tuned-t1",
)
# Also known: native-N and ceiling-N (N copy processes); stamped-copy[-N] and acked-copy[-N] (the
# ceiling's loop with the provenance header, and also a delivery report per record); ferry-Nw (N
# workers); mm2-tN, mm2-tuned-tN (tasks.max=N).
CEILING_VARIANTS = ("ceiling", "stamped-copy", "acked-copy")
SYSTEM_PATTERN = re.compile(
    rf"limit-produce|limit-consume|(native|{'|'.join(CEILING_VARIANTS)})(-[1-9]\d*)?|ferry-(eos-)?[1-9]\d*w"
    r"|mm2-(tuned-)?t[1-9]\d*"
)
ALSO_KNOWN = "native-N, ceiling-N, stamped-copy[-N], acked-copy[-N], ferry-Nw, ferry-eos-Nw, mm2-tN, mm2-tuned-tN"
KNOWN = f"{', '.join(SYSTEMS)}, {ALSO_KNOWN}"


# What ``--values`` may say (bench/workload.py makes them) and ``--compression`` (a route's
# compression: common/config/routes.py's Compression, which a unit test holds this to).
VALUE_KINDS = ("same", "random", "text")
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


def known_system(name: str) -> bool:
    return SYSTEM_PATTERN.fullmatch(name) is not None


@dataclass(frozen=True)
class WorkloadSpec:
    """One ``--workloads`` item as written: ``SIZE``, ``PARTITIONSxSIZE`` or ``PARTITIONSxSIZE:RECORDS``."""

    value_bytes: int
    partitions: int | None = None  # None: the bench's --partitions
    records: int | None = None  # None: the bench's --records


def parse_workloads(text: str) -> tuple[WorkloadSpec, ...]:
    """Parses ``--workloads``: comma-separated items, ``none`` for no workload (e.g. only ``--idle-partitions``).

    ``"100,1x1024,8x10240:200000"``: 100-byte values on ``--partitions`` partitions, ``--records``
    records; 1 KiB values on one partition; 200,000 records of 10 KiB on 8 partitions.
    """
    if text.strip().lower() == "none":
        return ()
    specs: list[WorkloadSpec] = []
    for item in (part.strip().lower() for part in text.split(",")):
        if not item:
            continue
        shape, _, count = item.partition(":")
        partitions_text, _, size_text = shape.rpartition("x")
        try:
            spec = WorkloadSpec(
                int(size_text), int(partitions_text) if partitions_text else None, int(count) if count else None
            )
        except ValueError:
            raise ValueError(
                f"{item!r} is not SIZE, PARTITIONSxSIZE or PARTITIONSxSIZE:RECORDS (e.g. 8x1024:1000000)"
            ) from None
        if (
            spec.value_bytes < 1
            or (spec.partitions is not None and spec.partitions < 1)
            or (spec.records is not None and spec.records < 1)
        ):
            raise ValueError(f"{item!r}: sizes, partitions and record counts must be positive")
        specs.append(spec)
    if not specs:
        raise ValueError("no workload given (use 'none' for none)")
    return tuple(specs)
