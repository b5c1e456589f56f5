"""Ferry's optional parts: the extras of ``setup.cfg`` and the one line a command says without its own.

A worker or a controller needs none of them. The rest install with ``pip install
'kafka-ferry[EXTRA]'``:

- ``spark``: pyspark, for ``ferry validate`` and ``ferry audit`` (and a controller with
  ``controller.validation_interval_s`` > 0, which runs ``ferry validate``);
- ``chart``: matplotlib, for ``ferry audit --chart``;
- ``fleet``: the Docker SDK, for ``ferry fleet``;
- ``all``: every one of them.

Whether an extra is there is asked of the import system without importing anything
(``importlib.util.find_spec``), so the check itself stays cheap.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from ferry.common.errors import PermanentError

DISTRIBUTION = "kafka-ferry"
# Extra -> the top-level modules it provides.
EXTRAS: dict[str, tuple[str, ...]] = {"spark": ("pyspark",), "chart": ("matplotlib",), "fleet": ("docker",)}


class MissingExtra(PermanentError):
    """A command needs an extra that is not installed; the message says what to install."""


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken install, or a module blocked in sys.modules
        return False


def require(extra: str, command: str, installed: Callable[[str], bool] = _installed) -> None:
    """Raises :class:`MissingExtra` (one line: what to install) unless ``extra``'s modules are there."""
    missing = [module for module in EXTRAS[extra] if not installed(module)]
    if missing:
        raise MissingExtra(
            f"{command} needs the {extra} extra ({', '.join(missing)} is not installed): "
            f"pip install '{DISTRIBUTION}[{extra}]'"
        )


def needing(extra: str, command: str, func: Callable[[Any], int]) -> Callable[[Any], int]:
    """``func`` (a subcommand's ``func``), checking first that ``extra`` is installed."""

    def run(args: Any) -> int:
        require(extra, command)
        return func(args)

    return run
