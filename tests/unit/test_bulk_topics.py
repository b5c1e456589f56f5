"""controller.lead.bulk_topics: what bulk whitelisting writes is pending, visible to readers, then taken once."""

from __future__ import annotations

import pytest

from ferry.common.model import IdealState, TopicKey
from ferry.controller.errors import Unavailable
from ferry.controller.lead.bulk_topics import BulkTopics

ROUTE = "src.dst"


def test_pending_topics_are_published_at_once_and_taken_by_the_next_holder_of_the_reconcilers_lock() -> None:
    topics = BulkTopics()
    old = IdealState(ROUTE, "old", 2, {0: "w1", 1: "w1"})
    topics.publish({TopicKey(ROUTE, "old"): old})
    new = IdealState(ROUTE, "new", 4)
    with topics.holding():
        assert topics.known(TopicKey(ROUTE, "new")) is None
        topics.add_pending([new])
        assert topics.known(TopicKey(ROUTE, "new")) == new
    published = topics.published()
    assert published == {TopicKey(ROUTE, "old"): old, TopicKey(ROUTE, "new"): new}

    topics.publish({TopicKey(ROUTE, "old"): old})  # a change of the leader state before it took them
    assert topics.published() == published  # still shown: they are pending
    assert published is not topics.published()  # a fresh copy: a reader's is never changed under it

    assert topics.take_pending() == {TopicKey(ROUTE, "new"): new}
    assert topics.take_pending() == {}


def test_without_a_published_leader_state_a_bulk_request_is_told_to_try_again() -> None:
    topics = BulkTopics()
    with pytest.raises(Unavailable, match="try again"):
        topics.known(TopicKey(ROUTE, "orders"))
    topics.publish({})
    topics.publish(None)  # the leader state was dropped
    assert topics.published() is None
    with pytest.raises(Unavailable):
        topics.known(TopicKey(ROUTE, "orders"))
