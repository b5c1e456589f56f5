"""`ferry check` without --connect: every problem of a config at once (placeholders, schema,
cross-field checks, librdkafka's verdict on each cluster's properties), and every example config
of the docs passes it."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from ferry import cli
from ferry.common.preflight.config_check import check_data

REPO = Path(__file__).resolve().parents[2]
BASE: dict[str, Any] = {
    "zookeeper": {"connect": "zk:2181"},
    "clusters": {"src": {"bootstrap.servers": "a:9092"}, "dst": {"bootstrap.servers": "b:9092"}},
    "routes": [{"source": "src", "destination": "dst"}],
}


class AnyVariable(Mapping[str, str]):
    """An environment in which every variable is set (examples name variables of their own)."""

    def __getitem__(self, name: str) -> str:
        return "ferry:example-secret-0123456789"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _example_file(path: str) -> str:
    return "ferry:example-secret-0123456789\n"


def _fenced_yaml(path: Path) -> Iterator[tuple[str, Any]]:
    text = path.read_text()
    for match in re.finditer(r"```ya?ml\n(.*?)```", text, re.S):
        yield f"{path.relative_to(REPO)}:{text[: match.start()].count(chr(10)) + 1}", yaml.safe_load(match.group(1))


def _completed(fragment: dict[str, Any]) -> dict[str, Any]:
    """A docs fragment (only clusters, routes or a tree) inside a config that names its clusters."""
    data = {"zookeeper": {"connect": "zk:2181"}, **fragment}
    named = [end for route in data.get("routes", []) for end in (route["source"], route["destination"])]
    named += re.findall(r"[A-Za-z][A-Za-z0-9_-]*", data.get("tree", {}).get("layout", ""))
    data.setdefault("clusters", {name: {"bootstrap.servers": f"{name}:9092"} for name in dict.fromkeys(named)})
    if "routes" not in data and "tree" not in data:
        first, second = [*data["clusters"], "one", "other"][:2]  # a fragment of another section: none
        for name in (first, second):
            data["clusters"].setdefault(name, {"bootstrap.servers": f"{name}:9092"})
        data["routes"] = [{"source": first, "destination": second}]
    return data


def _examples() -> Iterator[Any]:
    for doc in sorted([*(REPO / "docs").glob("*.md"), REPO / "README.md"]):
        for where, data in _fenced_yaml(doc):
            full = isinstance(data, dict) and {"zookeeper", "clusters"} <= set(data)
            yield pytest.param(data if full else _completed(data), id=where + ("" if full else " (fragment)"))
    yield pytest.param(
        yaml.safe_load((REPO / "deploy" / "ferry.example.yaml").read_text()), id="deploy/ferry.example.yaml"
    )
    manifests = yaml.safe_load_all((REPO / "deploy" / "kubernetes" / "ferry.yaml").read_text())
    configmap = next(m for m in manifests if m and m["kind"] == "ConfigMap")
    yield pytest.param(yaml.safe_load(configmap["data"]["ferry.yaml"]), id="deploy/kubernetes/ferry.yaml")


@pytest.mark.parametrize("example", list(_examples()))
def test_every_example_config_in_the_docs_passes_the_check(example: Any) -> None:
    # Files the examples name (CA files, password files) are on their hosts, not here.
    config, problems = check_data(example, env=AnyVariable(), read_file=_example_file, local_files=False)
    assert problems == []
    assert config is not None


def test_the_full_examples_are_there() -> None:
    ids = [param.id for param in _examples()]
    assert any(i.startswith("docs/configuration.md") and "fragment" not in i for i in ids)
    assert "deploy/kubernetes/ferry.yaml" in ids


def test_check_reports_a_librdkafka_typo_a_bad_regex_and_an_unknown_cluster_together(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bad = {
        **BASE,
        "clusters": {
            "src": {"bootstrap.servers": "a:9092", "securty.protocol": "SSL"},
            "dst": {"bootstrap.servers": "b:9092", "compresion.type": "gzip", "linger.ms": "soon"},
        },
        "routes": [
            {"source": "src", "destination": "dst", "include": ["(unclosed"]},
            {"source": "src", "destination": "elsewhere"},
        ],
        "worker": {"producer": {"acks": "most"}},
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    assert cli.main(["check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ferry: {path} is invalid:\n")
    for line in [
        "routes.0.include: Value error, '(unclosed' is not a valid regular expression",
        "routes.1.destination: unknown cluster 'elsewhere' (known: ['dst', 'src'])",
        "clusters.src.securty.protocol: No such configuration property",
        "clusters.dst.compresion.type: No such configuration property",
        "clusters.dst.linger.ms: Invalid value 'soon'",
        "worker.producer.acks: Invalid value",
    ]:
        assert line in err
    assert "Traceback" not in err


def test_a_valid_config_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump(BASE))
    assert cli.main(["check", "--config", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok\n"


def test_a_refused_combination_names_the_cluster_and_the_role() -> None:
    config, problems = check_data(
        {
            **BASE,
            "clusters": {
                **BASE["clusters"],
                "dst": {
                    "bootstrap.servers": "b:9092",
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "SCRAM-SHA-512",
                },
            },
        }
    )
    assert config is None
    assert "clusters.dst: as a producer: sasl.username and sasl.password must be set" in problems


def test_a_cluster_in_no_route_is_checked_as_an_admin_client() -> None:
    _, problems = check_data(
        {
            **BASE,
            "clusters": {
                **BASE["clusters"],
                "reg": {"bootstrap.servers": "r:9092", "auto.commit.interval.ms": "x", "acks": "all"},
            },
        }
    )
    assert problems == ["clusters.reg.auto.commit.interval.ms: Invalid value 'x'"]


def test_cross_field_problems_are_all_reported() -> None:
    _, problems = check_data(
        {
            **BASE,
            "routes": [{"source": "nowhere", "destination": "dst"}, {"source": "src", "destination": "gone"}],
            "tree": {"layout": "(src,far)", "include": [".*"]},
            "schemas": {
                "primary": "src",
                "registries": {"src": {"url": "http://r:1"}, "remote": {"url": "http://r:2"}},
            },
        }
    )
    assert [p.split(":")[0] for p in problems] == [
        "routes.0.source",
        "routes.1.destination",
        "tree.layout",
        "schemas.registries",
    ]


def test_an_invalid_secret_value_is_not_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FERRY_TEST_MECHANISM", "HIDDEN-SECRET-VALUE")
    _, problems = check_data(
        {
            **BASE,
            "clusters": {
                **BASE["clusters"],
                "dst": {
                    "bootstrap.servers": "b:9092",
                    "security.protocol": "SASL_SSL",
                    "sasl.mechanism": "${env:FERRY_TEST_MECHANISM}",
                    "compression.type": "${env:FERRY_TEST_MECHANISM}",
                },
            },
        }
    )
    assert problems and not any("HIDDEN-SECRET-VALUE" in p for p in problems)


def test_a_token_the_controller_would_refuse_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text(
        yaml.safe_dump({**BASE, "controller": {"auth": {"tokens": [{"name": "ops", "value": "tiny-secret"}]}}})
    )
    assert cli.main(["check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "controller.auth: token 'ops' must be at least 16 characters" in err and "tiny-secret" not in err
