"""confluent-kafka's errors, unwrapped once.

librdkafka reports an error as a ``KafkaError`` (delivery reports, ``message.error()``); a failed
call raises ``KafkaException`` with the ``KafkaError`` as its first argument, except when
confluent-kafka's Python code raises one with a plain message. :func:`kafka_error` turns any of
these into a :class:`KafkaFailure`, with attributes instead of methods, the way confluent-kafka's
own ``error.py`` wraps them for its schema-registry and serializing clients.

Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException


@dataclass(frozen=True)
class KafkaFailure:
    """What went wrong, as librdkafka says it.

    ``code``: a ``KafkaError`` code (``KafkaError._FAIL`` when the error came without one);
    ``name``: its name (``TOPIC_ALREADY_EXISTS``); ``message``: the human text (``str()`` gives it);
    ``retriable``: librdkafka says the same call may succeed later; ``fatal``: the client (an
    idempotent producer) cannot go on and must be built anew.
    """

    code: int
    name: str
    message: str
    retriable: bool = False
    fatal: bool = False

    def __str__(self) -> str:
        return self.message


def kafka_error(error: BaseException | KafkaError) -> KafkaFailure:
    """The :class:`KafkaFailure` in ``error``: a ``KafkaException``, a ``KafkaError``, or anything else
    (then code ``_FAIL`` and its text)."""
    cause = error.args[0] if isinstance(error, KafkaException) and error.args else error
    if isinstance(cause, KafkaError):
        # A client that failed for good refuses every later call with _FATAL, without the fatal flag.
        fatal = bool(cause.fatal()) or cause.code() == KafkaError._FATAL
        return KafkaFailure(cause.code(), cause.name(), cause.str(), bool(cause.retriable()), fatal)
    return KafkaFailure(KafkaError._FAIL, "_FAIL", str(cause) or type(cause).__name__)
