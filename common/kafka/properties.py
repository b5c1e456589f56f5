"""librdkafka's verdict on a cluster's properties, per role, without connecting (``ferry check``).

Builds each client offline (no ``bootstrap.servers``) with Ferry's defaults for the role, so a
misspelled property or a bad value is named as written, before any process starts. The TLS files a
client would open are read first, so that one that cannot be read is named with its key and path.

librdkafka may quote a value in its messages: the secret ones (from a placeholder, or under a key
such as ``sasl.password``) are masked there, and nothing else is.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from ferry.common.config import SECRET_PROPERTY
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

# The files librdkafka opens when it builds a client that speaks TLS (and only then).
TLS_FILES = ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.keystore.location")
_TLS_PROTOCOLS = {"ssl", "sasl_ssl"}
# librdkafka's refusal of a TLS file it opened but could not use, before OpenSSL's reason:
# "ssl.ca.location failed: ", "Failed to open ssl.keystore.location: <path>: ",
# "Error reading ssl.keystore.location PKCS#12 file: <path>: ".
_TLS_REFUSAL = re.compile(
    r"^(?:(?P<failed>ssl\.[a-z.]+\.location) failed: "
    r"|(?:Failed to open|Error reading) (?P<named>ssl\.[a-z.]+\.location)(?: [A-Z0-9#]+ file)?: )"
)

# Secrets shorter than this are not searched for in librdkafka's messages: a value that short is
# found inside ordinary words by chance ("e" in every message, "" everywhere), so masking it there
# would garble the message while protecting next to nothing (a password that short is guessed, not
# read). librdkafka quotes a value it refuses, so a short secret is still masked where it stands
# quoted and whole ("ab").
SHORTEST_SEARCHED_SECRET = 4
_MASK = "***"


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


def masked(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every whole occurrence of a secret replaced by ``***``: not where it is only a
    part of a longer word (a password ``fail`` leaves ``Failed`` alone), never the empty string, and
    one shorter than :data:`SHORTEST_SEARCHED_SECRET` only where it stands quoted (``"ab"``)."""
    for secret in sorted({s for s in secrets if s}, key=len, reverse=True):  # a secret inside another: the longer
        if len(secret) < SHORTEST_SEARCHED_SECRET:
            text = text.replace(f'"{secret}"', f'"{_MASK}"')
            continue
        # An end of the secret that is a word character must not continue a word of the text.
        before = r"(?<!\w)" if re.match(r"\w", secret[0]) else ""
        after = r"(?!\w)" if re.match(r"\w", secret[-1]) else ""
        text = re.sub(before + re.escape(secret) + after, _MASK, text)
    return text


def _secrets(properties: Mapping[str, Any]) -> list[str]:
    """The values librdkafka must not be seen to quote: those from a placeholder (a ``str`` subclass,
    :class:`common.placeholders.Secret`) and those under a secret's key (``sasl.password``)."""
    return [
        str(value)
        for key, value in properties.items()
        if isinstance(value, str) and (type(value) is not str or SECRET_PROPERTY.search(key))
    ]


def _refusal(exc: Exception) -> str:
    error = exc.args[0] if exc.args else None
    return error.str() if isinstance(error, KafkaError) else str(exc)


def _whole_set_refusal(text: str, cluster: Mapping[str, Any], role: Role, secrets: list[str]) -> str:
    """librdkafka's refusal of the whole set as a problem: the TLS file it names, if any, as
    ``"<key>: cannot use <path>: <why>"``, anything else as ``"as a producer: <why>"``."""
    text = _CREATE.sub("", text)
    tls = _TLS_REFUSAL.match(text)
    key = (tls.group("failed") or tls.group("named")) if tls else None
    if tls is None or key is None or key not in cluster:
        return f"{_AS[role]}: {masked(text, secrets)}"
    why = text[tls.end() :].removeprefix(f"{cluster[key]}: ")  # OpenSSL's reason, without the path
    return f"{key}: cannot use {_shown_path(cluster[key])}: {masked(why, secrets)}"


def _shown_path(value: Any) -> str:
    # A path from a placeholder is a resolved value, which no message shows.
    return "the file its placeholder names" if type(value) is not str else str(value)


def _unreadable_tls_file(key: str, value: Any) -> str | None:
    """Why the TLS file ``key`` names cannot be read (``"cannot read <path>: <why>"``), or None."""
    path = str(value)
    if key == "ssl.ca.location" and path == "probe":  # librdkafka looks for the system's CA certificates
        return None
    try:
        if key == "ssl.ca.location" and os.path.isdir(path):  # a directory of CA certificates
            os.listdir(path)
        else:
            with open(path, "rb"):
                pass
    except OSError as exc:
        return f"cannot read {_shown_path(value)}: {exc.strerror or exc}"
    return None


def _tls_file_problems(properties: Mapping[str, Any]) -> dict[str, str]:
    """Each TLS file of ``properties`` that cannot be read, as key -> why; none unless the client
    speaks TLS (librdkafka opens them only then)."""
    if str(properties.get("security.protocol", "")).lower() not in _TLS_PROTOCOLS:
        return {}
    found = {key: _unreadable_tls_file(key, properties[key]) for key in TLS_FILES if key in properties}
    return {key: why for key, why in found.items() if why is not None}


def property_problems(cluster: Mapping[str, Any], role: Role) -> list[str]:
    """What librdkafka refuses in a cluster's properties merged as Ferry merges them for ``role``
    (its defaults, the cluster's properties, a group id), each as ``"<property>: <why>"`` or, for
    a refusal of the whole set (``acks`` against ``enable.idempotence``), ``"as a producer: <why>"``
    (consumer, admin client). A TLS file (:data:`TLS_FILES`) that cannot be read is
    ``"<key>: cannot read <path>: <why>"``, one whose content librdkafka refuses
    ``"<key>: cannot use <path>: <why>"``. Builds clients but never connects.

    Each of the cluster's properties is tried on its own first, so that every misspelled name or
    bad value is named as written (librdkafka stops at the first, under its canonical name).
    """
    defaults = {"producer": PRODUCER_DEFAULTS, "consumer": CONSUMER_DEFAULTS, "admin": {}}[role]
    base = merged(defaults, {"group.id": "ferry.check"} if role == "consumer" else {})
    secrets = _secrets(cluster)
    problems: list[str] = []
    unreadable = _tls_file_problems(cluster)
    problems += [f"{key}: {why}" for key, why in unreadable.items()]
    refused: set[str] = set(unreadable)
    for key, value in cluster.items():
        if key == "bootstrap.servers" or key in refused:
            continue
        try:
            _build_offline({**base, key: value}, role)
        except (KafkaException, TypeError, ValueError) as exc:
            text = _refusal(exc)
            if not text.startswith("Failed to create"):  # that one depends on the other properties
                refused.add(key)
                why = masked(_NAMED.sub("", text), secrets)
                shown = masked(repr(value), secrets)
                problems.append(f"{key}: {why} {shown}" if why == "Invalid value" else f"{key}: {why}")
    try:
        _build_offline(merged(base, {k: v for k, v in cluster.items() if k not in refused}), role)
    except (KafkaException, TypeError, ValueError) as exc:
        problems.append(_whole_set_refusal(_refusal(exc), cluster, role, secrets))
    return problems
