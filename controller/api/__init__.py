"""The REST edge: the Flask app, bearer-token auth, the JSON shapes (only this package and the CLIs import them), the OpenAPI document."""
