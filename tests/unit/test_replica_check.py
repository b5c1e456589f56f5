"""common/preflight/replicas.py: `ferry check --connect` warns where a copy has or would get fewer replicas."""

from __future__ import annotations

from ferry.common.config import RouteConfig
from ferry.common.preflight.config_check import EndpointResult
from ferry.common.preflight.replicas import fewer_replicas, warning

ROUTE = RouteConfig(source="src", destination="dst", include=["orders.*"])


def test_a_destination_with_fewer_brokers_than_the_source_topics_replicas_is_named() -> None:
    source = {"orders": 3, "orders.eu": 1, "other": 3, "__consumer_offsets": 3}
    found = fewer_replicas(ROUTE, source, {}, brokers=1)
    assert found == [("orders", 1, 3)]  # not mirrored (other) or internal (__*): not judged
    assert fewer_replicas(ROUTE, source, {}, brokers=3) == []
    line = warning(ROUTE, found, 1)
    assert line == "1 topic would have fewer replicas on dst than at the source: orders (1 < 3) (dst has 1 broker)"


def test_a_route_replication_factor_below_the_sources_is_named() -> None:
    route = ROUTE.model_copy(update={"replication_factor": 2})
    found = fewer_replicas(route, {"orders": 3}, {}, brokers=5)
    assert found == [("orders", 2, 3)]
    assert "the route's replication_factor is 2" in warning(route, found, 5)


def test_an_existing_copy_is_judged_by_its_own_replicas_even_when_it_was_posted() -> None:
    route = RouteConfig(source="src", destination="dst", naming="prefix")  # no include: POST /topics only
    assert fewer_replicas(route, {"orders": 3, "logs": 3}, {"src.orders": 1, "src.logs": 3}, brokers=3) == [
        ("orders", 1, 3)
    ]


def test_a_long_list_is_cut_and_a_warning_is_no_failure() -> None:
    found = [(f"orders.{i}", 1, 3) for i in range(7)]
    assert warning(ROUTE, found, 1).count("(1 < 3)") == 5 and " and 2 more " in warning(ROUTE, found, 1)
    assert (
        EndpointResult(endpoint="route src.dst replicas", ok=True, detail="x", warning=True).line()
        == "WARN  route src.dst replicas: x"
    )
