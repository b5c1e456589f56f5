"""The fleet package's errors: all of them are :class:`FleetError`, a :class:`FerryError`.

``ferry`` prints a ``FerryError`` as one line and exits with status 2, so bad input (an unknown
fleet, an engine that does not answer, a missing image) never shows a traceback.
"""

from __future__ import annotations

from ferry.common.errors import FerryError


class FleetError(FerryError):
    """Base of the fleet package's errors."""


class EngineUnavailable(FleetError):
    """The Docker engine does not answer (or cannot be started)."""


class FleetNotFound(FleetError):
    """No container carries the fleet's label."""


class ImageMissing(FleetError):
    """The image to run is not on the engine."""


class FleetTimeout(FleetError):
    """The fleet did not reach a state (leader elected, partitions ONLINE, drain) before a deadline."""
