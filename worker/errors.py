"""The worker's exceptions: one base, :class:`WorkerError`, under Ferry's :class:`FerryError`.

A partition that cannot be copied fails with one of three types, which decide what happens to it
(``worker/copier.py``):

- :class:`PartitionStopped` (permanent): it stays in ERROR, reason reported, until unassigned.
- :class:`PartitionDeferred` (temporary): not started, or stopped in ERROR, and offered again
  after ``retry_after_s``, from its committed offset.
- :class:`ProducerFailed`: the route's producer is unusable (librdkafka's fatal error). It carries
  what the failure means for the record that met it (one of the two above); every other
  partition of the route stops the temporary way, and the producer is built anew when they are
  released.
"""

from __future__ import annotations

from ferry.common.errors import FerryError, PermanentError, TransientError


class WorkerError(FerryError):
    """Base of every error the worker raises on purpose."""


class RegistrationError(WorkerError):
    """The worker could not register in ZooKeeper (another live worker holds its id)."""


class PartitionStopped(WorkerError, PermanentError):
    """The partition cannot be copied until someone changes something (a topic, an ACL, a config)."""


class PartitionDeferred(WorkerError, TransientError):
    """The partition cannot be copied now, for a temporary reason; try again after ``retry_after_s``."""


class ProducerFailed(WorkerError):
    """The destination producer failed for good (librdkafka's fatal error): it must be built anew.

    ``record``: what the failure means for the record that met it.
    """

    def __init__(self, record: PartitionStopped | PartitionDeferred) -> None:
        super().__init__(str(record))
        self.record = record
