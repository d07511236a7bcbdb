"""The gateway benchmark's floor trial (bench/gateway_floor.py, bench/gateway_floor_servers.py): the ceiling's
arithmetic, its report, and what the servers read and answer. Pure code: no servers, no HBase."""

from __future__ import annotations

import io

import pytest

from bench.common import Result, Settings
from bench.gateway_floor import FLOORS, SIDES, ceiling, report, start, stop
from bench.gateway_floor_servers import FIXED_ANSWER, BareProtocol, Head, answer, parse_head, topic_of
from tms_hbase import TopicId
from tms_hbase.gateway_client import http1
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.rest import codec as rest


def _read(data: bytes) -> http1.Response:
    """The client's parser run over ``data`` as the blocking connection runs it."""
    stream, parser = io.BytesIO(data), http1.read_response("POST")
    try:
        need = next(parser)
        while True:
            need = parser.send(stream.readline(need.size) if need.line else stream.read(need.size))
    except StopIteration as done:
        return done.value


def test_ceiling_is_direct_over_direct_plus_floor() -> None:
    assert ceiling(0.73, 0.31) == pytest.approx(0.73 / 1.04)
    assert ceiling(1.0, 0.0) == 1.0
    # the goal of 0.7x needs a round trip of at most 3/7 of the direct publish
    assert ceiling(0.7, 0.3) == pytest.approx(0.7)


def test_report_prints_times_ceilings_and_goal_lines() -> None:
    result = Result("gateway", "t")
    times = {"uvicorn": [0.30, 0.35, 0.25], "bare": [0.20, 0.10, 0.15], "loop": [1.1, 1.2, 1.3], "thread": [0.9] * 3}
    times["asgi"] = [1.6]
    cpus = {server: [100.0, 200.0, 300.0] for server in SIDES}
    report(result, [0.7, 0.8, 0.9], [1.5, 1.6, 1.4], 650.0, times, cpus)
    ((columns, rows),) = result.tables
    assert columns[1] == "ms per publish (median)"
    assert rows[0] == ["direct (the library, no HTTP)", "0.80", "–", "–"]
    assert rows[1] == ["tms-gateway (measured)", "1.50", "650", "0.53×"]  # 0.8 / 1.5
    by_label = {row[0]: row for row in rows[2:]}
    assert by_label[SIDES["uvicorn"]] == [SIDES["uvicorn"], "0.30", "200", "0.73×"]  # 0.8 / (0.8 + 0.3)
    assert by_label[SIDES["bare"]] == [SIDES["bare"], "0.15", "200", "0.84×"]  # 0.8 / (0.8 + 0.15)
    assert by_label[SIDES["loop"]][3] == "0.67×"  # a publishing server: direct ÷ its time, 0.8 / 1.2
    assert by_label[SIDES["thread"]][3] == "0.89×"
    assert by_label[SIDES["asgi"]][3] == "0.50×"
    assert [(measured, met) for _, measured, met in result.goals] == [("0.73×", True), ("0.84×", True)]
    assert "uvicorn" in result.goals[0][0] and "bare" in result.goals[1][0]
    assert "0.800 ÷ (0.800 + 0.150) ms = 0.84× (bare protocol), 0.73× over uvicorn" in result.notes[0]
    assert result.samples["floor_bare"] == {"ms": times["bare"], "cpu_us": cpus["bare"]}


def test_a_floor_too_slow_for_the_goal_says_not_met() -> None:
    result = Result("gateway", "t")
    times = {server: [0.5] for server in SIDES}
    report(result, [0.7], [1.4], 700.0, times, {server: [0.0] for server in SIDES})
    assert [met for _, _, met in result.goals] == [False, False]  # 0.7 / 1.2 = 0.58


def test_the_fixed_answer_is_a_publish_answer_the_client_reads() -> None:
    response = _read(FIXED_ANSWER)
    assert (response.status, response.body, response.keep_alive) == (200, b"", True)
    assert rest.decode_published(response.headers["tms-published"]) == (1, 0)
    assert rest.decode_published(_read(answer(b"7:12")).headers["tms-published"]) == (7, 12)


def test_parse_head_reads_length_media_and_target() -> None:
    head = b"POST /v1/namespaces/ns/topics/t/publish HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n"
    assert parse_head(head.rstrip(b"\r\n")) == Head("/v1/namespaces/ns/topics/t/publish", 12, rest.AVRO)
    with_json = head + b"content-type: application/json; charset=utf-8"
    assert parse_head(with_json).media == rest.JSON
    assert parse_head(b"POST /x HTTP/1.1").content_length == 0
    with pytest.raises(ValueError, match="not a publish"):
        parse_head(b"GET /health HTTP/1.1")


def test_topic_of_takes_only_publish_paths() -> None:
    assert topic_of("/v1/namespaces/ns/topics/t/publish?ttl=5") == TopicId("ns", "t")
    for path in ("/v1/namespaces/ns/topics/t/poll", "/health", "/v1/namespaces/ns/topics/t"):
        with pytest.raises(ValueError, match="not a publish path"):
            topic_of(path)


class _Transport:
    """What the bare protocol writes, and whether it closed."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def close(self) -> None:
        self.closed = True


def test_bare_protocol_answers_each_request_once_its_body_is_in() -> None:
    protocol, transport = BareProtocol(None), _Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    request = b"POST /v1/namespaces/n/topics/t/publish HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
    protocol.data_received(request[:30])  # the head cut short
    protocol.data_received(request[30:-2])  # the body cut short
    assert transport.written == []
    protocol.data_received(request[-2:] + request + request[:10])  # the rest, a second request, a third begun
    assert transport.written == [FIXED_ANSWER, FIXED_ANSWER]
    assert bytes(protocol.buffer) == request[:10] and not transport.closed


@pytest.mark.parametrize("server", FLOORS)
def test_floor_servers_answer_the_gateway_client_over_keep_alive(server: str) -> None:
    proc, url = start(server, Settings(), "unused")
    try:
        with GatewayClient(url, timeout_seconds=30) as client:
            results = [client.publish(TopicId("n", "t"), [b"x" * 1024] * 100)]
            ((connection, _),) = client._pool._idle
            results += [client.publish(TopicId("n", "t"), [b"x" * 1024] * 100) for _ in range(2)]
            assert [c for c, _ in client._pool._idle] == [connection]  # the server kept it open for all three
        assert [(r.generation, r.position, r.count) for r in results] == [(1, 0, 100)] * 3
    finally:
        stop(proc)
    assert proc.returncode is not None
