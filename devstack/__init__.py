"""The local stack and the support code of what runs Ferry from outside (bench, demo, tests).

`ferry dev up|down|status` registers from here. No runtime package (common, controller, worker,
pipeline) imports it (import-linter, ``.importlinter``): an installed controller or worker never
starts servers or reads the development jar folder through it.
"""
