"""glibc's malloc thresholds for a copying process (common.allocator)."""

from __future__ import annotations

import platform

from ferry.common import allocator


def test_a_copying_process_on_glibc_keeps_freed_memory_for_reuse() -> None:
    assert platform.libc_ver()[0] == "glibc"  # Ferry's supported platforms, and CI's
    assert allocator.keep_freed_memory() is True


def test_a_child_process_gets_the_thresholds_a_worker_sets() -> None:
    assert allocator.environment() == {
        "MALLOC_MMAP_THRESHOLD_": str(allocator.MMAP_THRESHOLD_BYTES),
        "MALLOC_TRIM_THRESHOLD_": str(allocator.TRIM_THRESHOLD_BYTES),
    }
    # A whole fetch response (fetch.max.bytes) comes from the heap.
    assert allocator.MMAP_THRESHOLD_BYTES >= 64 * 1024 * 1024
