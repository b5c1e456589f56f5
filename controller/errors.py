"""The controller's exceptions: one base, :class:`ControllerError`, under Ferry's :class:`FerryError`.

Each carries the HTTP status the REST API answers with, so user mistakes never become a 500.
The 4xx ones are :class:`PermanentError` (the same request fails again); :class:`Unavailable`
(503) is a :class:`TransientError` (no leader yet, a cluster down: worth retrying).
"""

from __future__ import annotations

from ferry.common.errors import FerryError, PermanentError, TransientError


class ControllerError(FerryError):
    """Base of every error the controller raises on purpose."""

    status = 500


class BadRequest(ControllerError, PermanentError):
    """The request is malformed or asks for something impossible (400)."""

    status = 400


class NotFound(ControllerError, PermanentError):
    """A topic unknown to Ferry, or missing at the source (404)."""

    status = 404


class Conflict(ControllerError, PermanentError):
    """The topic is already mirrored (409)."""

    status = 409


class Unavailable(ControllerError, TransientError):
    """No leader right now, or a cluster cannot be reached; worth retrying (503)."""

    status = 503


class NotLeader(Unavailable):
    """This controller does not lead (any more); its write was refused by the fence."""


class Unauthorized(ControllerError, PermanentError):
    """No bearer token, or one the controller does not know (401, with ``WWW-Authenticate: Bearer``)."""

    status = 401

    def __init__(self, message: str, invalid_token: bool = False) -> None:
        super().__init__(message)
        self.invalid_token = invalid_token


class Forbidden(ControllerError, PermanentError):
    """A valid token whose role does not allow the request, e.g. a read token on a write (403)."""

    status = 403
