"""A TCP proxy one test process can cut: what "this worker cannot reach ZooKeeper, everything else can" takes.

:meth:`TcpProxy.cut` closes every connection through it and refuses new ones (a network partition
between the proxied client and the server); :meth:`TcpProxy.restore` lets them through again.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from ferry.devstack.support import free_port


class TcpProxy:
    """Forwards ``127.0.0.1:<port>`` to ``target``. States: OPEN --cut--> CUT --restore--> OPEN."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.port = free_port()
        self._target = (target_host, target_port)
        self._open = threading.Event()
        self._open.set()
        self._sockets: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._stopped = False
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        self._open.clear()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                    sock.close()
            self._sockets.clear()

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._stopped = True
        self.cut()
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._open.is_set():
                client.close()  # cut: the connection is refused at once
                continue
            try:
                server = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, server))
            for source, sink in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        for sock in (source, sink):
            with contextlib.suppress(OSError):
                sock.close()
