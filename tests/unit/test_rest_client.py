"""The commands that act through a controller's REST API (``ferry pause``, ``workers``, ``autobalancing``,
``throttle``, ``tree``, ``schemas``) reach it through one client: where it is, the token, and every
failure as one line and exit status 2. Against a small Flask app on a local port, and a closed port."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask import Flask, Response, jsonify, request

from ferry.cli import main
from ferry.common.config import load_config
from ferry.common.errors import ConfigError
from ferry.controller.commands.rest_client import (
    ControllerCallError,
    ControllerClient,
    ControllerRefused,
    ControllerUnreachable,
    add_options,
)

pytestmark = pytest.mark.unit

CLOSED = "http://127.0.0.1:1"


def _controller(seen: list[dict[str, Any]]) -> Flask:
    """A stand-in controller: records each request, answers like the real one (JSON, errors as {"error"})."""
    app = Flask("controller")

    @app.route("/<path:path>", methods=["GET", "POST", "PUT"])
    def answer(path: str) -> Any:
        seen.append(
            {
                "method": request.method,
                "path": f"/{path}",
                "body": request.get_json(silent=True),
                "authorization": request.headers.get("Authorization"),
            }
        )
        if path == "topics/unknown/pause":
            return jsonify(error="topic unknown is not mirrored"), 404
        if path == "broken":
            return Response("<html>bad gateway</html>", status=502, mimetype="text/html")
        if path == "schemas":
            return jsonify(primary="src", targets=["dst"], subjects=[], inSync=True)
        return jsonify(path=f"/{path}", body=request.get_json(silent=True))

    return app


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_options(parser)
    return parser.parse_args(list(argv))


def _config(tmp_path: Path, controller: dict[str, Any]) -> str:
    path = tmp_path / "ferry.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "zookeeper": {"connect": "127.0.0.1:1"},
                "clusters": {"src": {"bootstrap.servers": "127.0.0.1:1"}, "dst": {"bootstrap.servers": "127.0.0.1:1"}},
                "routes": [{"source": "src", "destination": "dst"}],
                "controller": controller,
            }
        )
    )
    return str(path)


def test_the_url_option_wins_and_loses_its_trailing_slash() -> None:
    client = ControllerClient.from_args(_args("--url", "http://c:9000/"), environ={})
    assert client.url == "http://c:9000" and client.verify is True
    assert "Authorization" not in client.headers


def test_without_url_the_controller_is_the_configs_and_a_wildcard_host_the_loopback(tmp_path: Path) -> None:
    path = _config(tmp_path, {"rest_host": "0.0.0.0", "rest_port": 9123})
    assert ControllerClient.from_args(_args("--config", path), environ={}).url == "http://127.0.0.1:9123"
    # A config the command has read already is not read again.
    assert ControllerClient.from_args(_args(), load_config(path), environ={}).url == "http://127.0.0.1:9123"


def test_a_controller_with_tls_is_asked_over_https_verified_with_its_ca(tmp_path: Path) -> None:
    for name in ("ca.pem", "cert.pem", "key.pem"):
        (tmp_path / name).write_text("-")
    path = _config(
        tmp_path,
        {
            "rest_port": 9443,
            "tls": {
                "cert_file": str(tmp_path / "cert.pem"),
                "key_file": str(tmp_path / "key.pem"),
                "ca_file": str(tmp_path / "ca.pem"),
            },
        },
    )
    client = ControllerClient.from_args(_args("--config", path), environ={})
    assert client.url == "https://127.0.0.1:9443" and client.verify == str(tmp_path / "ca.pem")


def test_neither_url_nor_config_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^give the controller as --url URL or --config FILE$"):
        ControllerClient.from_args(_args(), environ={})


def test_the_token_comes_from_the_named_environment_variable(serve: Callable[[Flask], str]) -> None:
    seen: list[dict[str, Any]] = []
    url = serve(_controller(seen))
    client = ControllerClient.from_args(
        _args("--url", url, "--token-env", "OPS_TOKEN"), environ={"OPS_TOKEN": "s3cret"}
    )
    assert client.call("PUT", "/autobalancing", {"enabled": False}) == {
        "path": "/autobalancing",
        "body": {"enabled": False},
    }
    assert seen == [
        {"method": "PUT", "path": "/autobalancing", "body": {"enabled": False}, "authorization": "Bearer s3cret"}
    ]


def test_a_refusal_names_the_status_and_the_controllers_error(serve: Callable[[Flask], str]) -> None:
    client = ControllerClient(url=serve(_controller([])))
    with pytest.raises(ControllerRefused) as refused:
        client.call("POST", "/topics/unknown/pause", {})
    assert str(refused.value) == "the controller answered 404: topic unknown is not mirrored"
    assert refused.value.status == 404 and refused.value.error == "topic unknown is not mirrored"


def test_a_refusal_without_json_names_the_start_of_the_body(serve: Callable[[Flask], str]) -> None:
    with pytest.raises(ControllerRefused) as refused:
        ControllerClient(url=serve(_controller([]))).call("GET", "/broken")
    assert str(refused.value) == "the controller answered 502: <html>bad gateway</html>"
    assert refused.value.answer is None


def test_no_controller_is_named_with_its_url() -> None:
    with pytest.raises(ControllerUnreachable) as unreachable:
        ControllerClient(url=CLOSED, timeout_s=5).call("GET", "/workers/w1")
    assert str(unreachable.value) == f"no controller at {CLOSED}: ConnectionError"
    assert isinstance(unreachable.value, ControllerCallError)


def test_a_control_prints_the_controllers_answer(
    serve: Callable[[Flask], str], capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[dict[str, Any]] = []
    url = serve(_controller(seen))
    assert main(["pause", "--url", url, "orders", "0", "2", "--route", "src.dst"]) == 0
    assert seen[0]["path"] == "/topics/orders/pause" and seen[0]["body"] == {"partitions": [0, 2], "route": "src.dst"}
    assert '"path": "/topics/orders/pause"' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["pause", "unknown"], "ferry: the controller answered 404: topic unknown is not mirrored"),
        (["workers", "drain", "w1", "--url", CLOSED], f"ferry: no controller at {CLOSED}: ConnectionError"),
        (["autobalancing"], "ferry: give the controller as --url URL or --config FILE"),
    ],
)
def test_a_control_that_fails_is_one_line_and_exit_status_2(
    serve: Callable[[Flask], str], capsys: pytest.CaptureFixture[str], argv: list[str], line: str
) -> None:
    url = serve(_controller([]))
    given = argv if "--url" in argv or argv == ["autobalancing"] else [*argv, "--url", url]
    assert main(given) == 2
    assert capsys.readouterr().err.splitlines() == [line]


def test_schemas_keeps_its_own_words_for_a_controller_that_does_not_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _config(tmp_path, {"rest_port": 1})
    assert main(["schemas", "--config", path, "status"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"ferry: the controller at {CLOSED} did not answer: ConnectionError"
    ]


def test_schemas_reads_the_controllers_report(
    serve: Callable[[Flask], str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = serve(_controller([]))
    assert main(["schemas", "--config", _config(tmp_path, {}), "--url", url, "diff"]) == 0
    assert capsys.readouterr().out.strip() == "every subject of src is in sync on dst"


def test_tree_without_a_controller_prints_the_configured_tree_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tree.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "zookeeper": {"connect": "127.0.0.1:1"},
                "clusters": {"a": {"bootstrap.servers": "127.0.0.1:1"}, "b": {"bootstrap.servers": "127.0.0.1:1"}},
                "routes": [],
                "tree": {"layout": "(a,b)", "include": [".*"]},
                "controller": {"rest_port": 1},
            }
        )
    )
    assert main(["tree", "--config", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "a.L1" in out
    assert err.splitlines() == [
        f"ferry: no controller at {CLOSED} (ConnectionError): the tree above has the targets "
        "as configured, state unknown"
    ]
    assert main(["tree", "--config", str(path), "switch", "a.L1", "b"]) == 2
    assert capsys.readouterr().err.splitlines() == [f"ferry: no controller at {CLOSED}: ConnectionError"]
