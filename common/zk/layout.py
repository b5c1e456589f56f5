"""The one module that knows Ferry's ZooKeeper paths, and builds Ferry's kazoo clients.

Everything lives under the configured root (``zookeeper.root``)::

    <root>/layout                      LayoutMarker: the layout version and the Ferry that wrote it
    <root>/controller/election/        kazoo Election contenders; the lowest holds the lead
    <root>/controller/leader           ephemeral, leader's {"id", "rest_url"}
    <root>/controller/generation       last generation the leader stamped on assignments
    <root>/workers/live/<worker>       ephemeral, WorkerInfo: the worker is alive
    <root>/workers/state/<worker>      ephemeral, WorkerStatus: what the worker really copies
    <root>/assignments/<worker>        WorkerAssignment: what the worker must copy (leader writes)
    <root>/topics/<route>/<topic>      IdealState: partition -> worker (leader writes)
    <root>/external/<route>/<topic>    ExternalView: partition -> {worker, state} (leader writes)
    <root>/validation                  last `ferry validate --store` result: {ok, problems, counts, checkedAt}
    <root>/removed/<route>/<topic>     {"at": epoch s}: deleted through REST; never auto-whitelisted again
    <root>/controls/desired            Controls: paused partitions, cordoned workers, autobalancing, throttles
    <root>/controls/shares             worker -> route -> its part of the route's throttle (leader writes)
    <root>/failover/<route>            the route's failover state and report (controller/failover/document.py)
    <root>/source_ends/<route>         {"at", "ends", "rates"}: the leader's last-seen source log ends and their rates
    <root>/acls/<route>                the route's source ACL bindings as the leader's last ACL sync read them

``<route>`` is ``<source>.<destination>``. Payloads are JSON (see :mod:`common.model`).
Leader writes are fenced: they go in a transaction that also checks the leader's own election
node, so a controller that lost its session (and so its lead) cannot overwrite state.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient
from kazoo.handlers.utils import create_tcp_connection
from kazoo.protocol.serialization import Auth
from kazoo.protocol.states import KeeperState
from kazoo.retry import KazooRetry
from kazoo.security import ACL, READ_ACL_UNSAFE, make_digest_acl

from ferry.common.config import ZookeeperAuthConfig, ZookeeperConfig, ZookeeperTlsConfig
from ferry.common.errors import ConfigError, UnreachableError

# How often :func:`connect` looks at its stop event and its deadline while kazoo connects.
CONNECT_POLL_S = 0.1


@dataclass(frozen=True)
class ZkLayout:
    root: str

    def _join(self, *parts: str) -> str:
        base = "" if self.root == "/" else self.root
        return "/".join([base, *parts])

    @property
    def layout_marker(self) -> str:
        """The layout version of everything under the root (:class:`common.model.LayoutMarker`)."""
        return self._join("layout")

    # controller
    @property
    def election(self) -> str:
        return self._join("controller", "election")

    @property
    def leader(self) -> str:
        return self._join("controller", "leader")

    @property
    def generation(self) -> str:
        return self._join("controller", "generation")

    # workers
    @property
    def live_workers(self) -> str:
        return self._join("workers", "live")

    def live_worker(self, worker_id: str) -> str:
        return self._join("workers", "live", worker_id)

    @property
    def worker_states(self) -> str:
        return self._join("workers", "state")

    def worker_state(self, worker_id: str) -> str:
        return self._join("workers", "state", worker_id)

    @property
    def assignments(self) -> str:
        return self._join("assignments")

    def assignment(self, worker_id: str) -> str:
        return self._join("assignments", worker_id)

    # topics
    @property
    def topics(self) -> str:
        return self._join("topics")

    def route_topics(self, route: str) -> str:
        return self._join("topics", route)

    def topic(self, route: str, topic: str) -> str:
        return self._join("topics", route, topic)

    @property
    def external(self) -> str:
        return self._join("external")

    def route_external(self, route: str) -> str:
        return self._join("external", route)

    def external_topic(self, route: str, topic: str) -> str:
        return self._join("external", route, topic)

    @property
    def removed(self) -> str:
        return self._join("removed")

    def topic_start(self, route: str, topic: str) -> str:
        """Where a topic added with ``start`` (``POST /topics``) begins on the route, for as long as the
        route mirrors it; honoured only where nothing of the route is on the destination yet."""
        return self._join("starts", route, topic)

    def topic_starts(self, route: str) -> str:
        return self._join("starts", route)

    def removed_topic(self, route: str, topic: str) -> str:
        """A topic deleted through the REST API: the observer does not whitelist it again."""
        return self._join("removed", route, topic)

    # failover (controller/failover/states.py)
    @property
    def failovers(self) -> str:
        return self._join("failover")

    def failover(self, route: str) -> str:
        """The route's failover document (:mod:`controller.failover.document`); no node: the route is ACTIVE."""
        return self._join("failover", route)

    def source_ends(self, route: str) -> str:
        """The source log-end offsets the leader last saw on the route, for an unplanned failover's RPO."""
        return self._join("source_ends", route)

    def acl_bindings(self, route: str) -> str:
        """The route's source ACL bindings the leader's ACL sync last read, for a failover with the source gone."""
        return self._join("acls", route)

    # the distribution tree (common/core/tree.py)
    @property
    def tree_targets(self) -> str:
        """JSON ``{distributor: leaf}``: targets switched away from the config's (leader or operator)."""
        return self._join("tree", "targets")

    # an operator's controls (common/core/operate/controls.py)
    @property
    def controls(self) -> str:
        return self._join("controls", "desired")

    @property
    def throttle_shares(self) -> str:
        return self._join("controls", "shares")

    # pipeline
    @property
    def validation(self) -> str:
        return self._join("validation")

    def persistent_paths(self) -> list[str]:
        """The folders every participant may ``ensure_path`` at start."""
        return [self.election, self.live_workers, self.worker_states, self.assignments, self.topics, self.external]


def ferry_acl(auth: ZookeeperAuthConfig, user: str, password: str) -> list[ACL]:
    """The ACL of every node Ferry creates: Ferry's digest identity may do everything (including
    changing the ACL), anyone else may read (``others: read``) or nothing (``others: none``)."""
    acl = [make_digest_acl(user, password, all=True)]
    return acl + list(READ_ACL_UNSAFE) if auth.others == "read" else acl


class _HideDigest(logging.Filter):
    """Masks the digest in kazoo's DEBUG line for the authentication request it sends (its
    ``repr`` holds ``user:password``); every other record passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(arg, Auth) for arg in record.args):
            record.args = tuple(
                arg._replace(auth="**********") if isinstance(arg, Auth) else arg for arg in record.args
            )
        return True


_HIDE_DIGEST = _HideDigest()


def make_client(config: ZookeeperConfig, connect: str | None = None, reconnect_forever: bool = False) -> KazooClient:
    """A kazoo client whose operations retry connection loss with backoff until a deadline.

    ``retry_deadline_s`` bounds each command and, unless ``reconnect_forever`` (a worker: its
    exactly-once routes copy on through a ZooKeeper outage of any length), reconnecting.
    With ``zookeeper.auth`` the client authenticates with its digest on every (re)connection and
    every node it creates (``create``, ``ensure_path`` and its parents, transactions, kazoo's
    recipes) gets :func:`ferry_acl` as kazoo's ``default_acl``. This is the one place that builds
    Ferry's ZooKeeper clients, so controller, worker, ``ferry zk`` and ``ferry validate`` all do.
    With ``zookeeper.tls`` the client speaks TLS, checking the servers' certificates against its CA.
    Unusable credentials, and TLS files that cannot be read, raise :class:`common.errors.ConfigError`.
    """
    retry = {"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 2.0, "deadline": config.retry_deadline_s}
    secured: dict[str, Any] = {}
    if config.auth is not None:
        user, password = config.auth.credentials()
        for name in ("kazoo.client", "kazoo.protocol.connection"):  # the loggers kazoo's connection uses
            if _HIDE_DIGEST not in logging.getLogger(name).filters:
                logging.getLogger(name).addFilter(_HIDE_DIGEST)
        secured = {
            "auth_data": [("digest", f"{user}:{password}")],
            "default_acl": ferry_acl(config.auth, user, password),
        }
    if config.tls is not None:
        secured.update(_tls_options(config.tls))
    return KazooClient(
        hosts=connect or config.connect,
        timeout=config.session_timeout_s,
        connection_retry=KazooRetry(**{**retry, "deadline": None}) if reconnect_forever else KazooRetry(**retry),
        command_retry=KazooRetry(**retry),
        **secured,
    )


def _tls_options(tls: ZookeeperTlsConfig) -> dict[str, Any]:
    """kazoo's TLS arguments; a file that cannot be read is a ConfigError here, because kazoo would
    only retry it in its connection thread until the deadline."""
    unreadable = tls.unreadable()
    if unreadable:
        raise ConfigError("; ".join(unreadable))
    return {
        "use_ssl": True,
        "ca": tls.ca_location,
        "certfile": tls.certificate_location,
        "keyfile": tls.key_location,
        "keyfile_password": tls.key_password.get_secret_value() if tls.key_password is not None else None,
        "verify_certs": True,
        "check_hostname": tls.check_hostname,
    }


def connect(
    client: KazooClient,
    config: ZookeeperConfig,
    stop: threading.Event | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Starts ``client`` and waits until it is connected, at most ``zookeeper.retry_deadline_s``.

    True once connected. False when ``stop`` was set first: a SIGTERM while connecting ends the
    process at once instead of after the deadline. An unreachable ensemble raises
    :class:`common.errors.UnreachableError`, refused credentials or a TLS handshake that fails
    (``zookeeper.tls``: a server certificate its CA does not trust, a port that does not speak TLS)
    :class:`common.errors.ConfigError`;
    whenever it does not return True, the client is stopped and closed (kazoo's connection thread
    ends, nothing keeps the process alive).
    """
    if client.use_ssl:
        _check_tls(client, config)
    live = client.start_async()
    deadline = clock() + config.retry_deadline_s
    while not live.wait(CONNECT_POLL_S):
        refused = client.client_state == KeeperState.AUTH_FAILED
        stopped = stop is not None and stop.is_set()
        if not (refused or stopped or clock() >= deadline):
            continue
        client.stop()
        client.close()
        if refused:
            raise ConfigError(f"ZooKeeper at {config.connect} refused the credentials of zookeeper.auth")
        if stopped:
            return False
        raise UnreachableError(
            f"cannot reach ZooKeeper at {config.connect} within zookeeper.retry_deadline_s "
            f"({config.retry_deadline_s:g} s)"
        )
    return True


def _check_tls(client: KazooClient, config: ZookeeperConfig) -> None:
    """A TLS handshake with the first server that answers, as kazoo makes it; a failed one is a
    ConfigError, because kazoo would only retry it until the deadline and then report the ensemble
    as unreachable. A server that does not answer is left to kazoo."""
    options = {
        "use_ssl": True,
        "ca": client.ca,
        "certfile": client.certfile,
        "keyfile": client.keyfile,
        "keyfile_password": client.keyfile_password,
        "verify_certs": client.verify_certs,
        "check_hostname": client.check_hostname,
    }
    timeout = min(config.session_timeout_s, config.retry_deadline_s)
    for host, port in client.hosts:
        try:
            create_tcp_connection(socket, (host, port), hostname=host, timeout=timeout, **options).close()
            return
        except ssl.SSLCertVerificationError as exc:
            raise ConfigError(
                f"ZooKeeper at {host}:{port}: its TLS certificate is refused (zookeeper.tls): {exc.verify_message}"
            ) from None
        except ssl.SSLError as exc:
            raise ConfigError(f"ZooKeeper at {host}:{port}: TLS failed (zookeeper.tls): {exc.reason or exc}") from None
        except OSError:
            continue


def given_up(client: KazooClient) -> bool:
    """Whether kazoo stopped trying to reconnect: the connection was lost for longer than
    ``zookeeper.retry_deadline_s`` (its connection retry's deadline), or the client was stopped.

    A lost session is not that: kazoo reconnects with a new one. A process whose client gave up
    can do nothing more and should end, so that its supervisor starts it again.
    """
    return client.client_state == KeeperState.CLOSED


def lost(config: ZookeeperConfig) -> UnreachableError:
    """The error a process ends with once its client :func:`given_up`."""
    return UnreachableError(
        f"lost ZooKeeper at {config.connect} for longer than zookeeper.retry_deadline_s ({config.retry_deadline_s:g} s)"
    )
