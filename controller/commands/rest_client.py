"""How the commands that act through a controller's REST API reach it (``ferry pause|resume``,
``ferry workers``, ``ferry autobalancing``, ``ferry throttle``, ``ferry tree``, ``ferry schemas``).

Their options (:func:`add_options`): the controller is ``--url``, else the config's
``controller.rest_host``/``rest_port`` (``--config``; https with ``controller.tls``, whose CA or
certificate then verifies the controller; a wildcard host is the loopback). A bearer token, when the
API needs one, comes from the environment variable named by ``--token-env`` (default ``FERRY_TOKEN``).
Any controller will do: a standby forwards writes to the leader.

:meth:`ControllerClient.call` is the one place these commands call ``requests``: its failures are
:class:`ControllerCallError`, one line and exit status 2 for the user: no controller at the URL
(:class:`ControllerUnreachable`), or a refusal with its status and the controller's error
(:class:`ControllerRefused`).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import requests

from ferry.common import endpoints
from ferry.common.config import FerryConfig, load_config
from ferry.common.errors import ConfigError, FerryError

TOKEN_ENV = "FERRY_TOKEN"
TIMEOUT_S = 10.0


class ControllerCallError(FerryError):
    """A command's call to a controller failed: none answered, or it refused."""


class ControllerUnreachable(ControllerCallError):
    """No controller answered at ``url``; ``reason`` is what ``requests`` raised (its class name)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"no controller at {url}: {reason}")
        self.url = url
        self.reason = reason


class ControllerRefused(ControllerCallError):
    """The controller answered ``status`` >= 400; ``answer`` is its JSON (None when it sent none),
    ``text`` the first 200 characters of its body."""

    def __init__(self, status: int, answer: Any, text: str) -> None:
        self.status = status
        self.answer = answer
        self.text = text[:200]
        super().__init__(f"the controller answered {status}: {self.error}")

    @property
    def error(self) -> Any:
        """The controller's ``error`` when it answered a JSON object, else the start of its body."""
        return self.answer.get("error") if isinstance(self.answer, dict) else self.text


def add_options(
    parser: argparse.ArgumentParser,
    config_required: bool = False,
    config_help: str = "Ferry's YAML config file (for the controller's address)",
) -> None:
    """``--config``, ``--url`` and ``--token-env``: where the controller is and how to prove who is asking."""
    parser.add_argument("--config", required=config_required, help=config_help)
    parser.add_argument("--url", help="a controller's REST URL (default: from the config)")
    parser.add_argument("--token-env", default=TOKEN_ENV, help="environment variable holding a bearer token")


@dataclass(frozen=True, kw_only=True)
class ControllerClient:
    """One controller's REST API: its ``url`` (no trailing slash), the ``headers`` of every call,
    how its certificate is verified (``requests``' ``verify``) and how long a call may take."""

    url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    verify: bool | str = True
    timeout_s: float = TIMEOUT_S

    @classmethod
    def from_args(
        cls,
        args: argparse.Namespace,
        config: FerryConfig | None = None,
        timeout_s: float = TIMEOUT_S,
        environ: Mapping[str, str] | None = None,
    ) -> ControllerClient:
        """The client :func:`add_options`' options describe; ``config`` when the command has read it
        already (else it is read from ``--config`` when given). No ``--url`` and no config: a :class:`ConfigError`."""
        if config is None and args.config:
            config = load_config(args.config)
        rest = config.controller if config is not None else None
        if args.url:
            url = args.url
        elif rest is not None:
            url = endpoints.local_url("https" if rest.tls else "http", rest.rest_host, rest.rest_port)
        else:
            raise ConfigError("give the controller as --url URL or --config FILE")
        verify: bool | str = (rest.tls.ca_file or rest.tls.cert_file) if rest is not None and rest.tls else True
        token = (os.environ if environ is None else environ).get(args.token_env)
        headers = {"Accept": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
        return cls(url=url.rstrip("/"), headers=headers, verify=verify, timeout_s=timeout_s)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """The controller's JSON answer to ``method path`` (None when it answered no JSON), ``body``
        sent as JSON; :class:`ControllerUnreachable` or :class:`ControllerRefused` when it did not serve it."""
        try:
            response = requests.request(
                method,
                f"{self.url}{path}",
                json=body,
                headers=dict(self.headers),
                timeout=self.timeout_s,
                verify=self.verify,
            )
        except requests.RequestException as exc:
            raise ControllerUnreachable(self.url, type(exc).__name__) from None
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if response.status_code >= 400:
            raise ControllerRefused(response.status_code, answer, response.text)
        return answer
