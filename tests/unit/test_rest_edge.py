"""The REST edge: parameter validation, request ids, bearer tokens, /openapi.json.

Over the fake controller of ``test_rest``; the fake fails like kazoo does on a relative ZooKeeper
path, so a topic name that reaches it unchecked shows up as a 500 (as it did before the edge checked names).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from flask import Flask, request
from flask.testing import FlaskClient
from hypothesis import given, settings
from hypothesis import strategies as st

from ferry.common.config import RestAuthConfig, RestTokenConfig, parse_config
from ferry.common.errors import ConfigError
from ferry.common.model import PartitionKey
from ferry.controller.api.auth import TokenChecker, load_tokens
from ferry.controller.api.openapi import openapi_document
from ferry.controller.api.rest import REQUEST_ID_HEADER, create_app
from ferry.controller.topics.admin import TopicDeleted
from ferry.controller.topics.progress import OffsetSample
from ferry.controller.topics.reads import TopicView
from ferry.controller.topics.spec import TopicSpec
from tests.checks import assert_json_error
from tests.fakes import FakeController, as_controller_api

WRITE_TOKEN = "w-secret-0123456789abcdef"
READ_TOKEN = "r-secret-0123456789abcdef"


class ZkLikeFake(FakeController):
    """Raises like kazoo when a topic name makes a relative ZooKeeper path ('.', '..')."""

    def _zk_path(self, topic: str) -> None:
        if topic in (".", "..") or "/" in topic or not topic:
            raise ValueError("relative paths not allowed")

    def topic_view(self, topic: str, route: str | None = None) -> TopicView:
        self._zk_path(topic)
        return super().topic_view(topic, route)

    def delete_topic(self, topic: str, route: str | None = None) -> TopicDeleted:
        self._zk_path(topic)
        return super().delete_topic(topic, route)

    def offsets(self, topic: str | None = None, partition: int | None = None) -> dict[PartitionKey, OffsetSample]:
        if topic is not None:
            self._zk_path(topic)
        return super().offsets(topic, partition)


@pytest.fixture
def fake() -> ZkLikeFake:
    return ZkLikeFake()


@pytest.fixture
def client(fake: ZkLikeFake) -> FlaskClient:
    return create_app(as_controller_api(fake)).test_client()


# -- path, query and body parameters ---------------------------------------------------------


@pytest.mark.parametrize("topic", [".", "..", "orders%0A"])
@pytest.mark.parametrize(
    ("method", "template"),
    [
        ("GET", "/topics/{}"),
        ("HEAD", "/topics/{}"),
        ("DELETE", "/topics/{}"),
        ("GET", "/offset/{}"),
        ("GET", "/offset/{}/0"),
    ],
)
def test_dot_topics_are_a_400_not_a_500(
    client: FlaskClient, fake: ZkLikeFake, method: str, template: str, topic: str
) -> None:
    # kazoo raises "relative paths not allowed"; unchecked, the API answered 500. Werkzeug's
    # test client, like curl --path-as-is, sends the dots as they are.
    response = client.open(template.format(topic), method=method)
    assert response.status_code == 400
    if method != "HEAD":
        assert_json_error(response, 400)
    assert fake.calls == []


@settings(max_examples=150, deadline=None)
@given(
    topic=st.text(min_size=1, max_size=300),
    method=st.sampled_from(["GET", "DELETE", "HEAD"]),
    prefix=st.sampled_from(["/topics/", "/offset/"]),
)
def test_no_topic_in_a_path_makes_a_5xx_or_reaches_the_controller_invalid(topic: str, method: str, prefix: str) -> None:
    fake = ZkLikeFake()
    client = create_app(as_controller_api(fake)).test_client()
    if prefix == "/offset/" and method == "DELETE":
        method = "GET"
    response = client.open(prefix + urllib.parse.quote(topic, safe=""), method=method)
    assert response.status_code < 500
    for _name, args in fake.calls:
        assert args and isinstance(args[0], str) and args[0] not in (".", "..")


@pytest.mark.parametrize("route", ["", "src", "src.dst.x", "a b.c", "../x", "src/dst", "src.dst\n"])
def test_a_malformed_route_query_is_a_400(client: FlaskClient, fake: ZkLikeFake, route: str) -> None:
    for method in ("GET", "DELETE"):
        assert_json_error(client.open("/topics/orders", method=method, query_string={"route": route}), 400)
    assert fake.calls == []


@pytest.mark.parametrize(
    "body",
    [
        {"numPartitions": 2},
        {"topic": "."},
        {"topic": ".."},
        {"topic": "a/b"},
        {"topic": "x" * 250},
        {"topic": "orders\n"},
        {"topic": 7},
        {"topic": "orders", "numPartitions": True},
        {"topic": "orders", "numPartitions": "8"},
        {"topic": "orders", "numPartitions": 0},
        {"topic": "orders", "numPartitions": 2**31},
        {"topic": "orders", "numPartitions": 2.0},
        {"topic": "orders", "route": "nope"},
        {"topic": "orders", "route": ["src.dst"]},
        {"topic": "orders", "partitions": 3},
    ],
    ids=repr,
)
@pytest.mark.parametrize("method", ["POST", "PUT"])
def test_a_bad_body_field_is_a_400(client: FlaskClient, fake: ZkLikeFake, method: str, body: dict[str, Any]) -> None:
    assert_json_error(client.open("/topics", method=method, json=body), 400)
    assert fake.calls == []


@pytest.mark.parametrize(
    "body",
    [
        {"topics": []},
        {"topics": "orders"},
        {"topics": ["orders"]},
        {"topics": [{"topic": "."}]},
        {"topics": [{"topic": "orders", "numPartitions": 0}]},
        {"topics": [{"topic": "orders", "partitions": 8}]},
        {"topics": [{"numPartitions": 8}]},
        {"topics": [{"topic": "orders"}], "topic": "orders"},
        {"topics": [{"topic": "orders"}], "route": "nope"},
        {"topics": [{"topic": f"t{i}"} for i in range(1001)]},
    ],
    ids=lambda body: repr(body)[:60],
)
def test_a_bad_bulk_body_is_a_400(client: FlaskClient, fake: ZkLikeFake, body: dict[str, Any]) -> None:
    assert_json_error(client.post("/topics", json=body), 400)
    assert fake.calls == []


def test_a_bulk_post_is_one_call_with_every_topic(client: FlaskClient, fake: ZkLikeFake) -> None:
    answer = client.post(
        "/topics", json={"topics": [{"topic": "a", "numPartitions": 8}, {"topic": "b"}], "route": "src.dst"}
    )
    assert answer.status_code == 201
    assert fake.calls == [("add_topics", ([TopicSpec("a", 8), TopicSpec("b")], "src.dst"))]
    assert [t["topic"] for t in answer.get_json()["topics"]] == ["a", "b"]


def test_put_needs_num_partitions(client: FlaskClient, fake: ZkLikeFake) -> None:
    assert "numPartitions" in assert_json_error(client.put("/topics", json={"topic": "orders"}), 400)["error"]
    assert fake.calls == []


def test_a_huge_body_is_a_json_413(client: FlaskClient, fake: ZkLikeFake) -> None:
    assert_json_error(
        client.post("/topics", data='{"topic": "' + "x" * 100_000 + '"}', content_type="application/json"), 413
    )
    assert fake.calls == []


def test_a_partition_beyond_int32_is_a_404_not_a_500(client: FlaskClient, fake: ZkLikeFake) -> None:
    assert_json_error(client.get("/offset/orders/99999999999999999999"), 404)
    assert fake.calls == []


# -- request ids ----------------------------------------------------------------------------


def test_every_answer_carries_a_request_id(client: FlaskClient) -> None:
    ids = set()
    for method, url in [
        ("GET", "/health"),
        ("GET", "/topics"),
        ("GET", "/nowhere"),
        ("POST", "/topics"),
        ("PATCH", "/topics"),
        ("GET", "/openapi.json"),
        ("GET", "/metrics"),
    ]:
        response = client.open(url, method=method)
        ids.add(response.headers[REQUEST_ID_HEADER])
        if response.status_code >= 400:
            assert response.get_json()["requestId"] == response.headers[REQUEST_ID_HEADER]
    assert len(ids) == 7


@pytest.mark.parametrize(
    ("offered", "kept"),
    [
        ("abc-123", True),
        ("a" * 128, True),
        ("trace:1.2_3", True),
        ("a" * 129, False),
        ("bad id", False),
        ("-starts-with-dash", False),
        ("x\u00e9", False),
        ("", False),
    ],
)
def test_a_callers_request_id_is_kept_only_when_sane(client: FlaskClient, offered: str, kept: bool) -> None:
    got = client.get("/health", headers={REQUEST_ID_HEADER: offered}).headers[REQUEST_ID_HEADER]
    assert (got == offered) is kept
    assert got


# -- bearer tokens --------------------------------------------------------------------------


def checker(open_reads: bool = False) -> TokenChecker:
    return TokenChecker.from_config(
        RestAuthConfig(
            open_reads=open_reads,
            tokens=[
                RestTokenConfig(name="ops", role="write", value=WRITE_TOKEN),
                RestTokenConfig(name="dash", role="read", value=READ_TOKEN),
            ],
        )
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_closed_reads_need_a_token_and_writes_a_write_token(fake: ZkLikeFake) -> None:
    client = create_app(as_controller_api(fake), auth=checker(open_reads=False)).test_client()
    missing = client.get("/topics")
    assert_json_error(missing, 401)
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="ferry"'
    wrong = client.get("/topics", headers=bearer("not-the-token-0123456789"))
    assert_json_error(wrong, 401)
    assert 'error="invalid_token"' in wrong.headers["WWW-Authenticate"]
    assert_json_error(client.get("/topics", headers={"Authorization": f"Basic {WRITE_TOKEN}"}), 401)
    assert_json_error(client.get("/metrics"), 401)
    assert client.get("/topics", headers=bearer(READ_TOKEN)).status_code == 200
    assert client.get("/topics", headers=bearer(WRITE_TOKEN)).status_code == 200
    assert fake.calls == [("list_topics", ()), ("list_topics", ())]

    assert_json_error(client.post("/topics", json={"topic": "orders"}), 401)
    assert_json_error(client.post("/topics", json={"topic": "orders"}, headers=bearer("x" * 20)), 401)
    assert (
        "only read"
        in assert_json_error(client.post("/topics", json={"topic": "orders"}, headers=bearer(READ_TOKEN)), 403)["error"]
    )
    assert_json_error(client.delete("/topics/orders", headers=bearer(READ_TOKEN)), 403)
    assert_json_error(client.post("/instances", headers=bearer(READ_TOKEN)), 403)
    assert len(fake.calls) == 2
    assert client.post("/topics", json={"topic": "orders"}, headers=bearer(WRITE_TOKEN)).status_code == 201


def test_probes_and_the_document_never_need_a_token(fake: ZkLikeFake) -> None:
    client = create_app(as_controller_api(fake), auth=checker(open_reads=False)).test_client()
    for path in ("/health", "/health/ready", "/health/live", "/openapi.json"):
        assert client.get(path).status_code == 200, path


def test_open_reads_need_no_token_but_writes_do(fake: ZkLikeFake) -> None:
    client = create_app(as_controller_api(fake), auth=checker(open_reads=True)).test_client()
    assert client.get("/topics").status_code == 200
    assert client.get("/metrics").status_code == 200
    assert_json_error(client.post("/instances"), 401)
    assert_json_error(client.put("/topics", json={"topic": "o", "numPartitions": 2}, headers=bearer(READ_TOKEN)), 403)


def test_tokens_never_reach_the_log(fake: ZkLikeFake, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client = create_app(as_controller_api(fake), auth=checker()).test_client()
    fake.fail = RuntimeError("boom")  # the 500 path logs a traceback
    for token in (WRITE_TOKEN, READ_TOKEN, "wrong-token-0123456789"):
        client.post("/topics", json={"topic": "orders"}, headers=bearer(token))
        client.get("/topics", headers=bearer(token))
    assert caplog.records, "the requests above should have logged something"
    assert "ops" in caplog.text  # the token's name is logged
    for token in (WRITE_TOKEN, READ_TOKEN, "wrong-token-0123456789"):
        assert token not in caplog.text


def test_a_standby_forwards_the_callers_token_and_request_id(serve: Callable[[Flask], str]) -> None:
    seen: list[tuple[str | None, str | None]] = []
    recorder = Flask("recorder")

    @recorder.post("/instances")
    def record() -> Any:
        seen.append((request.headers.get("Authorization"), request.headers.get(REQUEST_ID_HEADER)))
        return {"rebalanced": True, "moved": 0}, 200

    standby = FakeController("standby", leading=False, leader={"id": "l", "rest_url": serve(recorder)})
    client = create_app(as_controller_api(standby), auth=checker()).test_client()
    response = client.post("/instances", headers={**bearer(WRITE_TOKEN), REQUEST_ID_HEADER: "fwd-1"})
    assert response.status_code == 200
    assert seen == [(f"Bearer {WRITE_TOKEN}", "fwd-1")]
    # The standby checks the token first: a bad one is never sent on.
    assert_json_error(client.post("/instances", headers=bearer(READ_TOKEN)), 403)
    assert len(seen) == 1


def test_tokens_come_from_a_value_a_file_or_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("file-secret-0123456789\n")
    monkeypatch.setenv("FERRY_TEST_TOKEN", "env-secret-0123456789")
    config = parse_config(
        {
            **CONFIG_BASE,
            "controller": {
                "auth": {
                    "tokens": [
                        {"name": "a", "value": "value-secret-0123456789"},
                        {"name": "b", "value": f"${{file:{tmp_path / 'token'}}}", "role": "read"},
                        {"name": "c", "value": "${env:FERRY_TEST_TOKEN}"},
                    ]
                }
            },
        }
    )
    assert config.controller.auth is not None
    tokens = load_tokens(config.controller.auth)
    assert [(t.name, t.role, t.secret) for t in tokens] == [
        ("a", "write", b"value-secret-0123456789"),
        ("b", "read", b"file-secret-0123456789"),
        ("c", "write", b"env-secret-0123456789"),
    ]
    assert "secret" not in repr(tokens) and "secret-0123456789" not in repr(config)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("${env:FERRY_TEST_UNSET_VARIABLE}", "controller.auth.tokens.0.value: .*is not set"),
        ("${file:/nonexistent/token}", "controller.auth.tokens.0.value: .*cannot read"),
    ],
)
def test_an_unusable_token_placeholder_is_a_config_error_naming_the_key(value: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem):
        parse_config({**CONFIG_BASE, "controller": {"auth": {"tokens": [{"name": "a", "value": value}]}}})


@pytest.mark.parametrize("value", ["short", "has spaces in it 0123456789"])
def test_an_unusable_token_is_a_config_error_that_does_not_show_it(value: str) -> None:
    with pytest.raises(ConfigError, match="at least 16") as caught:
        load_tokens(RestAuthConfig(tokens=[RestTokenConfig(name="a", value=value)]))
    assert "short" not in str(caught.value) and "spaces" not in str(caught.value)


CONFIG_BASE: dict[str, Any] = {
    "zookeeper": {"connect": "zk:2181"},
    "clusters": {"a": {"bootstrap.servers": "a:9092"}, "b": {"bootstrap.servers": "b:9092"}},
    "routes": [{"source": "a", "destination": "b"}],
}


def test_the_config_wants_a_value_per_token_and_hides_values() -> None:
    base = CONFIG_BASE
    with pytest.raises(ConfigError, match=r"tokens.0.value: Field required"):
        parse_config({**base, "controller": {"auth": {"tokens": [{"name": "x"}]}}})
    with pytest.raises(ConfigError, match="unique"):
        parse_config(
            {
                **base,
                "controller": {
                    "auth": {"tokens": [{"name": "x", "value": "A" * 20}, {"name": "x", "value": "B" * 20}]}
                },
            }
        )
    config = parse_config({**base, "controller": {"auth": {"tokens": [{"name": "x", "value": "hidden-0123456789"}]}}})
    assert "hidden-0123456789" not in repr(config)
    assert config.controller.auth is not None and config.controller.auth.open_reads is False
    assert parse_config(base).controller.auth is None  # off unless configured


# -- the OpenAPI document -------------------------------------------------------------------


def test_the_openapi_document_lists_every_route_and_method(fake: ZkLikeFake) -> None:
    app = create_app(as_controller_api(fake))
    document = app.test_client().get("/openapi.json").get_json()
    assert document["openapi"].startswith("3.")
    documented = {(path, method.upper()) for path, ops in document["paths"].items() for method in ops}
    served = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "static":
            continue
        path = (
            rule.rule.replace("<topic>", "{topic}")
            .replace("<group>", "{group}")
            .replace("<distributor>", "{distributor}")
            .replace("<worker>", "{worker}")
            .replace("<route>", "{route}")
            .replace(f"<int(max={2**31 - 2}):partition>", "{partition}")
        )
        served |= {(path, m) for m in rule.methods or () if m not in ("HEAD", "OPTIONS")}
    assert documented == served
    for ops in document["paths"].values():
        for op in ops.values():
            assert "default" in op["responses"] and op["security"] == []


@pytest.mark.parametrize(("auth", "open_reads"), [(False, True), (True, True), (True, False)])
def test_the_openapi_document_is_valid_openapi_3(auth: bool, open_reads: bool) -> None:
    schemathesis.openapi.from_dict(openapi_document(auth_enabled=auth, open_reads=open_reads)).validate()


def test_the_openapi_document_follows_the_auth_settings(fake: ZkLikeFake) -> None:
    closed = (
        create_app(as_controller_api(fake), auth=checker(open_reads=False))
        .test_client()
        .get("/openapi.json")
        .get_json()
    )
    opened = (
        create_app(as_controller_api(fake), auth=checker(open_reads=True)).test_client().get("/openapi.json").get_json()
    )
    assert closed["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": "a token from controller.auth.tokens",
    }
    for document, reads_need in ((closed, True), (opened, False)):
        paths = document["paths"]
        assert paths["/topics"]["post"]["security"] == [{"bearerAuth": []}]
        assert {"401", "403"} <= set(paths["/topics"]["post"]["responses"])
        for open_path in ("/health", "/health/ready", "/health/live", "/openapi.json"):
            assert paths[open_path]["get"]["security"] == [], open_path
        assert (paths["/topics"]["get"]["security"] == [{"bearerAuth": []}]) is reads_need
