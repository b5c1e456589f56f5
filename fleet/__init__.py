"""``ferry fleet``: Ferry's controllers and workers as containers on a Docker engine.

The package talks to Ferry only from outside: the Docker engine (``docker`` SDK) and the
controllers' REST API and the workers' ``/health`` over HTTP. It imports ``common`` (config,
errors) and never ``controller`` or ``worker`` (``.importlinter``).
"""
