"""A Docker engine of Ferry's own: ``dockerd`` started by hand, and the SDK client to any engine.

There is no systemd on the machines Ferry is developed and tested on, so ``ferry fleet engine up``
starts Debian's ``dockerd`` itself with its own data root, exec root, pid file and unix socket,
all under one short directory (unix socket paths are limited to about 100 characters):
``$FERRY_DOCKER_DIR``, default ``/tmp/ferry-docker``.

States of that engine: ``down`` (no pid file, or its process is gone) -> ``starting`` (process
runs, socket not answering yet) -> ``up`` (``/_ping`` answers). ``up`` is idempotent: it starts
nothing when the socket already answers; ``down`` stops, by the pid file, only the ``dockerd``
that ``up`` started.

Which engine ``ferry fleet`` talks to: ``--engine URL``, else ``$DOCKER_HOST``, else this
engine's socket.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ferry.fleet.errors import EngineUnavailable

DEFAULT_DIR = "/tmp/ferry-docker"


@dataclass(frozen=True)
class EngineDirs:
    root: Path

    @property
    def socket(self) -> Path:
        return self.root / "docker.sock"

    @property
    def url(self) -> str:
        return f"unix://{self.socket}"

    @property
    def pidfile(self) -> Path:
        return self.root / "dockerd.pid"

    @property
    def log(self) -> Path:
        return self.root / "dockerd.log"


def dirs_from_env() -> EngineDirs:
    return EngineDirs(Path(os.environ.get("FERRY_DOCKER_DIR", DEFAULT_DIR)))


def default_url() -> str:
    return os.environ.get("DOCKER_HOST") or dirs_from_env().url


def connect(url: str | None = None, timeout_s: float = 120) -> Any:
    """A ``docker.DockerClient`` on ``url`` (default: :func:`default_url`) that answered a ping."""
    import docker
    from docker.errors import DockerException

    url = url or default_url()
    try:
        client = docker.DockerClient(base_url=url, timeout=int(timeout_s))
        client.ping()
    except (DockerException, OSError) as exc:
        raise EngineUnavailable(
            f"the Docker engine at {url} does not answer ({_short(exc)}); "
            "start one with `ferry fleet engine up` or pass --engine URL"
        ) from None
    return client


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__


def _pid(dirs: EngineDirs) -> int | None:
    try:
        pid = int(dirs.pidfile.read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid


def answers(dirs: EngineDirs) -> bool:
    """Whether this engine's socket answers a ping."""
    if not dirs.socket.exists():
        return False
    try:
        connect(dirs.url, timeout_s=5).close()
    except EngineUnavailable:
        return False
    return True


def up(
    dirs: EngineDirs | None = None,
    deadline_s: float = 60,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Starts ``dockerd`` unless its socket answers already; returns the engine's URL."""
    dirs = dirs or dirs_from_env()
    if answers(dirs):
        return dirs.url
    if len(str(dirs.socket)) > 100:
        raise EngineUnavailable(f"{dirs.socket} is too long for a unix socket; set FERRY_DOCKER_DIR to a short path")
    if _pid(dirs) is None:
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise EngineUnavailable(
                "dockerd is not installed: `apt-get install -y docker.io` (Debian), or run `make setup` as root"
            )
        dirs.root.mkdir(parents=True, exist_ok=True)
        for stale in (dirs.pidfile, dirs.socket):
            stale.unlink(missing_ok=True)
        with open(dirs.log, "ab") as log:
            subprocess.Popen(
                [
                    dockerd,
                    "--data-root",
                    str(dirs.root / "data"),
                    "--exec-root",
                    str(dirs.root / "exec"),
                    "--pidfile",
                    str(dirs.pidfile),
                    "-H",
                    dirs.url,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
    deadline = clock() + deadline_s
    while clock() < deadline:
        if answers(dirs):
            return dirs.url
        sleep(0.25)
    raise EngineUnavailable(f"dockerd did not answer on {dirs.socket} within {deadline_s:.0f} s; see {dirs.log}")


def down(
    dirs: EngineDirs | None = None,
    deadline_s: float = 60,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Stops the ``dockerd`` that :func:`up` started (by its pid file); False when none ran."""
    dirs = dirs or dirs_from_env()
    pid = _pid(dirs)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = clock() + deadline_s
    while clock() < deadline:
        if _pid(dirs) is None:
            return True
        sleep(0.25)
    raise EngineUnavailable(f"dockerd (pid {pid}) did not stop within {deadline_s:.0f} s")


def status(dirs: EngineDirs | None = None) -> dict[str, Any]:
    dirs = dirs or dirs_from_env()
    pid = _pid(dirs)
    state = "up" if answers(dirs) else ("starting" if pid else "down")
    return {"state": state, "pid": pid, "url": dirs.url, "log": str(dirs.log)}
