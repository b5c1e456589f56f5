"""librdkafka cluster properties -> Spark Kafka source options (Java client, ``kafka.`` prefix)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.pipeline import PipelineError
from ferry.pipeline.kafka_options import spark_kafka_options

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"


def test_plaintext_is_bootstrap_and_protocol_only_and_librdkafka_tuning_is_left_out() -> None:
    options = spark_kafka_options({"bootstrap.servers": "a:9092,b:9092", "linger.ms": 5, "debug": "all"})
    assert options == {"kafka.bootstrap.servers": "a:9092,b:9092", "kafka.security.protocol": "PLAINTEXT"}


def test_sasl_ssl_with_scram_and_a_pem_ca_file() -> None:
    options = spark_kafka_options(
        {
            "bootstrap.servers": "127.0.0.1:19094",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "ferry",
            "sasl.password": "s3cret",
            "ssl.ca.location": "/etc/ferry/ca.pem",
            "client.id": "ferry-audit",
        }
    )
    assert options == {
        "kafka.bootstrap.servers": "127.0.0.1:19094",
        "kafka.client.id": "ferry-audit",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": f'{SCRAM} required username="ferry" password="s3cret";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/etc/ferry/ca.pem",
    }


def test_plain_mechanism_alias_inline_pem_and_no_hostname_check() -> None:
    options = spark_kafka_options(
        {
            "bootstrap.servers": "b:1",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.ca.pem": "-----BEGIN CERTIFICATE-----...",
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert options["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
    )
    assert options["kafka.ssl.truststore.certificates"] == "-----BEGIN CERTIFICATE-----..."
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""


def test_client_certificates_pkcs12_or_inline_pem() -> None:
    pkcs12 = spark_kafka_options(
        {
            "bootstrap.servers": "b:1",
            "security.protocol": "SSL",
            "ssl.keystore.location": "/k.p12",
            "ssl.keystore.password": "kp",
            "ssl.key.password": "kk",
        }
    )
    assert pkcs12["kafka.ssl.keystore.type"] == "PKCS12" and pkcs12["kafka.ssl.keystore.location"] == "/k.p12"
    assert pkcs12["kafka.ssl.keystore.password"] == "kp" and pkcs12["kafka.ssl.key.password"] == "kk"
    pem = spark_kafka_options(
        {"bootstrap.servers": "b:1", "security.protocol": "SSL", "ssl.certificate.pem": "C", "ssl.key.pem": "K"}
    )
    assert (
        pem["kafka.ssl.keystore.type"],
        pem["kafka.ssl.keystore.certificate.chain"],
        pem["kafka.ssl.keystore.key"],
    ) == ("PEM", "C", "K")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism GSSAPI is not translated"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER is not translated"),
        (
            {"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": "p"},
            "GSSAPI",
        ),  # librdkafka's default
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256"}, "needs sasl.username and sasl.password"),
        ({"security.protocol": "TLS"}, "security.protocol 'TLS'"),
        ({"ssl.ca.location": "probe"}, "probe"),
        (
            {"ssl.certificate.location": "/c.pem", "ssl.key.location": "/k.pem"},
            "ssl.certificate.location has no translation",
        ),
        ({"enable.ssl.certificate.verification": "false"}, "enable.ssl.certificate.verification"),
        ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name"),
        ({"ssl.certificate.pem": "C"}, "go together"),
        ({"ssl.ca.location": "/a", "ssl.ca.pem": "P"}, "not both"),
        ({"ssl.endpoint.identification.algorithm": "dns"}, "neither none nor https"),
    ],
)
def test_what_cannot_be_translated_is_refused_with_the_cluster_and_property(
    extra: dict[str, str], message: str
) -> None:
    with pytest.raises(PipelineError, match=message) as raised:
        spark_kafka_options({"bootstrap.servers": "b:1", **extra}, name="dst")
    assert "cluster 'dst'" in str(raised.value)


@given(username=st.text(min_size=1), password=st.text(min_size=1))
def test_jaas_values_are_quoted_so_no_credential_escapes_its_string(username: str, password: str) -> None:
    jaas = spark_kafka_options(
        {
            "bootstrap.servers": "b:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": username,
            "sasl.password": password,
        }
    )["kafka.sasl.jaas.config"]
    body = jaas.removeprefix(f"{SCRAM} required ").removesuffix(";")
    # Unescape the two quoted values the way JAAS's tokenizer does and get the originals back.
    values, current, quoted, escaped = [], "", False, False
    for char in body:
        if escaped:
            current, escaped = current + {"n": "\n", "r": "\r"}.get(char, char), False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            if quoted:
                values.append(current)
                current = ""
            quoted = not quoted
        elif quoted:
            current += char
    assert values == [username, password]
