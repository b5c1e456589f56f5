"""The local stack's SASL_SSL listeners: TLS with the stack's CA, SCRAM-SHA-512 users."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ScramMechanism, UserScramCredentialDeletion

from ferry.common.kafka import clients as kafka_clients
from ferry.devstack import security
from ferry.devstack import stack as devstack
from ferry.devstack.support import QUIET


def _brokers(conf: dict[str, str]) -> list[str]:
    brokers = kafka_clients.admin(conf, logger=QUIET).list_topics(timeout=10).brokers
    return [f"{b.host}:{b.port}" for b in brokers.values()]


def _refusal(conf: dict[str, str]) -> set[int]:
    """The error codes a client with ``conf`` gets: its metadata request fails, error_cb says why."""
    codes: set[int] = set()
    admin = kafka_clients.admin(conf, logger=QUIET, error_cb=lambda err: codes.add(err.code()))
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=3)
    admin.poll(1)  # error_cb runs from poll()
    return codes


@pytest.mark.parametrize("cluster", ["src", "dst"])
def test_secured_listener_accepts_the_scram_user_and_only_it(local_stack: devstack.Stack, cluster: str) -> None:
    secured = local_stack.secured(cluster)
    assert _brokers(secured) == [secured["bootstrap.servers"]]  # the broker advertises its secured listener
    assert KafkaError._AUTHENTICATION in _refusal({**secured, "sasl.password": "wrong"})
    # A CA the broker's certificate is not signed by: the TLS handshake fails.
    assert KafkaError._SSL in _refusal({**secured, "ssl.ca.location": "/etc/ssl/certs/ca-certificates.crt"})


def test_up_recreates_a_missing_scram_user(local_stack: devstack.Stack) -> None:
    # A stack formatted before the secured listener existed has no SCRAM user: `up` creates it.
    admin = AdminClient({"bootstrap.servers": local_stack.bootstrap("dst")})
    deletion = UserScramCredentialDeletion(security.SASL_USER, ScramMechanism.SCRAM_SHA_512)
    admin.alter_user_scram_credentials([deletion])[security.SASL_USER].result(timeout=30)
    dst = local_stack.dst
    security.ensure_scram_user(
        cluster=dst.name,
        bootstrap=dst.address,
        sasl_ssl_bootstrap=dst.sasl_ssl_bootstrap,
        log_file=dst.log_file,
        deadline_s=60,
        clock=time.monotonic,
        sleep=time.sleep,
    )
    assert _brokers(local_stack.secured("dst")) == [local_stack.dst.sasl_ssl_address]
