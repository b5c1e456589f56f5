"""The controller's command lines: the edge beside the REST API, at the top of the controller's layers.

Each module offers ``register(subparsers)`` (:mod:`ferry.cli` lists them) and imports what its command
runs inside the command, so parsing loads little: ``ferry controller`` (:mod:`.controller`), ``ferry check``
(:mod:`.check`), ``ferry groups`` and ``ferry offsets`` (:mod:`.groups`, :mod:`.offsets`: the checkpoint
code run once from the config, their ``--json`` the REST answers' shapes), and the commands that act
through a controller's REST API (:mod:`.operate`, :mod:`.schemas`, :mod:`.tree`, over :mod:`.rest_client`).
No other part of the controller imports this package (``.importlinter``).
"""
