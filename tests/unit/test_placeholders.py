"""${env:NAME} and ${file:PATH} placeholders in the config: resolution, escaping, errors naming the
key, and resolved secrets kept out of reprs and error messages."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferry.common.config import parse_config, validate_config
from ferry.common.errors import ConfigError
from ferry.common.placeholders import MASK, PlaceholderError, Secret, Unresolved, escape, resolve, resolve_text

BASE: dict[str, Any] = {
    "zookeeper": {"connect": "zk:2181"},
    "clusters": {"src": {"bootstrap.servers": "a:9092"}, "dst": {"bootstrap.servers": "b:9092"}},
    "routes": [{"source": "src", "destination": "dst"}],
}
# Text rich in the characters that matter to the syntax.
TEXT = st.lists(st.sampled_from(["$", "{", "}", ":", "a", "env", "file", " ", "é"]), max_size=30).map("".join)


def files(contents: dict[str, str]) -> Any:
    def read(path: str) -> str:
        if path not in contents:
            raise FileNotFoundError(2, "No such file or directory")
        return contents[path]

    return read


@given(TEXT)
def test_escaped_text_comes_back_unchanged_and_is_no_secret(text: str) -> None:
    resolved = resolve_text(escape(text), env={})
    assert resolved == text and type(resolved) is str


@given(st.text(max_size=40).filter(lambda t: "${" not in t))
def test_text_without_a_placeholder_is_left_alone(text: str) -> None:
    assert resolve_text(text, env={}) == text


# `$${` always means a literal `${`: a `$` cannot directly precede a placeholder.
@given(value=st.text(max_size=40), before=TEXT.filter(lambda t: not t.endswith("$")), after=TEXT)
def test_a_variable_is_put_in_verbatim_and_never_resolved_again(value: str, before: str, after: str) -> None:
    resolved = resolve_text(f"{escape(before)}${{env:SECRET_VALUE}}{escape(after)}", env={"SECRET_VALUE": value})
    assert resolved == before + value + after
    assert isinstance(resolved, Secret) and repr(resolved) == MASK and repr([resolved]) == f"[{MASK}]"


def test_a_file_gives_its_content_without_trailing_line_breaks() -> None:
    read = files({"/s/pw": "p@ss word\r\n\n", "/s/user": "ferry\n"})
    assert resolve_text("${file:/s/user}:${file:/s/pw}", env={}, read_file=read) == "ferry:p@ss word"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("${env:UNSET_ONE}", "${env:UNSET_ONE}: the environment variable UNSET_ONE is not set"),
        ("${file:/nowhere}", "${file:/nowhere}: cannot read /nowhere: No such file or directory"),
        ("${vault:secret/x}", "unknown placeholder '${vault:secret/x}'"),
        ("${HOME}", "unknown placeholder '${HOME}'"),
        ("${env:not-a-name}", "'not-a-name' is not an environment variable name"),
        ("${file:}", "no file named"),
        ("price: ${env:X", "without a closing '}'"),
    ],
)
def test_what_cannot_be_resolved_is_named(text: str, problem: str) -> None:
    with pytest.raises(PlaceholderError) as raised:
        resolve_text(text, env={"X": "1"}, read_file=files({}))
    assert problem in str(raised.value)


def test_resolve_walks_values_not_keys_and_names_each_problem_by_its_path() -> None:
    data = {"a": {"${env:K}": "${env:K}", "n": 3, "l": ["x", "${env:MISSING}"]}, "b": "${env:ALSO_MISSING}"}
    resolved, problems = resolve(data, env={"K": "v"})
    assert resolved["a"] == {"${env:K}": "v", "n": 3, "l": ["x", "${env:MISSING}"]}
    assert [key for key, _ in problems] == ["a.l.1", "b"]


def test_a_cluster_password_from_the_environment_is_resolved_and_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_TEST_KAFKA_PASSWORD", "kafka-pw-0123")
    config = parse_config(
        {
            **BASE,
            "clusters": {
                "src": {"bootstrap.servers": "a:9092", "sasl.password": "${env:FERRY_TEST_KAFKA_PASSWORD}"},
                "dst": {"bootstrap.servers": "b:9092", "ssl.key.password": "written-in-the-file"},
            },
        }
    )
    assert config.clusters["src"]["sasl.password"] == "kafka-pw-0123"
    assert isinstance(config.clusters["src"]["sasl.password"], Secret)
    for shown in (repr(config), str(config), repr(config.clusters), repr(config.model_dump())):
        assert "kafka-pw-0123" not in shown and "written-in-the-file" not in shown


def test_every_unresolvable_placeholder_is_a_config_error_naming_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FERRY_TEST_UNSET", raising=False)
    with pytest.raises(ConfigError) as raised:
        parse_config(
            {
                **BASE,
                "clusters": {
                    "src": {"bootstrap.servers": "a:9092", "sasl.password": "${env:FERRY_TEST_UNSET}"},
                    "dst": {"bootstrap.servers": "b:9092", "ssl.key.password": "${file:/nonexistent/key-password}"},
                },
            }
        )
    message = str(raised.value)
    assert (
        "clusters.src.sasl.password: ${env:FERRY_TEST_UNSET}: the environment variable FERRY_TEST_UNSET is not set"
        in message
    )
    assert "clusters.dst.ssl.key.password: ${file:/nonexistent/key-password}: cannot read" in message


def test_a_literal_dollar_brace_is_written_doubled() -> None:
    config = parse_config(
        {
            **BASE,
            "clusters": {
                **BASE["clusters"],
                "src": {
                    "bootstrap.servers": "a:9092",
                    "sasl.username": "$${env:NOT_A_PLACEHOLDER}",
                    "client.id": "costs $$5",
                },
            },
        }
    )
    assert config.clusters["src"]["sasl.username"] == "${env:NOT_A_PLACEHOLDER}"
    assert config.clusters["src"]["client.id"] == "costs $$5"  # only $${ is an escape


def test_keeping_what_is_unavailable_leaves_it_as_written_and_says_why() -> None:
    data = {"a": "${env:MISSING}", "b": "${file:/nonexistent/f}", "c": "${env:K}", "d": "${env:MISSING}${oops:x}"}
    resolved, problems = resolve(data, env={"K": "v"}, read_file=files({}), keep_unavailable=True)
    assert isinstance(resolved["a"], Unresolved) and str(resolved["a"]) == "${env:MISSING}"
    assert resolved["a"].reason == "${env:MISSING}: the environment variable MISSING is not set"
    assert resolved["b"].reason == "${file:/nonexistent/f}: cannot read /nonexistent/f: No such file or directory"
    assert repr(resolved["a"]) == MASK
    assert resolved["c"] == "v" and not isinstance(resolved["c"], Unresolved)
    # A malformed placeholder is a problem even behind an unavailable one.
    assert problems == [
        ("d", "unknown placeholder '${oops:x}': use ${env:NAME} or ${file:PATH} (write $${ for a literal ${)")
    ]


def test_a_check_failing_on_a_kept_placeholder_says_why_it_was_kept() -> None:
    data = {**BASE, "controller": {"rest_port": "${env:FERRY_TEST_UNSET_PORT}"}}
    config, problems = validate_config(data, env={}, keep_unavailable=True)
    assert config is None
    assert problems == [
        "controller.rest_port: ${env:FERRY_TEST_UNSET_PORT}: the environment variable FERRY_TEST_UNSET_PORT is not set"
    ]
