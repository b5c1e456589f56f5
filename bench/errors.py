"""The benchmark's own error."""

from __future__ import annotations

from ferry.common.errors import FerryError


class BenchError(FerryError):
    """The benchmark could not set up, run or clean up a system (not: a system was slow or lossy)."""
