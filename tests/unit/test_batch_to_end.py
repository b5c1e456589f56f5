"""common/kafka/clients.batch_to_end: how many records a read to the end asks consume() for."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ferry.common.kafka.clients import batch_to_end


def test_a_read_asks_for_what_is_left_and_counts_an_unfetched_partition_from_its_start() -> None:
    assert batch_to_end({0: 10, 1: 5}, {0: 7}, 10_000) == 3 + 5
    assert batch_to_end({0: 10}, {0: -1001}, 10_000) == 10  # OFFSET_INVALID: nothing fetched yet
    assert batch_to_end({0: 50_000}, {}, 1000) == 1000


def test_a_read_at_its_end_still_asks_for_one() -> None:
    assert batch_to_end({0: 10}, {0: 10}, 1000) == 1
    assert batch_to_end({}, {}, 1000) == 1


@given(
    st.dictionaries(st.integers(0, 7), st.integers(0, 10**6)),
    st.dictionaries(st.integers(0, 7), st.integers(-1001, 10**6)),
    st.integers(1, 10_000),
)
def test_never_more_than_is_left_nor_than_most(ends: dict[int, int], positions: dict[int, int], most: int) -> None:
    asked = batch_to_end(ends, positions, most)
    left = sum(max(0, end - max(0, positions.get(p, 0))) for p, end in ends.items())
    assert 1 <= asked <= most and (asked <= left or asked == 1)
