"""Ferry's log output: text lines (the default) or JSON lines, and librdkafka's logs through them.

``ferry --log-format text|json`` (or ``logging.format`` in the config; the flag wins) chooses the
format of every line on stderr:

- text: ``<time> <LEVEL> <logger>: <message>``, with the traceback, if any, on the lines below;
- json: one JSON object per line with ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``,
  ``exception`` (the traceback text) when there is one, and the context fields of the record.

Context fields say what a line is about: ``worker`` (the worker's id), ``route``, ``topic`` and
``partition``, and for librdkafka's lines ``kafka_facility`` and ``kafka_client``. They come from
``extra=`` on a logging call, from :func:`context` / :func:`bind` (a :mod:`contextvars` variable:
one thread's work, e.g. the worker's copy loop), from the fields a Kafka client was built under
(:class:`LibrdkafkaLog`), or from :func:`set_process_fields` (every thread: ``ferry worker``'s id),
in that order of precedence. Set them per batch or per partition, never per record.

librdkafka writes its own lines (``%4|...|FAIL|...``) to stderr unless a client has a ``logger``
setting: :mod:`common.kafka_clients` gives every client a :class:`LibrdkafkaLog`, so its messages
are records of the ``librdkafka`` logger, at the level confluent-kafka maps librdkafka's syslog
level to (0-2 CRITICAL, 3 ERROR, 4 WARNING, 5-6 INFO, 7 DEBUG).
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from contextvars import ContextVar, Token
from datetime import datetime, timezone
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal, TextIO

import yaml

LogFormat = Literal["text", "json"]
FORMATS: tuple[str, ...] = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
LIBRDKAFKA_LOGGER = "librdkafka"

# What a LogRecord has of its own: every other attribute came from extra= (or the context filter).
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}
# The JSON object's own keys: a context field of the same name does not replace them.
_JSON_KEYS = ("time", "level", "logger", "message", "exception", "stack")

_NO_FIELDS: Mapping[str, Any] = MappingProxyType({})
_context: ContextVar[Mapping[str, Any]] = ContextVar("ferry_log_context", default=_NO_FIELDS)
# Fields of every record of every thread (a process that is one worker: its id), under the context's.
_process_fields: Mapping[str, Any] = _NO_FIELDS


def set_process_fields(**fields: Any) -> None:
    """Adds ``fields`` to every record of every thread of this process (kazoo's and the HTTP
    server's too): for what the whole process is, e.g. ``ferry worker``'s ``worker=<id>``."""
    global _process_fields
    _process_fields = MappingProxyType({**_process_fields, **fields})


def current_fields() -> dict[str, Any]:
    """The context fields set by :func:`context` / :func:`bind` in this thread (a copy)."""
    return dict(_context.get())


@contextlib.contextmanager
def context(**fields: Any) -> Iterator[None]:
    """Adds ``fields`` to every record logged inside the ``with`` block (this thread only)."""
    token = _context.set({**_context.get(), **fields})
    try:
        yield
    finally:
        _context.reset(token)


def bind(**fields: Any) -> Token[Mapping[str, Any]]:
    """Adds ``fields`` to every later record of this thread, until :func:`unbind` with the token."""
    return _context.set({**_context.get(), **fields})


def unbind(token: Token[Mapping[str, Any]]) -> None:
    _context.reset(token)


class FieldsAdapter(logging.LoggerAdapter[logging.Logger]):
    """A logger whose records carry fixed fields; a call's own ``extra=`` adds to them (and wins)."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


def with_fields(logger: logging.Logger, **fields: Any) -> FieldsAdapter:
    """``logger`` with ``fields`` on every record (e.g. a route's copier: ``route=``)."""
    return FieldsAdapter(logger, fields)


class ContextFilter(logging.Filter):
    """Copies the context fields onto each record that does not have them already (``extra=`` wins)."""

    def filter(self, record: logging.LogRecord) -> bool:
        for fields in (_context.get(), _process_fields):
            for key, value in fields.items():
                if key not in record.__dict__:
                    setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (newlines in the message or traceback are escaped)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        for key, value in record.__dict__.items():
            if key not in _RECORD_ATTRIBUTES and key not in _JSON_KEYS and not key.startswith("_"):
                entry[key] = value
        return json.dumps(entry, default=str, ensure_ascii=False)


def formatter(log_format: str) -> logging.Formatter:
    """The formatter of ``log_format`` (``text`` or ``json``)."""
    if log_format == "json":
        return JsonFormatter()
    if log_format == "text":
        return logging.Formatter(TEXT_FORMAT)
    raise ValueError(f"unknown log format {log_format!r} (known: {', '.join(FORMATS)})")


def configured_format(config_path: str | Path | None) -> str | None:
    """``logging.format`` of the config file at ``config_path``, or None when it has none.

    Read before the command runs, so that its first line already has the format. Leniently: a file
    that cannot be read or parsed, or a value that is no format, gives None here; the command's own
    :func:`common.config.load_config` then reports the problem in one clear line.
    """
    if config_path is None:
        return None
    try:
        data = yaml.safe_load(Path(config_path).read_text())
    except (OSError, yaml.YAMLError, ValueError):
        return None
    section = data.get("logging") if isinstance(data, dict) else None
    value = section.get("format") if isinstance(section, dict) else None
    return value if value in FORMATS else None


def configure(level: str, log_format: str, stream: TextIO | None = None) -> None:
    """Sets up the root logger: ``level`` and one handler writing ``log_format`` lines to ``stream``
    (stderr); Python's warnings and an exception a thread did not catch become records too, so
    they keep the format. Like :func:`logging.basicConfig`, it does nothing when the root logger
    has handlers already (an embedding program, or pytest, configured logging)."""
    if logging.getLogger().handlers:
        return
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(formatter(log_format))
    handler.addFilter(ContextFilter())
    logging.basicConfig(level=level.upper(), handlers=[handler])
    logging.captureWarnings(True)
    threading.excepthook = _log_thread_exception


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit or args.exc_value is None:
        return  # what the default hook ignores too
    name = args.thread.name if args.thread is not None else "a thread"
    logging.getLogger("ferry").critical("uncaught exception in %s", name, exc_info=args.exc_value)


def setup(args: Any) -> str:
    """:func:`configure` from the ``ferry`` command line: ``--log-level``, ``--log-format`` (else the
    config's ``logging.format``, else text). Returns the format chosen."""
    log_format = getattr(args, "log_format", None) or configured_format(getattr(args, "config", None)) or "text"
    configure(args.log_level, log_format)
    return log_format


def error_line(message: str, log_format: str) -> str:
    """A command's last word on stderr: ``message`` as it is, or as one JSON record in ``json``."""
    if log_format != "json":
        return message
    record = logging.makeLogRecord({"name": "ferry", "levelno": logging.ERROR, "levelname": "ERROR", "msg": message})
    return formatter("json").format(record)


class LibrdkafkaLog:
    """The ``logger`` setting of a confluent-kafka client: its librdkafka messages become records of
    the ``librdkafka`` logger, with ``kafka_facility`` (e.g. ``FAIL``), ``kafka_client`` (e.g.
    ``rdkafka#producer-1``) and the context fields the client was built under (``fields``).

    confluent-kafka hands a client's messages over inside its ``poll()``/``consume()``/``flush()``
    (on the thread that calls them), as ``log(level, "%s [%s] %s", facility, client, text)`` with
    the level already mapped to :mod:`logging`'s.
    """

    def __init__(self, fields: Mapping[str, Any] | None = None) -> None:
        self._logger = logging.getLogger(LIBRDKAFKA_LOGGER)
        self._fields = dict(fields or {})

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self._fields)

    def log(self, level: int, msg: str, *args: Any, **kwargs: Any) -> None:
        if not self._logger.isEnabledFor(level):
            return
        extra = dict(self._fields)
        if len(args) == 3:
            extra["kafka_facility"], extra["kafka_client"] = args[0], args[1]
        self._logger.log(level, msg, *args, extra=extra)
