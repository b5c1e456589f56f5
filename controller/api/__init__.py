"""The REST edge: the Flask app and its blueprints, the edge's checks, bearer-token auth, the wire shapes
and the JSON answers (only this package and the CLIs import them), the OpenAPI document."""
