"""A cluster's librdkafka properties, translated for Spark's Kafka source (Java client properties).

Ferry's config describes each cluster with librdkafka properties (``clusters.<name>``), which the
controller and the workers use as they are. Spark's Kafka source runs the Java client and takes
its properties as options prefixed with ``kafka.``. :func:`spark_kafka_options` translates, purely
(no I/O), and refuses with one clear line what it cannot translate, rather than letting Spark
connect without the security the cluster needs.

==================================================  ==================================================
librdkafka                                          Java client (each prefixed ``kafka.``)
==================================================  ==================================================
``bootstrap.servers``, ``client.id``                the same
``security.protocol``                               the same, upper case
``sasl.mechanism`` (alias ``sasl.mechanisms``)      ``sasl.mechanism``
``sasl.username`` + ``sasl.password``               ``sasl.jaas.config``: ``ScramLoginModule`` (SCRAM-SHA-256/512)
                                                    or ``PlainLoginModule`` (PLAIN)
``ssl.ca.location`` (a PEM file)                    ``ssl.truststore.type=PEM`` + ``ssl.truststore.location``
``ssl.ca.pem``                                      ``ssl.truststore.type=PEM`` + ``ssl.truststore.certificates``
``ssl.keystore.location`` + ``.password`` (PKCS12)  ``ssl.keystore.type=PKCS12`` + the same two
``ssl.certificate.pem`` + ``ssl.key.pem``           ``ssl.keystore.type=PEM`` + ``ssl.keystore.certificate.chain``
                                                    + ``ssl.keystore.key``
``ssl.key.password``                                the same
``ssl.endpoint.identification.algorithm``           the same (``none`` becomes the empty string)
==================================================  ==================================================

Refused: other SASL mechanisms (GSSAPI, OAUTHBEARER: their Java login needs more than librdkafka's
properties say), ``ssl.ca.location=probe``, client certificates as separate PEM files
(``ssl.certificate.location``/``ssl.key.location``: use a PKCS12 keystore or the inline ``.pem``
properties), and any other ``security.*``, ``sasl.*`` or ``ssl.*`` property, or
``enable.ssl.certificate.verification``. Properties that only tune librdkafka (timeouts, buffers,
``debug``...) are left out: Spark's consumer has its own defaults for those.
"""

from __future__ import annotations

from collections.abc import Mapping

from ferry.common.config import ClientValue
from ferry.pipeline import PipelineError

PREFIX = "kafka."

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_SAME_NAME = ("bootstrap.servers", "client.id", "ssl.key.password")
# Read by the rules below; every other security property is refused.
_HANDLED = {
    *_SAME_NAME,
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.certificate.pem",
    "ssl.key.pem",
    "ssl.endpoint.identification.algorithm",
}


def _is_security(key: str) -> bool:
    return key.startswith(("security.", "sasl.", "ssl.", "ssl_")) or key == "enable.ssl.certificate.verification"


def _jaas_quoted(value: str) -> str:
    # Kafka parses sasl.jaas.config with java.io.StreamTokenizer: a quoted string ends at its quote
    # or at a line end, and a backslash escapes (\n, \r, \", \\).
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def spark_kafka_options(cluster: Mapping[str, ClientValue], name: str = "cluster") -> dict[str, str]:
    """Spark Kafka source options (``kafka.``-prefixed) for a cluster given as librdkafka properties.

    Raises :class:`PipelineError`, naming ``name`` and the property, for what cannot be translated.
    """
    props = {key: str(value) for key, value in cluster.items()}

    def refuse(reason: str) -> PipelineError:
        return PipelineError(f"cluster {name!r}: {reason}; Spark's Kafka source (ferry validate/audit) cannot use it")

    for key in sorted(props):
        if _is_security(key) and key not in _HANDLED:
            raise refuse(f"the librdkafka property {key} has no translation to the Java client")
    options = {key: props[key] for key in _SAME_NAME if key in props}

    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in _PROTOCOLS:
        raise refuse(f"security.protocol {props['security.protocol']!r} is not one of {', '.join(_PROTOCOLS)}")
    options["security.protocol"] = protocol

    mechanism = props.get("sasl.mechanism", props.get("sasl.mechanisms"))
    if protocol.startswith("SASL_"):
        mechanism = (mechanism or "GSSAPI").upper()  # librdkafka's default
        if mechanism not in _LOGIN_MODULES:
            raise refuse(f"sasl.mechanism {mechanism} is not translated (only {', '.join(_LOGIN_MODULES)})")
        if not props.get("sasl.username") or not props.get("sasl.password"):
            raise refuse(f"sasl.mechanism {mechanism} needs sasl.username and sasl.password")
        options["sasl.mechanism"] = mechanism
        options["sasl.jaas.config"] = (
            f"{_LOGIN_MODULES[mechanism]} required username={_jaas_quoted(props['sasl.username'])} "
            f"password={_jaas_quoted(props['sasl.password'])};"
        )

    if "ssl.ca.location" in props and "ssl.ca.pem" in props:
        raise refuse("give either ssl.ca.location or ssl.ca.pem, not both")
    if "ssl.ca.location" in props:
        if props["ssl.ca.location"].strip().lower() == "probe":
            raise refuse("ssl.ca.location=probe (the system's CA store) has no Java equivalent; name a PEM file")
        options.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": props["ssl.ca.location"]})
    if "ssl.ca.pem" in props:
        options.update({"ssl.truststore.type": "PEM", "ssl.truststore.certificates": props["ssl.ca.pem"]})

    if "ssl.keystore.location" in props and ("ssl.certificate.pem" in props or "ssl.key.pem" in props):
        raise refuse(
            "give the client certificate either as ssl.keystore.location or as ssl.certificate.pem + ssl.key.pem"
        )
    if "ssl.keystore.location" in props:
        options.update({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": props["ssl.keystore.location"]})
        if "ssl.keystore.password" in props:
            options["ssl.keystore.password"] = props["ssl.keystore.password"]
    elif "ssl.keystore.password" in props:
        raise refuse("ssl.keystore.password without ssl.keystore.location")
    if ("ssl.certificate.pem" in props) != ("ssl.key.pem" in props):
        raise refuse("ssl.certificate.pem and ssl.key.pem go together")
    if "ssl.certificate.pem" in props:
        options.update(
            {
                "ssl.keystore.type": "PEM",
                "ssl.keystore.certificate.chain": props["ssl.certificate.pem"],
                "ssl.keystore.key": props["ssl.key.pem"],
            }
        )

    if "ssl.endpoint.identification.algorithm" in props:
        algorithm = props["ssl.endpoint.identification.algorithm"].strip().lower()
        if algorithm not in ("none", "https"):
            raise refuse(f"ssl.endpoint.identification.algorithm {algorithm!r} is neither none nor https")
        options["ssl.endpoint.identification.algorithm"] = "" if algorithm == "none" else "https"

    return {PREFIX + key: value for key, value in options.items()}
