"""glibc's malloc, set for a process that runs a copy loop (a worker; the bench's ceiling and native limit).

librdkafka allocates each fetch response whole (Ferry's consumers fetch up to 4 MiB per partition) and a
copy of each record it produces (its value's size). glibc serves an allocation above its mmap threshold
(128 KiB at first, rising with what is freed) with a mapping of its own, unmapped again when it is freed,
and gives the top of its heap back to the OS as soon as 128 KiB of it (twice the threshold, later) is
free. A copy loop allocates and frees those buffers all the time, so the kernel mapped, zeroed page by
page and unmapped the same memory over and over: with both thresholds raised, a worker copying 8
partitions of 10 KiB records spent 17-25 % less CPU per record, about 80 MB more resident memory
(BENCHMARKS.md, "Freed memory kept for reuse").

``worker.keep_freed_memory`` (on by default) sets them in a worker; the bench's ceiling and native limit
get the same, so they stay the best bare loops rather than slower ones.
"""

from __future__ import annotations

import ctypes

# mallopt's parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
# Allocations up to this size come from the heap: a whole fetch response (fetch.max.bytes is 64 MiB).
MMAP_THRESHOLD_BYTES = 64 * 1024 * 1024
# Free memory at the top of the heap kept for reuse before glibc gives it back (measured: 128 MiB saved as
# much CPU as 512 MiB, 64 MiB less).
TRIM_THRESHOLD_BYTES = 128 * 1024 * 1024


def keep_freed_memory() -> bool:
    """Raises this process's thresholds; False where the C library has no ``mallopt`` that takes them (not
    glibc): nothing changed there."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )


def environment() -> dict[str, str]:
    """The same for a child process that is not Python: glibc reads these variables when it starts."""
    return {
        "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES),
        "MALLOC_TRIM_THRESHOLD_": str(TRIM_THRESHOLD_BYTES),
    }
