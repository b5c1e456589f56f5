"""librdkafka's verdict on a cluster's properties, per role, without connecting (``ferry check``).

Builds each client offline (no ``bootstrap.servers``) with Ferry's defaults for the role, so a
misspelled property or a bad value is named as written, before any process starts.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from ferry.common.kafka.clients import CONSUMER_DEFAULTS, PRODUCER_DEFAULTS, merged

Role = Literal["producer", "consumer", "admin"]
ROLES: tuple[Role, ...] = ("producer", "consumer", "admin")
_AS = {"producer": "as a producer", "consumer": "as a consumer", "admin": "as an admin client"}

# librdkafka's own log lines while a client is built only to check its properties.
_SILENT = logging.getLogger("ferry.kafka_clients.check")
_SILENT.setLevel(logging.CRITICAL + 1)
_SILENT.propagate = False
_CREATE = re.compile(r"^Failed to create [a-z ]+: ")
_NAMED = re.compile(r' for configuration property "[^"]+"|: "[^"]+"$')


def _build_offline(properties: Mapping[str, Any], role: Role) -> None:
    """Builds and closes the ``role`` client librdkafka would make of ``properties``, without
    ``bootstrap.servers``: nothing connects, yet every property name and value is checked."""
    conf = {key: value for key, value in properties.items() if key != "bootstrap.servers"}
    conf["logger"] = _SILENT
    if role == "producer":
        Producer(conf)
    elif role == "consumer":
        Consumer(conf).close()
    else:
        AdminClient(conf)


def _refusal(exc: Exception, secrets: list[str]) -> str:
    error = exc.args[0] if exc.args else None
    text = error.str() if isinstance(error, KafkaError) else str(exc)
    for secret in secrets:  # librdkafka may quote a value: never a secret one
        text = text.replace(secret, "***")
    return text


def property_problems(cluster: Mapping[str, Any], role: Role) -> list[str]:
    """What librdkafka refuses in a cluster's properties merged as Ferry merges them for ``role``
    (its defaults, the cluster's properties, a group id), each as ``"<property>: <why>"`` or, for
    a refusal of the whole set (``acks`` against ``enable.idempotence``, an unreadable
    ``ssl.ca.location``), ``"as a producer: <why>"`` (consumer, admin client). Builds clients but never connects.

    Each of the cluster's properties is tried on its own first, so that every misspelled name or
    bad value is named as written (librdkafka stops at the first, under its canonical name).
    """
    defaults = {"producer": PRODUCER_DEFAULTS, "consumer": CONSUMER_DEFAULTS, "admin": {}}[role]
    base = merged(defaults, {"group.id": "ferry.check"} if role == "consumer" else {})
    secrets = [str(value) for key, value in cluster.items() if type(value) is not str and isinstance(value, str)]
    problems: list[str] = []
    refused: set[str] = set()
    for key, value in cluster.items():
        if key == "bootstrap.servers":
            continue
        try:
            _build_offline({**base, key: value}, role)
        except (KafkaException, TypeError, ValueError) as exc:
            text = _refusal(exc, secrets)
            if not text.startswith("Failed to create"):  # that one depends on the other properties
                refused.add(key)
                why = _NAMED.sub("", text)
                problems.append(f"{key}: {why} {value!r}" if why == "Invalid value" else f"{key}: {why}")
    try:
        _build_offline(merged(base, {k: v for k, v in cluster.items() if k not in refused}), role)
    except (KafkaException, TypeError, ValueError) as exc:
        text = _refusal(exc, secrets)
        problems.append(f"{_AS[role]}: {_CREATE.sub('', text)}")
    return problems
