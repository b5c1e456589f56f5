"""What a worker does when a partition's position leaves the source log (pure decisions)."""

from hypothesis import given
from hypothesis import strategies as st

from ferry.worker.position.data_loss import LOSS_HISTORY, Losses, out_of_range


@given(st.integers(0, 10**12), st.integers(0, 10**6), st.integers(0, 10**6))
def test_the_lost_range_is_exactly_what_the_log_start_passed(position, deleted, kept):
    log_start = position + deleted
    decision = out_of_range(position, log_start, log_start + kept)
    if deleted:
        assert decision.lost == (position, log_start)
        assert decision.resume_at == log_start  # copying goes on from the log start
    else:
        assert decision.lost is None and decision.resume_at == position
    assert decision.stop_reason is None


@given(st.integers(0, 10**12), st.integers(1, 10**6))
def test_a_log_shorter_than_the_position_stops_and_loses_nothing_silently(log_end, ahead):
    decision = out_of_range(log_end + ahead, 0, log_end)
    assert decision.resume_at is None and decision.lost is None
    assert decision.stop_reason and f"ends at offset {log_end}" in decision.stop_reason


def test_a_partitions_reason_names_its_latest_ranges_and_is_forgotten_at_release():
    losses = Losses()
    key = ("orders", 0)
    assert losses.reason(key) is None
    for start in range(0, 10 * (LOSS_HISTORY + 1), 10):
        losses.add(key, (start, start + 5))
    reason = losses.reason(key) or ""
    assert "[0, 5)" not in reason and f"[{10 * LOSS_HISTORY}, {10 * LOSS_HISTORY + 5}) (5 records)" in reason
    assert reason.count("lost source records") == LOSS_HISTORY
    losses.forget(key)
    assert losses.reason(key) is None


def test_a_different_record_at_the_newest_copys_offset_means_a_re_created_topic():
    from ferry.worker.position.data_loss import recreated_reason

    assert recreated_reason(4, (1000, b"k"), (1000, b"k")) is None  # the same record: the same topic
    assert recreated_reason(4, (1000, b"k"), None) is None  # gone at the source: nothing to compare
    reason = recreated_reason(4, (1000, b"k"), (2000, b"k")) or ""
    assert "re-created" in reason and "offset 4" in reason


def test_a_destination_stamping_its_own_time_compares_keys_only():
    from ferry.worker.position.data_loss import recreated_reason

    assert recreated_reason(4, (None, b"k"), (1234, b"k")) is None
    assert recreated_reason(4, (None, b"k"), (1234, b"other")) is not None
