"""A config file shared by two releases: a key only the newer one knows stops the older one from starting,
unless the file declares a ``config_version`` newer than the older one knows; then the older one ignores each
such key with one warning naming it and the version, wherever it is (top level, a route, a nested section),
and ``ferry check`` shows them as warnings, not errors."""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferry import cli
from ferry.common.config import CONFIG_VERSION, load_config, parse_config
from ferry.common.errors import ConfigError
from ferry.common.preflight.config_check import check_data

pytestmark = pytest.mark.unit

BASE: dict[str, Any] = {
    "zookeeper": {"connect": "zk:2181"},
    "clusters": {"src": {"bootstrap.servers": "a:9092"}, "dst": {"bootstrap.servers": "b:9092"}},
    "routes": [{"source": "src", "destination": "dst", "include": ["orders"]}],
}
NEWER = CONFIG_VERSION + 1


def _with_newer_keys(version: int | None) -> dict[str, Any]:
    """BASE with keys this release does not know: at the top, in a route, in a nested section."""
    data = copy.deepcopy(BASE)
    if version is not None:
        data["config_version"] = version
    data["audit_trail"] = {"enabled": True}
    data["routes"][0]["priority"] = "high"
    data["controller"] = {"rest_port": 8100, "auth": {"tokens": [_token()], "rotate_s": 60}}
    return data


def _token() -> dict[str, str]:
    return {"name": "ops", "role": "write", "value": "0123456789abcdef0123"}


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "ferry.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("version", [None, CONFIG_VERSION])
def test_an_unknown_key_is_an_error_when_the_file_declares_no_newer_version(version: int | None) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_config(_with_newer_keys(version), origin="ferry.yaml")
    lines = str(raised.value).splitlines()
    assert lines[0] == "ferry.yaml is invalid:"
    assert sorted(lines[1:]) == [
        "  audit_trail: Extra inputs are not permitted",
        "  controller.auth.rotate_s: Extra inputs are not permitted",
        "  routes.0.priority: Extra inputs are not permitted",
    ]


def test_a_newer_version_has_each_unknown_key_ignored_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = _write(tmp_path, _with_newer_keys(NEWER))
    with caplog.at_level(logging.WARNING, logger="ferry.common.config.loading"):
        config = load_config(path)
        load_config(path)  # read again by the same process: no second warning
    assert config.routes[0].include == ["orders"]
    assert config.controller.rest_port == 8100 and config.controller.auth is not None
    assert config.config_version == NEWER
    warned = sorted(record.getMessage() for record in caplog.records)
    assert warned == [
        f"{path}: {key}: unknown to this Ferry (config_version {CONFIG_VERSION}); ignored, since the file "
        f"declares config_version {NEWER}"
        for key in ("audit_trail", "controller.auth.rotate_s", "routes.0.priority")
    ]


def test_the_file_itself_is_left_as_it_was() -> None:
    data = _with_newer_keys(NEWER)
    parse_config(data, origin="shared.yaml")
    assert data == _with_newer_keys(NEWER)


def test_a_newer_version_still_refuses_what_a_known_key_does_not_accept() -> None:
    data = _with_newer_keys(NEWER)
    data["routes"][0]["compression"] = "brotli"  # a known key, with a value this release does not know
    with pytest.raises(ConfigError, match=r"routes\.0\.compression: Input should be") as raised:
        parse_config(data, origin="ferry.yaml")
    assert "priority" not in str(raised.value)


@pytest.mark.parametrize("version", [0, "two", True])
def test_config_version_is_a_positive_whole_number(version: Any) -> None:
    data = {**copy.deepcopy(BASE), "config_version": version}
    with pytest.raises(ConfigError, match=r"config_version: "):
        parse_config(data, origin="ferry.yaml")


def test_a_clusters_properties_stay_librdkafkas_to_judge() -> None:
    """A cluster's entry is librdkafka's properties, passed through, never Ferry's keys: a newer version
    leaves nothing out there, and ``ferry check`` still names a property librdkafka does not know."""
    data = {**copy.deepcopy(BASE), "config_version": NEWER}
    data["clusters"]["src"]["bootstrap.servrs"] = "a:9092"
    warnings: list[str] = []
    config, problems = check_data(data, warnings=warnings)
    assert config is None and warnings == []
    assert [p for p in problems if p.startswith("clusters.src.bootstrap.servrs: ")], problems


def test_ferry_check_reports_ignored_keys_as_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _with_newer_keys(NEWER))
    assert cli.main(["check", "--config", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{path}: ok"
    assert sorted(out[1:]) == [
        f"WARN  {key}: unknown to this Ferry (config_version {CONFIG_VERSION}); ignored, since the file "
        f"declares config_version {NEWER}"
        for key in ("audit_trail", "controller.auth.rotate_s", "routes.0.priority")
    ]


def test_ferry_check_without_a_newer_version_names_the_unknown_keys_as_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, _with_newer_keys(None))
    assert cli.main(["check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "  routes.0.priority: Extra inputs are not permitted" in err.splitlines()
    assert "WARN" not in err
