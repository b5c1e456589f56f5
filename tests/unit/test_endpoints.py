"""Bind and advertise apart (common/endpoints.py): which value is in force, and what is advertised."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import pytest

from ferry.common import endpoints
from ferry.common.config import ControllerConfig, WorkerConfig
from ferry.common.errors import ConfigError


def test_the_option_wins_over_the_environment_which_wins_over_the_file() -> None:
    env = {"FERRY_REST_HOST": "10.0.0.2"}
    assert endpoints.pick("10.0.0.1", "FERRY_REST_HOST", "0.0.0.0", "--rest-host", env) == "10.0.0.1"
    assert endpoints.pick(None, "FERRY_REST_HOST", "0.0.0.0", "--rest-host", env) == "10.0.0.2"
    assert endpoints.pick(None, "FERRY_REST_HOST", "0.0.0.0", "--rest-host", {}) == "0.0.0.0"
    assert endpoints.pick(None, "FERRY_REST_HOST", "0.0.0.0", "--rest-host", {"FERRY_REST_HOST": ""}) == "0.0.0.0"


@pytest.mark.parametrize(
    ("option", "env", "origin"),
    [
        ("http://0.0.0.0:9000", {}, "--advertised-url"),
        (None, {"FERRY_ADVERTISED_URL": "10.0.0.1:9000"}, "FERRY_ADVERTISED_URL"),
    ],
)
def test_a_bad_advertised_url_names_where_it_came_from(option: str | None, env: dict[str, str], origin: str) -> None:
    with pytest.raises(ConfigError, match=f"^{origin}: "):
        endpoints.pick(option, "FERRY_ADVERTISED_URL", None, "--advertised-url", env, url=True)


@pytest.mark.parametrize("value", ["http://c1.example:9000", "https://10.0.0.7:9443/", "http://[fd00::7]:9000"])
def test_advertised_urls_the_config_accepts(value: str) -> None:
    assert ControllerConfig(advertised_url=value).advertised_url == value
    assert WorkerConfig(advertised_metrics_url=value).advertised_metrics_url == value


@pytest.mark.parametrize(
    "value", ["c1:9000", "ftp://c1:9000", "http://:9000", "http://[::]:9000", "http://c1:port", "http://c1:9000/api"]
)
def test_advertised_urls_the_config_refuses(value: str) -> None:
    assert endpoints.url_problem(value)
    with pytest.raises(ValueError):
        ControllerConfig(advertised_url=value)


def test_the_advertised_url_given_is_used_as_it_is() -> None:
    assert (
        endpoints.advertised_url("http", "0.0.0.0", 9000, "http://10.0.0.7:9000/", "x", find_host_name=lambda: None)
        == "http://10.0.0.7:9000"
    )


def test_a_specific_bind_address_is_advertised_itself() -> None:
    assert endpoints.advertised_url("https", "10.0.0.7", 9000, None, "x") == "https://10.0.0.7:9000"
    assert endpoints.advertised_url("http", "fd00::7", 9100, None, "x") == "http://[fd00::7]:9100"


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "::", ""])
def test_a_wildcard_bind_address_advertises_the_host_name(wildcard: str) -> None:
    assert (
        endpoints.advertised_url("http", wildcard, 9000, None, "x", find_host_name=lambda: "c1.example")
        == "http://c1.example:9000"
    )


def test_a_wildcard_without_a_resolvable_host_name_asks_for_the_advertised_url() -> None:
    with pytest.raises(ConfigError, match=r"0\.0\.0\.0 is a wildcard bind address .*: set --advertised-url"):
        endpoints.advertised_url("http", "0.0.0.0", 9000, None, "--advertised-url", find_host_name=lambda: None)


def test_the_host_name_is_the_first_resolvable_one_that_is_not_localhost() -> None:
    def names(*values: str) -> tuple[Callable[[], str], ...]:
        return tuple(partial(str, value) for value in values)

    known = {"localhost", "c1", "c1.example"}
    assert endpoints.host_name(names("localhost", "c1"), known.__contains__) == "c1"
    assert endpoints.host_name(names("c1.example", "c1"), known.__contains__) == "c1.example"
    assert endpoints.host_name(names("nowhere", "localhost"), known.__contains__) is None


def test_a_command_on_this_host_reaches_a_wildcard_bind_through_the_loopback() -> None:
    assert endpoints.local_url("http", "0.0.0.0", 9000) == "http://127.0.0.1:9000"
    assert endpoints.local_url("https", "::", 9000) == "https://[::1]:9000"
    assert endpoints.local_url("http", "c1.example", 9000) == "http://c1.example:9000"
