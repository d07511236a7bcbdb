"""A TLS terminator for tests: serves TLS on 127.0.0.1 and forwards the plain bytes to an HBase Thrift gateway,
as stunnel, HAProxy or Envoy do in front of one in production (HBase's binary Thrift server has no TLS of its
own: its ``hbase.thrift.ssl.enabled`` is for the HTTP transport). Optionally it requires a client certificate.
Without a context it forwards plain TCP the same way (the benchmarks' baseline for its cost)."""

from __future__ import annotations

import contextlib
import selectors
import socket
import ssl
import threading


class TlsTerminator:
    """Accepts TLS connections with ``context`` (a server context: its certificate, maybe a client CA; None:
    plain TCP) on ``address`` and forwards each to ``target``; ``handshake_failures`` counts refused handshakes."""

    def __init__(self, target: tuple[str, int], context: ssl.SSLContext | None) -> None:
        self.target = target
        self.context = context
        self.handshake_failures = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._closed = threading.Event()
        self._links: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name="tls-accept").start()

    @property
    def address(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"{host}:{port}"

    def close(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            links, self._links = set(self._links), set()
        for sock in links:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True, name="tls-link").start()

    def _serve(self, raw: socket.socket) -> None:
        raw.settimeout(30)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            tls = raw if self.context is None else self.context.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError):
            self.handshake_failures += 1
            raw.close()
            return
        tls.settimeout(None)
        try:
            upstream = socket.create_connection(self.target, timeout=30)
        except OSError:
            tls.close()
            return
        upstream.settimeout(None)
        upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._lock:
            self._links |= {tls, upstream}
        try:
            self._pump(tls, upstream)
        except OSError:
            pass
        finally:
            for sock in (tls, upstream):
                with contextlib.suppress(OSError):
                    sock.close()

    @staticmethod
    def _pump(tls: socket.socket, upstream: socket.socket) -> None:
        """Forward both ways from one thread (an SSL socket is not to be read and written by two at once)."""
        with selectors.DefaultSelector() as selector:
            selector.register(tls, selectors.EVENT_READ)
            selector.register(upstream, selectors.EVENT_READ)
            while True:
                # bytes the TLS layer decrypted already do not make its socket readable
                pending = isinstance(tls, ssl.SSLSocket) and tls.pending()
                ready = [tls] if pending else [key.fileobj for key, _ in selector.select()]
                for sock in ready:
                    data = sock.recv(256 * 1024)  # type: ignore[union-attr]
                    if not data:
                        return
                    (upstream if sock is tls else tls).sendall(data)
