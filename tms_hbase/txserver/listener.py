"""The transaction server's listening socket: bound before the server claims anything, and never shared.

A server that cannot serve must not touch the edit log: its first append would fence the server
that does serve (``state_store.py``), leaving nobody to answer. So ``tms-admin tx serve`` binds and
listens first, and only then recovers the state from HBase.

thriftpy2's ``TServerSocket`` sets ``SO_REUSEPORT``, which lets a second server bind the same port
(the kernel then splits new connections between the two). Ours sets only ``SO_REUSEADDR``, so a
restarted server binds at once despite connections of its predecessor in TIME_WAIT, while binding a
port some other socket listens on fails (on Linux, ``SO_REUSEADDR`` never admits a second listener).
"""

from __future__ import annotations

import socket

from thriftpy2.transport import TServerSocket

from tms_hbase.errors import TmsError


class CannotListen(TmsError):
    """The transaction server could not bind or listen on its address; it claimed nothing in HBase."""


class ExclusiveServerSocket(TServerSocket):
    """A listening socket for thriftpy2's servers that no other socket can share.

    It binds in :meth:`listen`, once; thriftpy2's serve loop calls ``listen`` again, which is then a
    no-op (so the socket is bound before the serve thread exists, and errors reach the caller).
    """

    def __init__(self, host: str, port: int, backlog: int = 128) -> None:
        super().__init__(host=host, port=port, client_timeout=None, backlog=backlog)

    @property
    def address(self) -> str:
        """``host:port`` as bound (the real port when 0 was asked for)."""
        if self.sock is None:
            return f"{self.host}:{self.port}"
        host, port = self.sock.getsockname()[:2]
        return f"{host}:{port}"

    def listen(self) -> None:
        """Bind and listen, unless done already; CannotListen (one clear line) if the address is taken or bad."""
        if self.sock is not None:
            return
        sock = None
        try:
            family, kind, proto, _, address = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            sock = socket.socket(family, kind, proto)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(address)
            sock.listen(self.backlog)
        except OSError as exc:
            if sock is not None:
                sock.close()
            raise CannotListen(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc} "
                "(nothing was claimed in HBase; a server already running there keeps serving)"
            ) from None
        self.sock = sock


def listen(host: str, port: int) -> ExclusiveServerSocket:
    """A socket bound and listening on ``host:port``, exclusively; CannotListen if that fails."""
    listener = ExclusiveServerSocket(host, port)
    listener.listen()
    return listener
