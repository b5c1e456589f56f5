"""Fixtures of the unit tier: no servers of Ferry's own, only what a test starts in-process."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.serving import make_server

from ferry.controller.api.rest import create_app
from tests.fakes import FakeController, as_controller_api


@pytest.fixture
def serve() -> Iterator[Callable[[Flask], str]]:
    """Serves Flask apps on real local ports (one thread each); yields a function returning the URL."""
    servers = []

    def start(app: Flask) -> str:
        server = make_server("127.0.0.1", 0, app, threaded=True)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def fake() -> FakeController:
    """A controller's parts as the REST layer sees them, leading, recording what it is asked."""
    return FakeController()


@pytest.fixture
def client(fake: FakeController) -> FlaskClient:
    """The REST API over ``fake``, as Flask's test client."""
    return create_app(as_controller_api(fake)).test_client()
