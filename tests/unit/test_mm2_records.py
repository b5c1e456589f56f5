"""MirrorMaker 2's records of progress decoded, and where a takeover starts and what it copies again."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.mm2.records import (
    Checkpoint,
    OffsetSync,
    RecordError,
    checkpoint,
    decoded,
    encode_checkpoint,
    encode_offset_sync,
    offset_sync,
    seeded_offset,
    source_offset_key,
    source_offset_value,
    takeover_start,
)

# As MirrorMaker 2 (Kafka 4.1) wrote them on the local stack.
SYNC_KEY, SYNC_VALUE = (
    b"\x00\nmmx-61757e\x00\x00\x00\x01",
    b"\x00\x00\x00\x00\x00\x00\x001\x00\x00\x00\x00\x00\x00\x001",
)
CHECKPOINT_KEY = b"\x00\x07g61757e\x00\x12a61757e.mmx-61757e\x00\x00\x00\x01"
CHECKPOINT_VALUE = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\n\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00"

_NAMES = st.text(st.characters(min_codepoint=33, max_codepoint=0x7E), min_size=1, max_size=40)
_OFFSETS = st.integers(0, 2**62)


def test_connects_offsets_topic_records() -> None:
    key = source_offset_key(b'["MirrorSourceConnector",{"cluster":"A","partition":1,"topic":"orders"}]')
    assert key is not None and (key.connector, key.cluster, key.topic, key.partition) == (
        "MirrorSourceConnector",
        "A",
        "orders",
        1,
    )
    assert source_offset_value(b'{"offset":49}') == 49
    assert source_offset_value(None) is None  # a tombstone
    assert source_offset_key(b'["MirrorCheckpointConnector",{"partition":1,"topic":"A.t","group":"g"}]') is None
    assert source_offset_key(b"not json") is None


def test_offset_syncs_and_checkpoints_as_mirrormaker2_writes_them() -> None:
    assert offset_sync(SYNC_KEY, SYNC_VALUE) == OffsetSync("mmx-61757e", 1, 49, 49)
    assert checkpoint(CHECKPOINT_KEY, CHECKPOINT_VALUE) == Checkpoint("g61757e", "a61757e.mmx-61757e", 1, 10, 1)
    with pytest.raises(RecordError):
        offset_sync(b"\x00\x10short", SYNC_VALUE)


@given(_NAMES, st.integers(0, 2**31 - 1), _OFFSETS, _OFFSETS)
def test_offset_syncs_round_trip(topic: str, partition: int, upstream: int, downstream: int) -> None:
    sync = OffsetSync(topic, partition, upstream, downstream)
    assert offset_sync(*encode_offset_sync(sync)) == sync


@given(_NAMES, _NAMES, st.integers(0, 2**31 - 1), _OFFSETS, _OFFSETS)
def test_checkpoints_round_trip(group: str, topic: str, partition: int, upstream: int, downstream: int) -> None:
    point = Checkpoint(group, topic, partition, upstream, downstream)
    assert checkpoint(*encode_checkpoint(point)) == point


def test_a_topic_decodes_to_its_records_in_order_past_tombstones_and_foreign_records() -> None:
    later = encode_offset_sync(OffsetSync("mmx-61757e", 1, 60, 60))
    found = [(SYNC_KEY, SYNC_VALUE), (SYNC_KEY, None), (None, SYNC_VALUE), (b"\x00", b"?"), later]
    assert list(decoded(found, offset_sync)) == [
        OffsetSync("mmx-61757e", 1, 49, 49),
        OffsetSync("mmx-61757e", 1, 60, 60),
    ]
    assert list(decoded([(CHECKPOINT_KEY, CHECKPOINT_VALUE), (SYNC_KEY, SYNC_VALUE)], checkpoint)) == [
        checkpoint(CHECKPOINT_KEY, CHECKPOINT_VALUE)
    ]


def test_a_takeover_starts_after_the_last_flushed_record_and_counts_what_mirrormaker2_copied_since() -> None:
    # MirrorMaker 2 flushed 99, its sync says source 49 is destination 49, and it wrote 125 records.
    plan = takeover_start(99, OffsetSync("t", 0, 49, 49), 125)
    assert (plan.start, plan.recopied, plan.basis) == (100, 25, "offsets")
    assert takeover_start(124, OffsetSync("t", 0, 124, 124), 125).recopied == 0
    # A sync newer than the flush.
    assert takeover_start(99, OffsetSync("t", 0, 120, 120), 125).recopied == 25


def test_without_flushed_offsets_the_latest_sync_decides() -> None:
    plan = takeover_start(None, OffsetSync("t", 0, 49, 1049), 1125)
    assert (plan.start, plan.recopied, plan.basis) == (50, 75, "offset-syncs")


def test_without_any_record_of_mirrormaker2_the_partition_starts_as_a_new_one() -> None:
    assert takeover_start(None, None, 10).start is None
    plan = takeover_start(9, None, 10)
    assert (plan.start, plan.recopied) == (10, None)  # no sync: where its copies are is unknown


@given(st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 10_000), st.integers(0, 10_000))
def test_the_recopied_count_is_what_lies_between_the_start_and_mirrormaker2s_last_copy(
    sync_at: int, offset_shift: int, flushed_behind: int, written_after_sync: int
) -> None:
    # Contiguous source offsets: destination d holds source d - offset_shift.
    last_written = sync_at + written_after_sync  # the source offset of MirrorMaker 2's last copy
    flushed = max(0, last_written - flushed_behind)
    plan = takeover_start(flushed, OffsetSync("t", 0, sync_at, sync_at + offset_shift), last_written + offset_shift + 1)
    assert plan.start == flushed + 1
    assert plan.recopied == last_written - flushed


def test_a_checkpoint_seeds_a_translation_only_at_or_below_the_groups_offset() -> None:
    point = Checkpoint("g", "A.t", 0, 40, 7)
    assert seeded_offset(point, 40) == 7
    assert seeded_offset(point, 55) == 7  # an older position of the group: re-reads, never skips
    assert seeded_offset(point, 39) is None
    assert seeded_offset(None, 40) is None
