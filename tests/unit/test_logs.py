"""Log output (common/logs.py): the JSON and text formats, context fields, librdkafka's messages, and
how the format is chosen (``--log-format`` before or after the subcommand, else ``logging.format``)."""

from __future__ import annotations

import argparse
import gc
import io
import json
import logging
import threading
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ferry.cli import build_parser
from ferry.common import logs
from ferry.common.config import parse_config
from ferry.common.errors import ConfigError
from ferry.common.kafka import clients as kafka_clients


@pytest.fixture
def json_logger() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger of its own writing JSON lines to a buffer, as ``--log-format json`` sets up the root's."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logs.formatter("json"))
    handler.addFilter(logs.ContextFilter())
    logger = logging.getLogger("ferry.test-logs")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, out
    logger.removeHandler(handler)


def _records(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_a_json_line_has_time_level_logger_message_and_extra_fields(
    json_logger: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = json_logger
    logger.warning(
        "route %s: %s/%s\nstopped",
        "src.dst",
        "orders",
        3,
        extra={"route": "src.dst", "topic": "orders", "partition": 3},
    )
    assert len(out.getvalue().splitlines()) == 1, "a newline in the message stays inside the JSON string"
    [record] = _records(out)
    assert record["level"] == "WARNING"
    assert record["logger"] == "ferry.test-logs"
    assert record["message"] == "route src.dst: orders/3\nstopped"
    assert (record["route"], record["topic"], record["partition"]) == ("src.dst", "orders", 3)
    assert record["time"].endswith("+00:00") and "T" in record["time"]
    assert "exception" not in record


def test_a_json_line_carries_the_exception_text(json_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = json_logger
    try:
        raise ValueError("bad offset")
    except ValueError:
        logger.exception("copy failed")
    [record] = _records(out)
    assert record["message"] == "copy failed"
    assert record["exception"].startswith("Traceback") and "ValueError: bad offset" in record["exception"]


def test_a_field_json_cannot_encode_is_written_as_its_text(json_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = json_logger
    logger.info("at %s", "x", extra={"path": Path("/tmp/f"), "message_id": b"\x00"})
    [record] = _records(out)
    assert record["path"] == "/tmp/f"


def test_a_context_field_never_replaces_the_lines_own_keys(json_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = json_logger
    with logs.context(level="mine", time="mine"):
        logger.info("hello")
    [record] = _records(out)
    assert record["level"] == "INFO" and record["time"] != "mine"


def test_context_fields_apply_inside_the_block_and_extra_wins(json_logger: tuple[logging.Logger, io.StringIO]) -> None:
    logger, out = json_logger
    token = logs.bind(worker="w1")
    try:
        with logs.context(route="a.b"):
            logger.info("inside")
            logger.info("own route", extra={"route": "c.d"})
        logger.info("after")
    finally:
        logs.unbind(token)
    logger.info("unbound")
    inside, own, after, unbound = _records(out)
    assert (inside["worker"], inside["route"]) == ("w1", "a.b")
    assert own["route"] == "c.d"
    assert after["worker"] == "w1" and "route" not in after
    assert "worker" not in unbound
    assert logs.current_fields() == {}


def test_a_logger_with_fields_adds_them_to_each_record_and_a_calls_extra_adds_more(
    json_logger: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, out = json_logger
    copier_log = logs.with_fields(logger, route="src.dst")
    copier_log.info("batch")
    copier_log.error("stopped", extra={"topic": "orders", "partition": 1})
    batch, stopped = _records(out)
    assert batch["route"] == "src.dst" and "topic" not in batch
    assert (stopped["route"], stopped["topic"], stopped["partition"]) == ("src.dst", "orders", 1)


def test_the_text_format_is_time_level_logger_message() -> None:
    record = logging.LogRecord("ferry.worker", logging.INFO, __file__, 1, "started %s", ("w1",), None)
    line = logs.formatter("text").format(record)
    assert line.endswith(" INFO ferry.worker: started w1")
    with pytest.raises(ValueError, match="unknown log format 'xml'"):
        logs.formatter("xml")


def test_librdkafkas_messages_are_records_of_the_librdkafka_logger_with_the_clients_fields(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bridge = logs.LibrdkafkaLog({"route": "src.dst", "worker": "w1"})
    with caplog.at_level(logging.INFO, logger=logs.LIBRDKAFKA_LOGGER):
        # What confluent-kafka calls: the level already mapped (librdkafka's 3 is ERROR), then
        # the facility, the client's name and the text.
        bridge.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#producer-1", "[thrd:b/bootstrap]: Connection refused")
        bridge.log(logging.DEBUG, "%s [%s] %s", "BROKER", "rdkafka#producer-1", "not shown at INFO")
    [record] = caplog.records
    assert record.name == "librdkafka" and record.levelno == logging.ERROR
    assert record.getMessage() == "FAIL [rdkafka#producer-1] [thrd:b/bootstrap]: Connection refused"
    assert (record.kafka_facility, record.kafka_client) == ("FAIL", "rdkafka#producer-1")  # type: ignore[attr-defined]
    assert (record.route, record.worker) == ("src.dst", "w1")  # type: ignore[attr-defined]


def test_every_client_gets_a_librdkafka_logger_with_the_fields_it_is_built_under() -> None:
    with logs.context(route="src.dst"):
        settings = kafka_clients.merged(kafka_clients.PRODUCER_DEFAULTS, {"bootstrap.servers": "b:9092"})
    assert isinstance(settings["logger"], logs.LibrdkafkaLog)
    assert settings["logger"].fields == {"route": "src.dst"}
    own = logging.getLogger("mine")
    assert kafka_clients.merged({"bootstrap.servers": "b:9092"}, {"logger": own})["logger"] is own


class _FakeAdmin:
    def __init__(self, fails: bool = False) -> None:
        self.polls: list[float] = []
        self.fails = fails

    def poll(self, timeout: float) -> int:
        self.polls.append(timeout)
        if self.fails:
            raise RuntimeError("a callback raised")
        return 0


def test_the_admin_log_server_polls_every_live_client_without_waiting(caplog: pytest.LogCaptureFixture) -> None:
    server = kafka_clients._AdminLogs(1.0)
    server._thread = object()  # type: ignore[assignment]  # no thread: this test serves by hand
    broken, kept, dropped = _FakeAdmin(fails=True), _FakeAdmin(), _FakeAdmin()
    for client in (broken, kept, dropped):
        server.add(client)  # type: ignore[arg-type]
    del client, dropped
    gc.collect()
    server.serve()
    assert kept.polls == [0] and broken.polls == [0], "one client's failure does not stop the others"
    assert len(server._clients) == 2, "a garbage-collected client drops out"
    assert "a callback raised" in caplog.text


# -- choosing the format ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["--log-format", "json", "worker", "--config", "f.yaml"],
        ["worker", "--config", "f.yaml", "--log-format", "json"],
        ["zk", "--log-format", "json", "--config", "f.yaml", "tree"],
        ["zk", "tree", "--config", "f.yaml", "--log-format", "json"],
    ],
)
def test_log_format_is_accepted_before_and_after_the_subcommand(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).log_format == "json"


def test_log_format_given_nowhere_is_none_so_the_config_decides() -> None:
    assert build_parser().parse_args(["worker", "--config", "f.yaml"]).log_format is None


def test_an_unknown_log_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(["--log-format", "xml", "worker", "--config", "f.yaml"])
    assert exit_.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err


def test_the_configs_logging_format_is_read_leniently(tmp_path: Path) -> None:
    config = tmp_path / "ferry.yaml"
    config.write_text("zookeeper: {connect: z}\nlogging:\n  format: json\n")
    assert logs.configured_format(config) == "json"
    config.write_text("logging: {format: xml}\n")
    assert logs.configured_format(config) is None, "load_config reports the bad value, in one line"
    config.write_text("logging: [\n")
    assert logs.configured_format(config) is None
    config.write_text("- a list\n")
    assert logs.configured_format(config) is None
    assert logs.configured_format(tmp_path / "missing.yaml") is None
    assert logs.configured_format(None) is None


@pytest.mark.parametrize(
    ("flag", "in_config", "chosen"),
    [
        ("text", "json", "text"),  # the flag wins
        (None, "json", "json"),
        (None, None, "text"),
    ],
)
def test_the_flag_wins_over_the_config_and_text_is_the_default(
    flag: str | None, in_config: str | None, chosen: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "ferry.yaml"
    config.write_text(f"logging: {{format: {in_config}}}\n" if in_config else "zookeeper: {connect: z}\n")
    configured: list[tuple[str, str]] = []
    monkeypatch.setattr(logs, "configure", lambda level, log_format: configured.append((level, log_format)))
    logs.setup(argparse.Namespace(log_level="DEBUG", log_format=flag, config=str(config)))
    assert configured == [("DEBUG", chosen)]


def test_the_config_key_takes_text_or_json_only() -> None:
    base = {
        "zookeeper": {"connect": "z:2181"},
        "clusters": {"a": {"bootstrap.servers": "a:9092"}, "b": {"bootstrap.servers": "b:9092"}},
        "routes": [{"source": "a", "destination": "b"}],
    }
    assert parse_config(base).logging.format == "text"
    assert parse_config({**base, "logging": {"format": "json"}}).logging.format == "json"
    with pytest.raises(ConfigError, match=r"logging\.format: Input should be 'text' or 'json'"):
        parse_config({**base, "logging": {"format": "xml"}})


@pytest.fixture
def fresh_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[], None]]:
    """Makes the root logger as in a fresh process, when called in the test (pytest adds its own
    handlers after the fixtures); everything is restored afterwards."""

    def clear() -> None:
        root = logging.getLogger()
        monkeypatch.setattr(root, "handlers", [])
        monkeypatch.setattr(root, "level", root.level)
        monkeypatch.setattr(threading, "excepthook", threading.excepthook)

    yield clear
    logging.captureWarnings(False)


def test_configure_writes_lines_of_the_format_to_the_stream(fresh_root: Callable[[], None]) -> None:
    fresh_root()
    out = io.StringIO()
    logs.configure("info", "json", stream=out)
    with logs.context(worker="w1"):
        logging.getLogger("ferry.worker.service").info("worker %s started", "w1")
    logging.getLogger("ferry.worker.service").debug("not at INFO")
    [record] = _records(out)
    assert (record["message"], record["worker"], record["level"]) == ("worker w1 started", "w1", "INFO")


def test_warnings_and_a_threads_uncaught_exception_keep_the_format(fresh_root: Callable[[], None]) -> None:
    fresh_root()
    out = io.StringIO()
    logs.configure("INFO", "json", stream=out)
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("an old setting", DeprecationWarning, stacklevel=1)

    def fail() -> None:
        raise RuntimeError("lost the partition")

    thread = threading.Thread(target=fail, name="copy-loop")
    thread.start()
    thread.join()
    warned, crashed = _records(out)
    assert warned["logger"] == "py.warnings" and "an old setting" in warned["message"]
    assert crashed["message"] == "uncaught exception in copy-loop" and crashed["level"] == "CRITICAL"
    assert "RuntimeError: lost the partition" in crashed["exception"]


def test_configure_leaves_a_configured_root_logger_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    handlers = list(root.handlers)
    assert handlers, "pytest's own handlers"
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    hook = threading.excepthook
    logs.configure("DEBUG", "json")
    assert root.handlers == handlers and threading.excepthook is hook


def test_process_fields_apply_to_every_thread_under_the_contexts(
    json_logger: tuple[logging.Logger, io.StringIO], monkeypatch: pytest.MonkeyPatch
) -> None:
    logger, out = json_logger
    monkeypatch.setattr(logs, "_process_fields", logs._NO_FIELDS)
    logs.set_process_fields(worker="w1")
    thread = threading.Thread(target=lambda: logger.info("from another thread"))
    thread.start()
    thread.join()
    with logs.context(worker="w2"):
        logger.info("in a context")
    other, own = _records(out)
    assert other["worker"] == "w1"
    assert own["worker"] == "w2"


def test_a_commands_last_error_line_is_a_json_record_in_json_format() -> None:
    record = json.loads(logs.error_line("ferry: cluster 'src' did not answer", "json"))
    assert record["level"] == "ERROR" and record["message"] == "ferry: cluster 'src' did not answer"
    assert logs.error_line("ferry: cluster 'src' did not answer", "text") == "ferry: cluster 'src' did not answer"
