"""The REST API's blueprints, one module per group of paths; :mod:`controller.api.rest` registers them all.

Each imports only the edge's leaves (:mod:`controller.api.edge`, :mod:`controller.api.checks`, the wire
shapes and :mod:`controller.api.rest_json`), never another blueprint (``.importlinter``).
"""
