"""MirrorMaker 2's Java client settings as librdkafka properties (what ``ferry import-mm2`` writes under ``clusters``).

Pure: strings in, strings out; no I/O, no clock. A Java setting either has a librdkafka
counterpart (the same name, another name, or a value to derive, like a JAAS line's user and
password) or a reason why not, which the importer reports.
"""

from __future__ import annotations

import re

# Java client settings librdkafka knows under the same name, for every client.
_SAME_NAME = frozenset(
    {
        "bootstrap.servers",
        "security.protocol",
        "sasl.mechanism",
        "sasl.kerberos.service.name",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.cipher.suites",
        "client.id",
        "retry.backoff.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "metadata.max.age.ms",
        "connections.max.idle.ms",
        "socket.connection.setup.timeout.ms",
        "client.dns.lookup",
        "sasl.oauthbearer.token.endpoint.url",
    }
)
# Java settings with another librdkafka name, for every client.
_RENAMED = {"receive.buffer.bytes": "socket.receive.buffer.bytes", "send.buffer.bytes": "socket.send.buffer.bytes"}
# The source consumer's.
_CONSUMER_SAME = frozenset(
    {"fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes", "isolation.level", "client.rack", "check.crcs"}
)
_CONSUMER_RENAMED = {"fetch.max.wait.ms": "fetch.wait.max.ms"}
# The destination producer's.
_PRODUCER_SAME = frozenset(
    {
        "linger.ms",
        "batch.size",
        "acks",
        "request.timeout.ms",
        "retries",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
    }
)
_PRODUCER_RENAMED = {
    "max.request.size": "message.max.bytes",
    "delivery.timeout.ms": "message.timeout.ms",
    "max.in.flight.requests.per.connection": "max.in.flight",
}

# Why some settings have no counterpart (others: "librdkafka has no such setting").
_WHY_NOT = {
    "key.serializer": "Ferry copies bytes as they are",
    "value.serializer": "Ferry copies bytes as they are",
    "key.deserializer": "Ferry copies bytes as they are",
    "value.deserializer": "Ferry copies bytes as they are",
    "enable.idempotence": "Ferry's destination producers are always idempotent",
    "enable.auto.commit": "Ferry commits only what the destination acknowledged",
    "group.id": "Ferry's consumer group is ferry.<source>.<destination>",
    "max.poll.records": "see worker.consume_batch",
    "auto.offset.reset": "see worker.auto_offset_reset",
    "buffer.memory": "librdkafka bounds its queue in queue.buffering.max.kbytes; Ferry sets 64 MiB",
    "sasl.login.callback.handler.class": "a Java class",
    "sasl.client.callback.handler.class": "a Java class",
    "ssl.protocol": "librdkafka negotiates the TLS version",
    "ssl.enabled.protocols": "librdkafka negotiates the TLS version",
    "ssl.keymanager.algorithm": "a Java setting",
    "ssl.trustmanager.algorithm": "a Java setting",
    "interceptor.classes": "a Java class",
    "metric.reporters": "a Java class; Ferry exports Prometheus metrics",
    "partitioner.class": "Ferry keeps each record's partition",
}

# A JAAS line: the login module, then name=value options (values quoted or bare), then ';'.
_JAAS_MODULE = re.compile(r"^\s*([\w.$]+)\s+(required|requisite|sufficient|optional)\s*(.*?);?\s*$", re.S)
_JAAS_OPTION = re.compile(r'([\w.]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def _jaas(value: str) -> dict[str, str] | str:
    """librdkafka's properties for a ``sasl.jaas.config`` line, or why it has none."""
    match = _JAAS_MODULE.match(value)
    if not match:
        return "not a JAAS line Ferry can read"
    module = match.group(1).rsplit(".", 1)[-1]
    options = {
        m.group(1): (m.group(2) if m.group(2) is not None else m.group(3)).rstrip(";")
        for m in _JAAS_OPTION.finditer(match.group(3))
    }
    if module in ("PlainLoginModule", "ScramLoginModule"):
        if "username" not in options or "password" not in options:
            return f"{module} without username and password"
        return {"sasl.username": options["username"], "sasl.password": options["password"]}
    if module == "Krb5LoginModule":
        result = {}
        if "principal" in options:
            result["sasl.kerberos.principal"] = options["principal"]
        if options.get("useKeyTab", "false").lower() == "true" and "keyTab" in options:
            result["sasl.kerberos.keytab"] = options["keyTab"]
        return result or "Krb5LoginModule without a principal or keytab"
    if module == "OAuthBearerLoginModule":
        result = {
            key: options[name]
            for name, key in (
                ("clientId", "sasl.oauthbearer.client.id"),
                ("clientSecret", "sasl.oauthbearer.client.secret"),
                ("scope", "sasl.oauthbearer.scope"),
            )
            if name in options
        }
        if result:
            result["sasl.oauthbearer.method"] = "oidc"
            return result
        return "OAuthBearerLoginModule without clientId/clientSecret (an unsecured token has no librdkafka counterpart)"
    return f"login module {module} has no librdkafka counterpart"


def translate(name: str, value: str, kind: str, settings: dict[str, str]) -> dict[str, str] | str:
    """The librdkafka properties for Java client setting ``name=value`` of a client of ``kind``
    (``common``, ``consumer``, ``producer``, ``admin``), or why there are none.

    ``settings`` are the client's other Java settings (a keystore's type decides whether librdkafka can read it).
    """
    if kind == "admin":
        return "Ferry's admin clients use the cluster's own settings"
    if (
        name in _SAME_NAME
        or (kind == "consumer" and name in _CONSUMER_SAME)
        or (kind == "producer" and name in _PRODUCER_SAME)
    ):
        return {name: value}
    renamed = (
        _RENAMED.get(name)
        or (_CONSUMER_RENAMED.get(name) if kind == "consumer" else None)
        or (_PRODUCER_RENAMED.get(name) if kind == "producer" else None)
    )
    if renamed:
        return {renamed: value}
    if name == "sasl.jaas.config":
        return _jaas(value)
    if name == "ssl.truststore.location":
        kind_of_store = settings.get("ssl.truststore.type", "JKS").upper()
        if kind_of_store == "PEM":
            return {"ssl.ca.location": value}
        return (
            f"a {kind_of_store} truststore: librdkafka reads PEM CA files (ssl.ca.location); "
            "export it with keytool -exportcert -rfc"
        )
    if name == "ssl.keystore.location":
        kind_of_store = settings.get("ssl.keystore.type", "JKS").upper()
        if kind_of_store == "PKCS12":
            return {"ssl.keystore.location": value}
        return (
            f"a {kind_of_store} keystore: librdkafka reads PKCS12 keystores; "
            "convert it with keytool -importkeystore -deststoretype PKCS12"
        )
    if name in ("ssl.truststore.type", "ssl.keystore.type"):
        return {} if value.upper() in ("PEM", "PKCS12", "JKS") else f"librdkafka has no {value} store"
    if name == "ssl.truststore.password":
        return (
            {}
            if settings.get("ssl.truststore.type", "JKS").upper() == "PEM"
            else "librdkafka reads no truststore (see ssl.truststore.location)"
        )
    if name == "ssl.endpoint.identification.algorithm":
        return {name: "https" if value.strip().lower() == "https" else "none"}
    if name in _WHY_NOT:
        return _WHY_NOT[name]
    return f"librdkafka has no {kind + ' ' if kind != 'common' else ''}setting {name}"
