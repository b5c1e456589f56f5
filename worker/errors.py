"""The worker's exceptions: one base, :class:`WorkerError`, under Ferry's :class:`FerryError`."""

from __future__ import annotations

from common.errors import FerryError


class WorkerError(FerryError):
    """Base of every error the worker raises on purpose."""


class RegistrationError(WorkerError):
    """The worker could not register in ZooKeeper (another live worker holds its id)."""
