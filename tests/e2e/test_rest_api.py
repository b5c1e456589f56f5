"""The REST API of real `ferry controller` processes: schemathesis against the OpenAPI document,
bearer tokens (open and closed reads, forwarding from a standby), TLS, and no token in any log.

No workers: every request here is about the API, not about copying.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.harness.processes import FerryProcess, Fleet, wait_until

WRITE_TOKEN = "e2e-write-token-5f0c1d2e3a4b"
READ_TOKEN = "e2e-read-token-9a8b7c6d5e4f"
WRONG_TOKEN = "e2e-wrong-token-000000000000"
# Examples per operation per controller. The document has 39 operations (with the 3 health probes, /schemas,
# /schemas/sync, /groups, /groups/{group}, /translate, /tree, /tree/{distributor}/target, /heartbeats, the 10 of
# the operator's controls and the 3 of failover); schemathesis loads /openapi.json itself and leaves it out of the
# 38 it tests.
# Operations without parameters have a single possible request, so most requests go to the ones with parameters.
POSITIVE_EXAMPLES = 60
NEGATIVE_EXAMPLES = 25
OPERATIONS_TESTED = 38
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def url_of(process: FerryProcess, scheme: str = "http") -> str:
    return f"{scheme}://127.0.0.1:{process.port}"


def wait_for_roles(
    fleet: Fleet, leader: FerryProcess, standby: FerryProcess, scheme: str = "http", verify: Any = True
) -> None:
    """Until ``leader`` leads and ``standby`` knows it (it forwards writes to it)."""

    def ready() -> bool:
        lead = requests.get(f"{url_of(leader, scheme)}/health", timeout=2, verify=verify).json()
        other = requests.get(f"{url_of(standby, scheme)}/health", timeout=2, verify=verify).json()
        return bool(lead["leader"] and not other["leader"] and other["leaderId"] == leader.name)

    wait_until(ready, 30, f"{leader.name} to lead and {standby.name} to follow it")


@pytest.fixture
def pair(fleet: Fleet) -> Callable[[dict[str, Any]], tuple[FerryProcess, FerryProcess]]:
    """Starts a leader, then a standby, with ``controller`` settings merged into the config."""

    def start(
        controller: dict[str, Any], scheme: str = "http", verify: Any = True
    ) -> tuple[FerryProcess, FerryProcess]:
        fleet.extra = {"controller": controller}
        fleet.write_config()
        leader = fleet.start_controller("c1")
        wait_until(
            lambda: requests.get(f"{url_of(leader, scheme)}/health", timeout=2, verify=verify).json()["leader"],
            30,
            "c1 to lead",
        )
        standby = fleet.start_controller("c2")
        wait_for_roles(fleet, leader, standby, scheme, verify)
        return leader, standby

    return start


def assert_no_token_in_logs(fleet: Fleet, *tokens: str) -> None:
    for process in fleet.processes:
        text = process.log.read_text(errors="replace")
        for token in tokens:
            assert token not in text, f"a token appears in {process.name}'s log"


def assert_dot_topics_are_400(base_url: str, headers: dict[str, str]) -> None:
    """Once 500s: kazoo refused the relative ZooKeeper path of topic '.' or '..'; now a 400 at the edge."""
    with requests.Session() as session:
        for method in ("GET", "HEAD", "DELETE"):
            for path in ("/topics/.", "/topics/..", "/offset/..", "/offset/./0"):
                prepared = session.prepare_request(requests.Request(method, base_url + path, headers=headers))
                prepared.url = base_url + path  # as is: requests would resolve the dots away
                if method == "DELETE" and path.startswith("/offset"):
                    continue
                response = session.send(prepared, timeout=10)
                assert response.status_code == 400, f"{method} {path}: {response.status_code} {response.text}"
                assert response.headers["X-Request-Id"]


def _exercise(
    operation: Any,
    mode: GenerationMode,
    examples: int,
    base_url: str,
    headers: dict[str, str],
    session: requests.Session,
    counts: dict[str, int],
) -> None:
    checks = CHECKS + ([negative_data_rejection] if mode is GenerationMode.NEGATIVE else [])

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def call(case: schemathesis.Case) -> None:
        response = case.call(base_url=base_url, session=session, headers=headers, timeout=15)
        counts["requests"] += 1
        family = f"{response.status_code // 100}xx"
        counts[family] = counts.get(family, 0) + 1
        case.validate_response(response, checks=checks)

    call()


def run_schemathesis(base_url: str, headers: dict[str, str]) -> dict[str, int]:
    """Every operation of the controller's own document, positive and negative data; returns counts."""
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    counts = {"requests": 0, "operations": 0}
    with requests.Session() as session:
        for result in schema.get_all_operations():
            operation = result.ok()
            counts["operations"] += 1
            _exercise(operation, GenerationMode.POSITIVE, POSITIVE_EXAMPLES, base_url, headers, session, counts)
            raw = operation.definition.raw
            if raw.get("parameters") or raw.get("requestBody"):  # else no data can be invalid
                _exercise(operation, GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES, base_url, headers, session, counts)
    return counts


def test_schemathesis_finds_no_5xx_and_conforming_answers_on_a_leader_and_a_standby(
    fleet: Fleet,
    pair: Callable[..., tuple[FerryProcess, FerryProcess]],
    tmp_path: Path,
) -> None:
    token_file = tmp_path / "write.token"
    token_file.write_text(WRITE_TOKEN + "\n")
    leader, standby = pair(
        {"auth": {"open_reads": True, "tokens": [{"name": "ops", "value": f"${{file:{token_file}}}"}]}}
    )
    assert requests.get(f"{leader.url}/topics", timeout=5).status_code == 200  # open reads: no token
    for process in (leader, standby):
        assert_dot_topics_are_400(process.url, bearer(WRITE_TOKEN))
    started = time.monotonic()
    totals: dict[str, int] = {}
    for process in (leader, standby):
        counts = run_schemathesis(process.url, bearer(WRITE_TOKEN))
        print(f"schemathesis on {process.name}: {counts}")
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + value
    print(
        f"schemathesis: {totals['requests']} requests in {time.monotonic() - started:.0f}s, "
        f"{totals.get('5xx', 0)} 5xx, {totals}"
    )
    assert totals["operations"] == 2 * OPERATIONS_TESTED
    assert totals["requests"] >= 1000
    assert totals.get("5xx", 0) == 0
    assert leader.alive() and standby.alive()
    assert_no_token_in_logs(fleet, WRITE_TOKEN)


def test_tokens_guard_reads_and_writes_and_follow_a_forwarded_write(
    fleet: Fleet,
    pair: Callable[..., tuple[FerryProcess, FerryProcess]],
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FERRY_E2E_WRITE_TOKEN", WRITE_TOKEN)
    leader, standby = pair(
        {
            "auth": {
                "open_reads": False,
                "tokens": [
                    {"name": "ops", "role": "write", "value": "${env:FERRY_E2E_WRITE_TOKEN}"},
                    {"name": "dashboard", "role": "read", "value": READ_TOKEN},
                ],
            }
        }
    )
    first, second = topic_name("auth-a"), topic_name("auth-b")
    create_topic("src", first, 2)
    create_topic("src", second, 2)

    for process in (leader, standby):
        assert requests.get(f"{process.url}/health", timeout=5).status_code == 200  # probes stay open
        assert requests.get(f"{process.url}/openapi.json", timeout=5).status_code == 200
        missing = requests.get(f"{process.url}/topics", timeout=5)
        assert missing.status_code == 401 and missing.headers["WWW-Authenticate"].startswith("Bearer")
        assert missing.json()["requestId"] == missing.headers["X-Request-Id"]
        assert requests.get(f"{process.url}/metrics", timeout=5).status_code == 401
        assert requests.get(f"{process.url}/topics", headers=bearer(WRONG_TOKEN), timeout=5).status_code == 401
        assert requests.get(f"{process.url}/topics", headers=bearer(READ_TOKEN), timeout=5).status_code == 200

        body = {"topic": first, "numPartitions": 2}
        assert requests.post(f"{process.url}/topics", json=body, timeout=10).status_code == 401
        assert (
            requests.post(f"{process.url}/topics", json=body, headers=bearer(WRONG_TOKEN), timeout=10).status_code
            == 401
        )
        assert (
            requests.post(f"{process.url}/topics", json=body, headers=bearer(READ_TOKEN), timeout=10).status_code == 403
        )

    # The standby forwards the write with the caller's token; the leader checks it again.
    created = requests.post(
        f"{standby.url}/topics",
        json={"topic": first, "numPartitions": 2},
        headers={**bearer(WRITE_TOKEN), "X-Request-Id": "e2e-forwarded-1"},
        timeout=15,
    )
    assert created.status_code == 201, created.text
    assert created.headers["X-Request-Id"] == "e2e-forwarded-1"
    created = requests.post(f"{leader.url}/topics", json={"topic": second}, headers=bearer(WRITE_TOKEN), timeout=15)
    assert created.status_code == 201, created.text
    listed = requests.get(f"{standby.url}/topics", headers=bearer(READ_TOKEN), timeout=5).json()["topics"]
    assert {t["topic"] for t in listed} >= {first, second}
    assert requests.delete(f"{standby.url}/topics/{second}", headers=bearer(WRITE_TOKEN), timeout=15).status_code == 200

    leader_log = leader.log.read_text(errors="replace")
    assert "e2e-forwarded-1" in leader_log and "token ops" in leader_log  # the audit line names the token
    assert_no_token_in_logs(fleet, WRITE_TOKEN, READ_TOKEN, WRONG_TOKEN)


@pytest.fixture
def self_signed(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    cert, key = tmp_path / "rest.crt", tmp_path / "rest.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=ferry-e2e",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    yield cert, key


def test_tls_serves_https_and_a_standby_forwards_over_it(
    fleet: Fleet,
    pair: Callable[..., tuple[FerryProcess, FerryProcess]],
    self_signed: tuple[Path, Path],
    create_topic: Callable[..., None],
    topic_name: Callable[[str], str],
) -> None:
    cert, key = self_signed
    leader, standby = pair(
        {
            "tls": {"cert_file": str(cert), "key_file": str(key)},
            "auth": {"open_reads": True, "tokens": [{"name": "ops", "value": WRITE_TOKEN}]},
        },
        scheme="https",
        verify=str(cert),
    )
    health = requests.get(f"{url_of(leader, 'https')}/health", timeout=5, verify=str(cert)).json()
    assert health["leaderUrl"] == url_of(leader, "https")
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(f"{url_of(leader, 'https')}/health", timeout=5)  # not trusted without the cert
    with pytest.raises(requests.exceptions.ConnectionError):
        requests.get(f"{leader.url}/health", timeout=5)  # plain http is not served

    topic = topic_name("tls")
    create_topic("src", topic, 1)
    denied = requests.post(f"{url_of(standby, 'https')}/topics", json={"topic": topic}, timeout=15, verify=str(cert))
    assert denied.status_code == 401
    created = requests.post(
        f"{url_of(standby, 'https')}/topics",
        json={"topic": topic},
        headers=bearer(WRITE_TOKEN),
        timeout=15,
        verify=str(cert),
    )
    assert created.status_code == 201, created.text
    assert created.json()["topic"] == topic
    assert_no_token_in_logs(fleet, WRITE_TOKEN)


@pytest.mark.parametrize(
    ("controller", "env", "problem"),
    [
        (
            {"auth": {"tokens": [{"name": "ops", "value": "${env:FERRY_E2E_UNSET_TOKEN}"}]}},
            {},
            "controller.auth.tokens.0.value: ${env:FERRY_E2E_UNSET_TOKEN}: "
            "the environment variable FERRY_E2E_UNSET_TOKEN is not set",
        ),
        (
            {"auth": {"tokens": [{"name": "ops", "value": "${env:FERRY_E2E_SHORT_TOKEN}"}]}},
            {"FERRY_E2E_SHORT_TOKEN": "tiny-secret"},
            "token 'ops' must be at least 16 characters",
        ),
        (
            {"tls": {"cert_file": "/nonexistent/rest.crt", "key_file": "/nonexistent/rest.key"}},
            {},
            "controller.tls: /nonexistent/rest.crt is not a readable file",
        ),
        (
            {"tls": {"cert_file": "{tmp}/garbage.pem", "key_file": "{tmp}/garbage.pem"}},
            {},
            "controller.tls: cannot use",
        ),
    ],
    ids=["unset-env", "short-token", "missing-cert", "garbage-cert"],
)
def test_a_controller_with_unusable_auth_or_tls_settings_exits_with_one_line(
    fleet: Fleet,
    tmp_path: Path,
    controller: dict[str, Any],
    env: dict[str, str],
    problem: str,
) -> None:
    (tmp_path / "garbage.pem").write_text("not a certificate\n")
    tls = controller.get("tls")
    if tls:
        controller = {"tls": {key: value.format(tmp=tmp_path) for key, value in tls.items()}}
    fleet.extra = {"controller": controller}
    fleet.write_config()
    result = subprocess.run(
        [sys.executable, "-m", "ferry.cli", "controller", "--config", str(fleet.config_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("ferry: ") and problem in result.stderr
    assert "Traceback" not in result.stderr
    assert "tiny-secret" not in result.stderr


def test_a_controller_whose_rest_port_is_taken_exits_with_one_line(fleet: Fleet) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "ferry.cli",
                "controller",
                "--config",
                str(fleet.config_path),
                "--rest-port",
                str(port),
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert f"ferry: cannot serve REST on 127.0.0.1:{port}" in result.stderr and "Traceback" not in result.stderr
