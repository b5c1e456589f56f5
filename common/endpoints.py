"""Where a controller or worker listens, and the URL it gives the others to reach it there.

A process binds one address (``controller.rest_host``, ``worker.metrics_host``) and advertises a
URL in ZooKeeper: the leader node's ``rest_url`` (where standbys forward writes) and a live
worker's ``metrics_url``. The two differ as soon as the bind address is a wildcard (``0.0.0.0``,
``::``): nobody can connect there. So that one config file serves every host and pod, each of
them can be set per process, an option first, then an environment variable, then the file:

=================================  ==========================  ================================
setting                            option                      environment variable
=================================  ==========================  ================================
``controller.rest_host``           ``--rest-host``             ``FERRY_REST_HOST``
``controller.advertised_url``      ``--advertised-url``        ``FERRY_ADVERTISED_URL``
``worker.metrics_host``            ``--metrics-host``          ``FERRY_METRICS_HOST``
``worker.advertised_metrics_url``  ``--advertised-metrics-url``  ``FERRY_ADVERTISED_METRICS_URL``
=================================  ==========================  ================================

Without an advertised URL one is derived from the bind address and the port; for a wildcard,
from this host's name: ``socket.getfqdn()``, else ``socket.gethostname()``, the first that
resolves and is not ``localhost``. The name lookups are injectable; everything else is pure.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from urllib.parse import urlsplit

from ferry.common.errors import ConfigError

REST_HOST_ENV = "FERRY_REST_HOST"
ADVERTISED_URL_ENV = "FERRY_ADVERTISED_URL"
METRICS_HOST_ENV = "FERRY_METRICS_HOST"
ADVERTISED_METRICS_URL_ENV = "FERRY_ADVERTISED_METRICS_URL"

# Bind addresses that mean "every interface": no one can connect to them from elsewhere.
WILDCARDS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})
# Names that every host resolves to itself: useless to the others.
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


def url_problem(value: str) -> str | None:
    """Why ``value`` is not an advertised URL (``http[s]://host[:port]``), or None when it is one."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError as exc:
        return f"{value!r} is not a URL: {exc}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{value!r} is not an http:// or https:// URL with a host"
    if parts.hostname in WILDCARDS:
        return f"{value!r} names a wildcard address no one can connect to"
    if parts.path.strip("/") or parts.query or parts.fragment:
        return f"{value!r} has a path; give only scheme, host and port"
    return None


def pick(
    option: str | None,
    env_name: str,
    configured: str | None,
    option_name: str,
    environ: Mapping[str, str] | None = None,
    url: bool = False,
) -> str | None:
    """The value in force: the command-line option, else the environment variable, else the file's.

    ``url``: the value is an advertised URL; a bad one from the option or the variable is a
    :class:`ConfigError` naming where it came from (the file's was checked when it was loaded).
    """
    environ = os.environ if environ is None else environ
    for value, origin in ((option, option_name), (environ.get(env_name), env_name)):
        if value:
            problem = url_problem(value) if url else None
            if problem:
                raise ConfigError(f"{origin}: {problem}")
            return value
    return configured


def host_url(scheme: str, host: str, port: int) -> str:
    """``scheme://host:port``, an IPv6 literal in brackets."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def _resolves(name: str) -> bool:
    try:
        return bool(socket.getaddrinfo(name, None))
    except (OSError, UnicodeError):
        return False


def host_name(
    names: tuple[Callable[[], str], ...] = (socket.getfqdn, socket.gethostname),
    resolves: Callable[[str], bool] = _resolves,
) -> str | None:
    """This host's first name that resolves and is not a loopback name, or None."""
    for name_of in names:
        name = name_of().strip()
        if name and name.lower() not in LOOPBACK_NAMES and resolves(name):
            return name
    return None


def advertised_url(
    scheme: str,
    bind_host: str,
    port: int,
    advertised: str | None,
    setting: str,
    find_host_name: Callable[[], str | None] = host_name,
) -> str:
    """The URL to advertise: ``advertised`` when given, else derived from the bind address.

    ``setting`` names the advertised-URL setting for the error raised when a wildcard bind
    address leaves nothing to derive from (no name of this host resolves).
    """
    if advertised:
        return advertised.rstrip("/")
    host = bind_host.strip()
    if host in WILDCARDS:
        name = find_host_name()
        if name is None:
            raise ConfigError(
                f"{bind_host or '(empty)'} is a wildcard bind address and no name of this host resolves: set {setting}"
            )
        host = name
    return host_url(scheme, host, port)


def local_url(scheme: str, bind_host: str, port: int) -> str:
    """How a command on this host reaches a server bound to ``bind_host``: a wildcard is the loopback."""
    host = bind_host.strip()
    if host in WILDCARDS:
        host = "::1" if ":" in host else "127.0.0.1"
    return host_url(scheme, host, port)
