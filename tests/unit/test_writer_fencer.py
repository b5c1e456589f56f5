"""controller.lead.fencing.WriterFencer: which writers the leader fences before it moves partitions."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from ferry.common.config import parse_config
from ferry.controller.errors import ControllerError
from ferry.controller.lead.fencing import WriterFencer

pytestmark = pytest.mark.unit


def _config() -> Any:
    return parse_config(
        {
            "zookeeper": {"connect": "unused"},
            "clusters": {name: {"bootstrap.servers": f"{name}:9092"} for name in ("a", "b", "c")},
            "routes": [
                {"source": "a", "destination": "b", "delivery_guarantee": "exactly_once"},
                {"source": "a", "destination": "c", "delivery_guarantee": "at_least_once"},
            ],
        }
    )


class Fences:
    def __init__(self, refuse: bool = False) -> None:
        self.fenced: list[tuple[str, str]] = []
        self.refuse = refuse

    def __call__(self, cluster: Mapping[str, Any], transactional_id: str, timeout_s: float) -> None:
        if self.refuse:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        self.fenced.append((cluster["bootstrap.servers"], transactional_id))


def test_only_exactly_once_routes_are_fenced_on_their_destination() -> None:
    fences = Fences()
    fencer = WriterFencer(config=_config(), fence_writer=fences)
    fencer.fence({"w1": {"a.b", "a.c"}})
    assert fences.fenced == [("b:9092", "ferry.a.b.w1")]


def test_a_worker_that_registered_and_was_lost_again_unseen_is_fenced_again() -> None:
    """Between two reconciles a worker can register (a new writer: its init_transactions undoes the
    fence) and lose its session again before the leader ever sees it live: every write that moves
    its partitions is preceded by a fence of its own."""
    fences = Fences()
    fencer = WriterFencer(config=_config(), fence_writer=fences)
    fencer.fence({"w1": {"a.b"}})
    fencer.fence({"w1": {"a.b"}})  # the leader never saw it live in between
    assert fences.fenced == [("b:9092", "ferry.a.b.w1")] * 2


def test_a_destination_that_does_not_answer_stops_the_write() -> None:
    fencer = WriterFencer(config=_config(), fence_writer=Fences(refuse=True))
    with pytest.raises(ControllerError, match=r"fencing worker w1's writer of route a\.b on b"):
        fencer.fence({"w1": {"a.b"}})


def test_a_route_whose_target_was_switched_is_fenced_where_its_workers_write_now() -> None:
    """A distribution tree's distributor ``a.L1`` switched from b to c: its writer writes on c, so it is
    fenced there (a distributor's name, and so its transactional id, stays when its target switches)."""
    fences = Fences()
    config = _config()
    distributor = config.routes[0].model_copy(update={"distributor": "a.L1"})
    switched = distributor.model_copy(update={"destination": "c"})
    fencer = WriterFencer(config=config, fence_writer=fences, effective_routes=lambda: [switched])
    fencer.fence({"w1": {"a.L1"}})
    assert fences.fenced == [("c:9092", "ferry.a.L1.w1")]
