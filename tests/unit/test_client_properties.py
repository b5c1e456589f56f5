"""librdkafka's verdict on a cluster's properties (common/kafka/properties.py): secret values masked
in its messages, whole and only where they stand, and TLS files named with their key and path."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferry.common.kafka.properties import ROLES, masked, property_problems
from ferry.common.placeholders import Secret

IDEMPOTENT_ACKS = "as a producer: `acks` must be set to `all` when `enable.idempotence` is true"
SASL = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "ferry"}


@pytest.mark.parametrize("password", ["", "e", "fail", "produce", "able"])
def test_a_refusal_is_not_garbled_by_a_password_found_only_inside_its_words(password: str) -> None:
    # "fail" is in "Failed", "produce" in "producer", "able" in "enable", "e" everywhere: none is the password.
    for value in (Secret(password), password):
        assert property_problems({**SASL, "sasl.password": value, "acks": "1"}, "producer") == [IDEMPOTENT_ACKS]


def test_a_password_that_is_a_whole_word_of_the_message_is_masked_there() -> None:
    problems = property_problems({**SASL, "sasl.password": Secret("true"), "acks": "1"}, "producer")
    assert problems == [IDEMPOTENT_ACKS.replace("is true", "is ***")]


def test_a_secret_value_librdkafka_refuses_is_masked_wherever_it_quotes_it() -> None:
    problems = property_problems(
        {**SASL, "sasl.mechanism": Secret("HIDDEN"), "compression.type": Secret("HIDDEN")}, "producer"
    )
    assert problems == ['compression.type: Invalid value "***"', "as a producer: Unsupported SASL mechanism: ***"]


@pytest.mark.parametrize(
    ("text", "secrets", "expected"),
    [
        ('Invalid value "hunter2" for x', ["hunter2"], 'Invalid value "***" for x'),
        ("Failed to create producer", [""], "Failed to create producer"),
        ("Failed to create producer", ["e"], "Failed to create producer"),
        ('Invalid value "ab"', ["ab"], 'Invalid value "***"'),  # too short to search for, but quoted whole
        ("tab: ab", ["ab"], "tab: ab"),
        ("secret secrets secret.", ["secret"], "*** secrets ***."),
        ("open p@ss!: no", ["p@ss!"], "open ***: no"),
        ("pass-word and pass", ["pass", "pass-word"], "*** and ***"),  # the longer one first, whole
    ],
)
def test_masking_replaces_whole_occurrences_only(text: str, secrets: list[str], expected: str) -> None:
    assert masked(text, secrets) == expected


TLS = {"security.protocol": "SSL"}


def test_an_unreadable_ca_file_is_named_with_its_key_and_path(tmp_path: Path) -> None:
    missing = tmp_path / "missing-ca.pem"
    for role in ROLES:
        problems = property_problems({**TLS, "ssl.ca.location": str(missing)}, role)
        assert problems == [f"ssl.ca.location: cannot read {missing}: No such file or directory"]


def test_every_unreadable_tls_file_is_named_at_once(tmp_path: Path) -> None:
    problems = property_problems(
        {**TLS, "ssl.certificate.location": str(tmp_path), "ssl.key.location": str(tmp_path / "key.pem")}, "producer"
    )
    assert problems == [
        f"ssl.certificate.location: cannot read {tmp_path}: Is a directory",
        f"ssl.key.location: cannot read {tmp_path / 'key.pem'}: No such file or directory",
    ]


def test_a_tls_file_librdkafka_cannot_use_is_named_with_its_key_and_path(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not a certificate\n")
    (problem,) = property_problems({**TLS, "ssl.ca.location": str(ca)}, "producer")
    assert problem.startswith(f"ssl.ca.location: cannot use {ca}: ")


def test_a_tls_file_path_from_a_placeholder_is_not_shown(tmp_path: Path) -> None:
    missing = Secret(str(tmp_path / "missing-ca.pem"))
    problems = property_problems({**TLS, "ssl.ca.location": missing}, "producer")
    assert problems == ["ssl.ca.location: cannot read the file its placeholder names: No such file or directory"]


def test_tls_files_are_left_alone_when_the_client_does_not_speak_tls(tmp_path: Path) -> None:
    # librdkafka opens them only for SSL and SASL_SSL; probe: the system's CA certificates.
    assert property_problems({"ssl.ca.location": str(tmp_path / "missing-ca.pem")}, "producer") == []
    assert property_problems({**TLS, "ssl.ca.location": "probe"}, "producer") == []
    assert property_problems({**TLS, "ssl.ca.location": str(tmp_path)}, "producer") == []
