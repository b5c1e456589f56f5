"""ferry.controller.lead.store.chunks: transactions bounded in ops and in bytes, in order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.controller.errors import ControllerError
from ferry.controller.lead.store import Op, chunks, op_size

pytestmark = pytest.mark.unit


def op(path: str, size: int) -> Op:
    return Op("set", path, b"x" * size)


def test_a_large_batch_is_cut_by_bytes_not_only_by_count() -> None:
    ops = [op(f"/ferry/assignments/w{i}", 100_000) for i in range(16)]
    result = chunks(ops, max_bytes=512 * 1024, max_ops=200)
    assert [len(c) for c in result] == [5, 5, 5, 1]
    assert all(sum(op_size(o) for o in c) <= 512 * 1024 for c in result)


def test_a_single_op_over_the_bound_is_refused_before_anything_is_written() -> None:
    with pytest.raises(ControllerError, match="/big"):
        chunks([op("/small", 10), op("/big", 600_000)], max_bytes=512 * 1024)


@given(st.lists(st.integers(0, 3000), max_size=300), st.integers(4000, 20_000), st.integers(1, 50))
def test_chunks_keep_order_and_respect_both_bounds(sizes: list[int], max_bytes: int, max_ops: int) -> None:
    ops = [op(f"/n{i}", size) for i, size in enumerate(sizes)]
    result = chunks(ops, max_bytes=max_bytes, max_ops=max_ops)
    assert [o for c in result for o in c] == ops
    assert all(0 < len(c) <= max_ops and sum(op_size(o) for o in c) <= max_bytes for c in result)
