"""A loopback TCP proxy for fault tests: forwards to HBase Thrift, and can cut, stall, lose replies,
trickle, reset, or answer bytes that are not Thrift."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from typing import Literal

Fault = Literal["hang", "trickle", "reset", "garbage", "huge"]

# What the proxy answers instead of forwarding a request, per fault:
ANSWERS: dict[str, bytes] = {
    # another service on the port (an HTTP server answering a request it does not understand)
    "garbage": b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
    # a Thrift reply header whose method name claims to be almost 2 GiB long
    "huge": struct.pack(">iI", -2147418110, 0x7FFFFFF0),
}
TRICKLE_INTERVAL = 1.0  # seconds between two bytes of a trickled reply


class _Link:
    """One proxied connection: the client's socket, the upstream socket, and a pending loss."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client, self.upstream = client, upstream
        self.lose_next_reply = False
        self.hung = False  # it swallowed a request while ``sticky``: it swallows every later one too

    def close(self) -> None:
        for sock in (self.client, self.upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def reset(self) -> None:
        """Close the client's side with a TCP reset (RST) instead of an orderly close."""
        with contextlib.suppress(OSError):
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.client.close()
        self.upstream.close()


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``.

    ``cut()`` drops every open connection; ``stall = True`` swallows requests (a hung server);
    ``lose_reply_to(b"checkAndPut")`` lets the next request naming that Thrift method reach HBase
    but cuts the connection instead of delivering its reply (a lost response).

    ``sticky``: a connection that swallowed a request goes on swallowing after the fault is lifted (a server
    hung on that connection), while new connections are served.

    ``delay`` holds each request that many seconds before forwarding it (a write stays in flight a while).

    ``fault`` applies to every request from now on, on open and new connections alike: ``"hang"``
    swallows it, ``"trickle"`` forwards it and delivers the reply one byte per second, ``"reset"``
    resets the connection, ``"garbage"`` answers an HTTP error, ``"huge"`` answers a Thrift header
    announcing a 2 GiB string. None forwards normally again.

    ``aim``: the delay and the faults other than ``"trickle"`` apply only to requests containing these bytes,
    so that they land on the requests a test targets and not on a client's background reads (its doorbell
    refresh, say).
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.stall = False
        self.delay = 0.0  # seconds each request is held before it is forwarded (a slow link)
        self.fault: Fault | None = None
        self.aim: bytes | None = None  # delay and fault apply to requests containing these bytes only (None: all)
        self._lose: bytes | None = None
        self._swallow: bytes | None = None
        self._stall_after_loss = False
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._closed = False
        self.replies_lost = 0
        self.accepted = 0
        self.requests = 0  # chunks of request bytes received from clients (forwarded or not)
        self.swallowed = 0  # of those, the ones a hang swallowed (counted once the fault has landed)
        self.sticky = False  # a connection that swallowed a request stays hung when the fault is lifted
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def lose_request_to(self, method: bytes) -> None:
        """Swallow the next request naming ``method`` (it never reaches HBase) and hang from then on."""
        self._swallow = method

    def lose_reply_to(self, method: bytes, then_stall: bool = False) -> None:
        """Lose the reply to the next request naming ``method``; with ``then_stall``, hang afterwards."""
        self._lose = method
        self._stall_after_loss = then_stall

    def cut(self) -> None:
        """Close every connection now open (both sides), as a network failure would."""
        with self._lock:
            links, self._links = self._links, []
        for link in links:
            link.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            link = _Link(client, socket.create_connection(self.target))
            self.accepted += 1
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._replies, args=(link,), daemon=True).start()

    def _requests(self, link: _Link) -> None:
        try:
            while data := link.client.recv(65536):
                self.requests += 1
                fault, delay = self.fault, self.delay
                if self.aim is not None and self.aim not in data:
                    fault, delay = None, 0.0
                if self._swallow is not None and self._swallow in data:
                    self._swallow, self.stall = None, True
                if self.stall or fault == "hang" or link.hung:
                    link.hung = link.hung or self.sticky
                    self.swallowed += 1
                    continue
                if fault == "reset":
                    link.reset()
                    return
                if fault in ANSWERS:
                    link.client.sendall(ANSWERS[fault])
                    continue
                if delay:
                    time.sleep(delay)
                if self._lose is not None and self._lose in data:
                    self._lose = None
                    link.lose_next_reply = True
                link.upstream.sendall(data)
        except OSError:
            pass

    def _replies(self, link: _Link) -> None:
        try:
            while data := link.upstream.recv(65536):
                if link.lose_next_reply:
                    self.replies_lost += 1
                    self.stall = self.stall or self._stall_after_loss
                    link.close()
                    return
                if self.fault == "trickle":
                    for i in range(len(data)):
                        link.client.sendall(data[i : i + 1])
                        time.sleep(TRICKLE_INTERVAL)
                else:
                    link.client.sendall(data)
        except OSError:
            pass
