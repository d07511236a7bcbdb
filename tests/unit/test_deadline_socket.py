"""The storage port's socket keeps every call's deadline while it changes its socket timeout only now and
then: a wait longer than the timeout last set, but within the deadline, is no error; a peer that never
answers, trickles bytes or never reads fails by the deadline (against a real server on loopback)."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from tms_hbase.storage.connection import DeadlineSocket

LIVENESS = 30.0  # a call that took this long waited for something else than its deadline (at any load)


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket], None]], DeadlineSocket]]:
    """Start a loopback server whose one connection ``handler`` serves; return a DeadlineSocket to it."""
    stop = threading.Event()
    servers: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(handler: Callable[[socket.socket], None]) -> DeadlineSocket:
        server = socket.create_server(("127.0.0.1", 0))
        servers.append(server)

        def run() -> None:
            conn, _ = server.accept()
            with conn:
                handler(conn)
                stop.wait(30)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)
        client = DeadlineSocket("127.0.0.1", server.getsockname()[1])
        client.deadline = time.monotonic() + 5
        client.open()
        return client

    yield start
    stop.set()
    for server in servers:
        server.close()
    for thread in threads:
        thread.join(5)


def test_an_answer_later_than_the_timeout_last_set_but_within_the_deadline_is_read(serve) -> None:
    def answer_late(conn: socket.socket) -> None:
        conn.recv(5)
        conn.recv(6)
        time.sleep(1.4)  # longer than the timeout the first call set, within the second call's deadline
        conn.sendall(b"late")

    sock = serve(answer_late)
    sock.deadline = time.monotonic() + 1.0
    sock.write(b"first")  # sets the socket's timeout to about 1 s
    # more than half of this deadline's time left: the socket keeps the 1 s timeout, which runs out first
    sock.deadline = time.monotonic() + 1.9
    sock.write(b"second")
    assert sock.read(10) == b"late"
    sock.close()


def test_a_peer_that_never_answers_fails_the_read_by_the_deadline(serve) -> None:
    sock = serve(lambda conn: None)
    sock.deadline = time.monotonic() + 3600  # a long timeout set on an earlier call
    sock.write(b"x")
    started = time.monotonic()
    sock.deadline = started + 0.5
    with pytest.raises(TimeoutError):
        sock.read(10)
    assert time.monotonic() - started >= 0.5  # not before the deadline
    assert time.monotonic() < started + LIVENESS, "the read waited for the earlier deadline"
    sock.close()


def test_a_trickling_peer_fails_the_read_by_the_deadline(serve) -> None:
    def trickle(conn: socket.socket) -> None:
        with contextlib.suppress(OSError):  # until the client gives up and closes
            for _ in range(100):
                conn.sendall(b"x")
                time.sleep(0.05)

    sock = serve(trickle)
    started = time.monotonic()
    sock.deadline = started + 0.6
    with pytest.raises(TimeoutError):  # a timeout per read would see every byte, then the end (no TimeoutError)
        while True:
            assert sock.read(10)
    sock.close()


def test_a_peer_that_never_reads_fails_the_write_by_the_deadline(serve) -> None:
    sock = serve(lambda conn: None)
    started = time.monotonic()
    sock.deadline = started + 0.5
    with pytest.raises(TimeoutError):
        sock.write(b"x" * (64 * 1024 * 1024))  # more than both sockets' buffers hold: without a deadline, for ever
    assert time.monotonic() - started >= 0.5  # not before the deadline
    sock.close()


def test_reads_and_writes_wait_in_the_kernel_not_in_a_poll_before_each(serve) -> None:
    """The socket is blocking with the kernel's timeouts at most the time left: Python polls before every
    read and write of a socket with a Python timeout (two system calls more per HBase call)."""

    def echo(conn: socket.socket) -> None:
        for _ in range(2):
            conn.sendall(conn.recv(4))

    sock = serve(echo)
    sock.deadline = time.monotonic() + 3
    sock.write(b"ping")
    assert sock.read(4) == b"ping"
    assert sock.sock is not None
    assert sock.sock.gettimeout() is None
    for option in (socket.SO_RCVTIMEO, socket.SO_SNDTIMEO):
        seconds, micros = struct.unpack("@ll", sock.sock.getsockopt(socket.SOL_SOCKET, option, 16))
        assert 0 < seconds + micros / 1e6 <= 3
    sock.deadline = None
    sock.write(b"ping")
    assert sock.read(4) == b"ping"
    assert sock.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, 16) == bytes(16)
