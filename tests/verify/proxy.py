"""The TCP proxy of tests/tcp_proxy.py, surviving an upstream that refuses connections.

While HBase is down (the ``hbase`` fault), connecting upstream fails; the shared proxy's accept thread
would die of that and never accept again. Here such a client connection is closed instead (the client
sees a reset, as it would from a dead server) and the proxy goes on accepting. A connection that the
kernel connected to itself (the port is free and in the ephemeral range) counts as refused too.
"""

from __future__ import annotations

import socket
import threading

from ..tcp_proxy import TcpProxy, _Link


class RobustProxy(TcpProxy):
    refused = 0  # client connections closed because HBase refused the upstream connection

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
                if upstream.getsockname() == upstream.getpeername():  # TCP self-connect: nobody listens
                    upstream.close()
                    raise ConnectionRefusedError
            except OSError:
                self.refused += 1
                client.close()
                continue
            link = _Link(client, upstream)
            self.accepted += 1
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._replies, args=(link,), daemon=True).start()
