"""CPU cost of the offset tracker's hot path: 1M ``sent`` + ``acked_oldest`` on one partition.

Run: ``.venv/bin/python scripts/bench_watermark.py``. Prints figures; asserts nothing.
"""

from __future__ import annotations

import time

from ferry.common.core.watermark import OffsetWatermarks


def main() -> None:
    tracker: OffsetWatermarks[tuple[str, int]] = OffsetWatermarks()
    key = ("orders", 0)
    started = time.process_time()
    for base in range(0, 1_000_000, 1000):
        for offset in range(base, base + 1000):
            tracker.sent(key, offset)
        for _ in range(1000):
            tracker.acked_oldest(key)
    print(
        f"{time.process_time() - started:.2f} CPU s for 1M sent + acked_oldest; "
        f"committable {tracker.committables()[key]}"
    )


if __name__ == "__main__":
    main()
