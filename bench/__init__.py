"""``ferry bench``: the same workload through the broker ceiling, Ferry workers and MirrorMaker 2.

Only :mod:`common` is imported here; Ferry's worker and MirrorMaker 2 run as separate
processes, measured from outside (``/proc``), exactly like each other. See ``BENCHMARKS.md``.
"""
