"""Ferry: mirrors Apache Kafka topics between clusters.

Installed, Ferry's packages live under this one namespace (``ferry.common``, ``ferry.controller``,
``ferry.worker``, ``ferry.pipeline``, ``ferry.bench``, ``ferry.fleet``, ``ferry.devstack``), so they collide with no
other project's ``common``. In the source checkout each package is a top-level folder (one folder per
part of Ferry, as docs/design.md lays them out); ``ferry/<package>`` are relative symbolic links to
them, so one import name works in the checkout, in an editable install and in a wheel (which holds
the real files).
"""
