"""Ferry's exceptions. Every error Ferry raises on purpose derives from :class:`FerryError`.

Two kinds, each package's own errors derive from one of them (and from the package's base):

- :class:`TransientError`: temporary; the same call may succeed later. It carries the delay after
  which to try again (``retry_after_s``, None: the caller's own backoff). Callers retry it with
  backoff and a deadline, never forever.
- :class:`PermanentError`: retrying changes nothing until someone changes something (a config, a
  topic, an ACL); it surfaces at once.

An error that is neither (a plain :class:`FerryError`) is permanent too.
"""

from __future__ import annotations


class FerryError(Exception):
    """Base of every error Ferry raises on purpose."""


class TransientError(FerryError):
    """Temporary: the same call may succeed later (a server restarting, a leader moving).

    ``retry_after_s``: when to try again, or None to let the caller's backoff decide.
    """

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class PermanentError(FerryError):
    """Retrying will not help until someone changes something; surfaces at once."""


class ConfigError(PermanentError):
    """A configuration file or value is invalid; the message names the key and the problem."""


class NewerLayoutError(PermanentError):
    """Ferry's state in ZooKeeper is in a layout newer than this Ferry knows: a newer release wrote it.
    Running on would misread it; the message names both releases."""


class UnreachableError(TransientError):
    """A server Ferry needs (ZooKeeper, a Kafka cluster, a schema registry, a controller) did not
    answer within its deadline; the message names the server and the deadline."""


class DevStackError(FerryError):
    """The local development stack could not be started, reached or stopped."""
