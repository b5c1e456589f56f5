"""`ferry check --connect` for exactly-once routes (common/preflight/transactions.py): whether the
destination's brokers let transactions start, and whether it grants the routes' transactional ids."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.config import RouteConfig, parse_config
from ferry.common.preflight import acls
from ferry.common.preflight import transactions as check
from ferry.common.preflight.grants import ClusterGrants
from ferry.controller.commands.check import transactional_id_results

pytestmark = pytest.mark.unit

EXACTLY_ONCE = RouteConfig(source="src", destination="dst", include=["orders"], delivery_guarantee="exactly_once")


def _brokers(count: int, factor: int | str | None, isr: int | str | None) -> dict[int, dict[str, str | None]]:
    value = {check.REPLICATION_FACTOR: None if factor is None else str(factor), check.MIN_ISR: None}
    value[check.MIN_ISR] = None if isr is None else str(isr)
    return {broker: dict(value) for broker in range(1, count + 1)}


@pytest.mark.parametrize(
    ("brokers", "factor", "isr", "level", "says"),
    [
        (1, 1, 1, check.OK, "transaction.state.log.replication.factor=1, transaction.state.log.min.isr=1 on 1 broker"),
        (3, 3, 2, check.OK, "transaction.state.log.replication.factor=3, transaction.state.log.min.isr=2 on 3 brokers"),
        (1, 3, 2, check.ERROR, "replication factor is more than the brokers, so __transaction_state is never created"),
        (2, 2, 3, check.ERROR, "the min.isr is more than the brokers, so no write to __transaction_state succeeds"),
        (3, 1, 2, check.ERROR, "the min.isr is more than the replication factor"),
        (3, 3, 1, check.WARNING, "acknowledged by one broker alone and lost with it"),
    ],
    ids=["one-broker", "production", "factor-above-brokers", "isr-above-brokers", "isr-above-factor", "isr-of-1"],
)
def test_the_transaction_settings_are_judged_against_the_broker_count(
    brokers: int, factor: int, isr: int, level: str, says: str
) -> None:
    verdict = check.settings_verdict("dst", _brokers(brokers, factor, isr), brokers)
    assert verdict.level == level and says in verdict.detail, verdict
    if level == check.ERROR:
        assert "transactions cannot start" in verdict.detail


def test_brokers_that_disagree_are_judged_by_their_worst_values_and_a_missing_value_is_an_error() -> None:
    mixed = {
        1: {check.REPLICATION_FACTOR: "3", check.MIN_ISR: "2"},
        2: {check.REPLICATION_FACTOR: "3", check.MIN_ISR: "1"},
    }
    verdict = check.settings_verdict("dst", mixed, 3)
    assert verdict.level == check.WARNING and "transaction.state.log.min.isr=1/2 on 3 brokers" in verdict.detail
    silent = check.settings_verdict("dst", _brokers(3, 3, None), 3)
    assert silent == check.Verdict(
        check.ERROR, "dst's brokers do not say their transaction.state.log.min.isr (got None)"
    )
    assert check.settings_verdict("dst", {}, 0).level == check.ERROR


@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 6))
def test_transactions_are_refused_exactly_when_kafka_could_not_create_or_write_their_log(
    brokers: int, factor: int, isr: int
) -> None:
    verdict = check.settings_verdict("dst", _brokers(brokers, factor, isr), brokers)
    cannot_start = factor > brokers or isr > brokers or isr > factor
    assert (verdict.level == check.ERROR) is cannot_start
    assert (verdict.level == check.WARNING) is (not cannot_start and isr == 1 and brokers > 1)


def test_the_transactional_id_prefix_is_the_one_the_workers_use_and_ferry_acls_grants() -> None:
    prefix = check.transactional_id_prefix(EXACTLY_ONCE)
    assert prefix == "ferry.src.dst." and EXACTLY_ONCE.transactional_id("worker-7").startswith(prefix)
    config = _config(delivery_guarantee="exactly_once")
    granted_ids = {a.resource for a in acls.required_acls(config) if a.resource.type == acls.TRANSACTIONAL_ID}
    assert granted_ids == {acls.Resource(acls.TRANSACTIONAL_ID, prefix, acls.PREFIXED)}


def _config(**route: Any) -> Any:
    sasl = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "ferry"}
    return parse_config(
        {
            "zookeeper": {"connect": "zk:2181"},
            "clusters": {
                "src": {"bootstrap.servers": "src:9094", **sasl, "sasl.password": "x"},
                "dst": {"bootstrap.servers": "dst:9094", **sasl, "sasl.password": "x"},
            },
            "routes": [
                {"source": "src", "destination": "dst", "include": ["orders"], **route},
                {
                    "source": "dst",
                    "destination": "src",
                    "include": ["orders"],
                    "naming": "prefix",
                    "delivery_guarantee": "at_least_once",
                },
            ],
        }
    )


def test_an_exactly_once_route_gets_one_line_for_its_transactional_ids_on_each_destination_asked() -> None:
    config = _config(delivery_guarantee="exactly_once")
    needed = [a for a in acls.required_acls(config) if a.cluster == "dst"]
    ids = check.transactional_id_acls(needed, config.routes[0], "dst")
    assert sorted(a.operation for a in ids) == ["Describe", "Write"]

    granted = {"dst": ClusterGrants("dst", "User:ferry", missing=[]), "src": ClusterGrants("src", "User:ferry")}
    assert [r.line() for r in transactional_id_results(config, granted)] == [
        "ok    route src.dst transactional-id ACLs on dst: Write and Describe granted on the transactional ids "
        "ferry.src.dst.* (prefixed)"
    ]  # the at-least-once route dst.src: no line

    lacking = {"dst": ClusterGrants("dst", "User:ferry", missing=ids[:1])}
    (line,) = [r.line() for r in transactional_id_results(config, lacking)]
    assert line.startswith(f"FAIL  route src.dst transactional-id ACLs on dst: {ids[0].operation} not granted")
    assert "grant what `ferry acls` prints" in line

    unknown = {"dst": ClusterGrants("dst", "User:ferry", error="cannot describe its ACLs: no authorizer")}
    assert [r.line() for r in transactional_id_results(config, unknown)] == [
        "----  route src.dst transactional-id ACLs on dst: not checked: cannot describe its ACLs: no authorizer"
    ]
    assert list(transactional_id_results(config, {})) == []  # dst not asked (no SASL user, or no answer): no line
    at_least_once = _config(delivery_guarantee="at_least_once")
    assert list(transactional_id_results(at_least_once, granted)) == []
