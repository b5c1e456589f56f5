"""Ferry's batch data pipeline on Spark: ``ferry validate`` (is the replication state consistent?)
and ``ferry audit`` (did every source record reach the destination, once?).

Layering: imports :mod:`common` only, never ``controller`` or ``worker`` (``.importlinter``).
pyspark is imported lazily, inside functions, so loading the ``ferry`` CLI stays cheap.
"""

from ferry.common.errors import FerryError


class PipelineError(FerryError):
    """A Spark job could not run (no connector jars, unreachable cluster, bad arguments)."""
