"""Ferry's exceptions. Every error Ferry raises on purpose derives from :class:`FerryError`.

``TransientError`` marks what is worth retrying (with backoff and a deadline);
anything else is permanent and surfaces at once.
"""

from __future__ import annotations


class FerryError(Exception):
    """Base of every error Ferry raises on purpose."""


class TransientError(FerryError):
    """Temporary: the same call may succeed later (a server restarting, a leader moving)."""


class ConfigError(FerryError):
    """A configuration file or value is invalid; the message names the key and the problem."""


class DevStackError(FerryError):
    """The local development stack could not be started, reached or stopped."""
