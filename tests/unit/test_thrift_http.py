"""The Thrift HTTP transport's reading of answers (tms_hbase.storage.http.HttpChannel), byte by byte as a server
may send them: chunked and sized bodies, interim answers, a server that closes, and answers it must refuse."""

from __future__ import annotations

import pytest

from tms_hbase.storage.http import HttpChannel, HttpStatus, NotHttp


class Script:
    """A socket that answers each request with the next of ``answers``, ``step`` bytes per read at most."""

    host, port = "gw.example", 9090

    def __init__(self, *answers: bytes, step: int = 3) -> None:
        self.step = step
        self.answers = list(answers)
        self.pending = b""
        self.sent: list[bytes] = []
        self.opened = 1

    def open(self) -> None:
        self.opened += 1

    def close(self) -> None:
        self.pending = b""

    def is_open(self) -> bool:
        return True

    def write(self, buf: bytes) -> None:
        self.sent.append(buf)
        self.pending += self.answers.pop(0)

    def read(self, sz: int) -> bytes:
        if not self.pending:
            raise EOFError
        n = min(sz, self.step)
        data, self.pending = self.pending[:n], self.pending[n:]
        return data


def _call(channel: HttpChannel, request: bytes) -> bytes:
    channel.write(request)
    channel.flush()
    return channel.read(1 << 20)


@pytest.mark.parametrize("step", [3, 10, 1000])  # (reads that end inside a chunk, or with the next chunk's bytes)
def test_each_flush_is_one_post_and_the_body_is_the_reply(step: int) -> None:
    sock = Script(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\nT: 1\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nwxyz",
        step=step,
    )
    channel = HttpChannel(sock, 1000)
    assert _call(channel, b"one") == b"abcde"
    assert _call(channel, b"two") == b"wxyz"
    assert sock.sent[0].startswith(b"POST / HTTP/1.1\r\nHost: gw.example:9090\r\n")
    assert sock.sent[0].endswith(b"Content-Length: 3\r\n\r\none")
    channel.flush()  # nothing written: nothing sent
    assert len(sock.sent) == 2


def test_replies_of_calls_sent_one_after_another_are_read_in_order() -> None:
    channel = HttpChannel(
        Script(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na", b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nbcd"), 10
    )
    for request in (b"1", b"2"):
        channel.write(request)
        channel.flush()
    assert [channel.read(1), channel.read(2), channel.read(5)] == [b"a", b"bc", b"d"]
    with pytest.raises(NotHttp, match="ended before"):
        channel.read(1)


def test_a_connection_the_server_closes_is_opened_again_for_the_next_request() -> None:
    sock = Script(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\na",
        b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nb",
    )
    channel = HttpChannel(sock, 10)
    assert _call(channel, b"1") == b"a"
    assert sock.opened == 1
    assert _call(channel, b"2") == b"b"
    assert sock.opened == 2


def test_an_http_error_is_raised_with_its_status_and_what_it_said() -> None:
    channel = HttpChannel(Script(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 14\r\n\r\nUser not here\n"), 100)
    with pytest.raises(HttpStatus, match="HTTP 403: User not here") as info:
        _call(channel, b"x")
    assert info.value.status == 403
    kerberos = b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Negotiate\r\nContent-Length: 0\r\n\r\n"
    with pytest.raises(HttpStatus, match="SPNEGO"):
        _call(HttpChannel(Script(kerberos), 100), b"x")


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        (b"\x80\x01\x00\x02\x00\x00\x00\x01x\r\n", "not an HTTP answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n", "5000 bytes"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"),
        (b"HTTP/1.1 200 OK\r\n\r\nbody", "without a length"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"y" * 70000 + b"\r\n\r\n", "longer than"),
    ],
)
def test_answers_that_are_not_what_a_thrift_http_server_sends_are_refused(answer: bytes, says: str) -> None:
    with pytest.raises(NotHttp, match=says):
        _call(HttpChannel(Script(answer, step=1000), 1000), b"x")
