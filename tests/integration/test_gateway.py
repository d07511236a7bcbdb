"""The gateway as clients use it: the real ``tms-gateway`` process (2 workers) on loopback against the real
HBase, driven by httpx, an HTTP client independent of ours, with Avro bodies built from CDAP's own
schemas (copied below from CDAP's TMS design; docs/design.md#the-rest-api) and JSON bodies built by hand; and by
``tms_hbase.gateway_client.http.GatewayClient`` side by side with direct library access."""

from __future__ import annotations

import base64
import io
import json
import re
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import httpx
import pytest

from tms_hbase import MessagingClient, RollbackDetail, TopicId, TopicMetadata
from tms_hbase.errors import TmsError
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.model.published import PublishResult
from tms_hbase.tx import Transaction, TransactionCodec, write_pointer_now

from ..gateway_server import GatewayProcess, module_gateway

ROOT = Path(__file__).resolve().parents[2]
AVRO, JSON = "avro/binary", "application/json"
OCTETS = {"Content-Type": "application/octet-stream"}
LIMIT = 64 * 1024  # max_batch_bytes of this module's gateway
POLL_CAP = 50  # max_poll_messages of this module's gateway

# CDAP's schemas, as CDAP's TMS design prints them.
CDAP_PUBLISH_REQUEST = fastavro.parse_schema(
    {
        "type": "record",
        "name": "PublishRequest",
        "fields": [
            {"name": "transactionWritePointer", "type": ["long", "null"]},
            {"name": "messages", "type": {"type": "array", "items": "bytes"}},
        ],
    }
)
CDAP_CONSUME_REQUEST = fastavro.parse_schema(
    {
        "type": "record",
        "name": "ConsumeRequest",
        "fields": [
            {"name": "startFrom", "type": ["bytes", "long", "null"]},
            {"name": "inclusive", "type": "boolean", "default": True},
            {"name": "limit", "type": ["int", "null"]},
            {"name": "transaction", "type": ["bytes", "null"]},
        ],
    }
)
CDAP_MESSAGES = fastavro.parse_schema(
    {
        "type": "array",
        "items": {
            "type": "record",
            "name": "Message",
            "fields": [{"name": "id", "type": "bytes"}, {"name": "payload", "type": "bytes"}],
        },
    }
)


gateway = module_gateway(f"workers = 2\nmax_batch_bytes = {LIMIT}\nmax_poll_messages = {POLL_CAP}\n")


@pytest.fixture
def ns() -> str:
    """A namespace of this test's own (the module's tests share one gateway and its tables)."""
    return f"n{uuid.uuid4().hex[:10]}"


class Wire:
    """Request and response bodies in one media type, built independently of the gateway's codecs."""

    def __init__(self, media: str) -> None:
        self.media = media
        self.headers = {"Content-Type": media}

    def publish(self, messages: list[bytes], pointer: int | None = None) -> bytes:
        if self.media == AVRO:
            return _avro(CDAP_PUBLISH_REQUEST, {"transactionWritePointer": pointer, "messages": messages})
        return json.dumps({"transactionWritePointer": pointer, "messages": [_b64(m) for m in messages]}).encode()

    def consume(
        self,
        start: bytes | int | None = None,
        inclusive: bool = True,
        limit: int | None = None,
        tx: bytes | None = None,
    ) -> bytes:
        if self.media == AVRO:
            record = {"startFrom": start, "inclusive": inclusive, "limit": limit, "transaction": tx}
            return _avro(CDAP_CONSUME_REQUEST, record)
        data = {"startFrom": _b64(start) if isinstance(start, bytes) else start, "inclusive": inclusive}
        data |= {"limit": limit, "transaction": None if tx is None else _b64(tx)}
        return json.dumps(data).encode()

    def messages(self, response: httpx.Response) -> list[tuple[bytes, bytes]]:
        """(id, payload) pairs of a poll response, which must be in this media type."""
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == self.media
        if self.media == AVRO:
            buffer = io.BytesIO(response.content)
            records = fastavro.schemaless_reader(buffer, CDAP_MESSAGES, None)
            assert buffer.tell() == len(response.content), "CDAP's Message array must be all there is"
            return [(r["id"], r["payload"]) for r in records]
        return [(base64.b64decode(r["id"]), base64.b64decode(r["payload"])) for r in response.json()]


@pytest.fixture(params=[AVRO, JSON], ids=["avro", "json"])
def wire(request: pytest.FixtureRequest) -> Wire:
    return Wire(request.param)


def _avro(schema: object, record: object) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, schema, record)
    return out.getvalue()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def topic_url(ns: str, topic: str, action: str = "") -> str:
    return f"/v1/namespaces/{ns}/topics/{topic}" + (f"/{action}" if action else "")


def assert_error(response: httpx.Response, status: int, error: str) -> None:
    """An error response: the status, the error class in TMS-Error, one line of plain text."""
    assert response.status_code == status, response.text
    assert response.headers["tms-error"] == error
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text.endswith("\n") and response.text.count("\n") == 1 and len(response.text) > 5


def payloads(pairs: list[tuple[bytes, bytes]]) -> list[bytes]:
    return [payload for _, payload in pairs]


def tx_seeing(pointer: int, *, in_progress: bool = False, invalid: bool = False) -> bytes:
    """TransactionCodec bytes of a reader transaction started after ``pointer``, to which ``pointer`` is
    still in progress, invalid, or committed."""
    read = pointer + 10
    return TransactionCodec.encode(
        Transaction(
            read_pointer=read,
            tx_id=read + 1,
            invalids=[pointer] if invalid else [],
            in_progress=[pointer] if in_progress else [],
            first_short_in_progress=pointer if in_progress else 2**63 - 1,
        )
    )


def create(http: httpx.Client, ns: str, topic: str) -> None:
    assert http.put(topic_url(ns, topic)).status_code == 200


# -- topics --------------------------------------------------------------------------------------


def test_topic_lifecycle(http: httpx.Client, ns: str) -> None:
    created = http.put(topic_url(ns, "orders"))
    assert created.status_code == 200 and created.headers["content-type"] == JSON
    seq = {"generation": 1, "ordering": "sequencer"}  # the default ordering, outside the properties
    assert created.json() == {"name": "orders", "properties": {"ttl": "604800"}, **seq}
    assert_error(http.put(topic_url(ns, "orders"), json={"ttl": 5}), 409, "TopicAlreadyExists")
    assert http.get(topic_url(ns, "orders")).json()["properties"] == {"ttl": "604800"}  # unchanged

    for bad in ('{"ttl": 0}', '{"ttl": "soon"}', "not json", '["ttl"]', '{"generation": "7"}'):
        assert_error(http.put(topic_url(ns, "audit"), content=bad), 400, "InvalidArgument")
    assert_error(http.get(topic_url(ns, "audit")), 404, "TopicNotFound")  # nothing was created
    assert http.put(topic_url(ns, "audit"), json={"ttl": 3600}).json()["properties"] == {"ttl": "3600"}

    updated = http.put(topic_url(ns, "orders", "properties"), json={"ttl": 60, "owner": "ops"})
    assert updated.json() == {"name": "orders", "properties": {"owner": "ops", "ttl": "60"}, **seq}  # kept
    chain = http.put(topic_url(ns, "ledger"), json={"ordering": "chain"}).json()
    assert chain == {"name": "ledger", "properties": {"ttl": "604800"}, "generation": 1, "ordering": "chain"}
    changed = http.put(topic_url(ns, "ledger", "properties"), json={"ordering": "sequencer"})
    assert_error(changed, 400, "InvalidArgument")  # fixed for the generation
    assert http.delete(topic_url(ns, "ledger")).status_code == 200
    assert http.get(topic_url(ns, "orders")).json() == updated.json()
    replaced = http.put(topic_url(ns, "orders", "properties"), json={"ttl": 120})  # the REST API replaces them all
    assert replaced.json()["properties"] == {"ttl": "120"} == http.get(topic_url(ns, "orders")).json()["properties"]
    assert_error(http.put(topic_url(ns, "nope", "properties"), json={"ttl": 60}), 404, "TopicNotFound")
    assert_error(http.put(topic_url(ns, "orders", "properties"), json={"ttl": -1}), 400, "InvalidArgument")
    assert http.get(f"/v1/namespaces/{ns}/topics").json() == ["audit", "orders"]

    assert http.delete(topic_url(ns, "orders")).status_code == 200
    assert_error(http.delete(topic_url(ns, "orders")), 404, "TopicNotFound")
    assert_error(http.get(topic_url(ns, "orders")), 404, "TopicNotFound")
    assert http.get(f"/v1/namespaces/{ns}/topics").json() == ["audit"]
    assert http.put(topic_url(ns, "orders")).json()["generation"] == 2

    assert_error(http.get(topic_url(ns, "bad.name")), 400, "InvalidArgument")
    assert_error(http.get("/v1/namespaces/bad.ns/topics"), 400, "InvalidArgument")
    assert http.get("/v1/nothing/here").status_code == 404
    assert http.post(topic_url(ns, "orders")).status_code == 405


# -- publish and poll ----------------------------------------------------------------------------


def test_publish_and_poll(http: httpx.Client, wire: Wire, ns: str) -> None:
    create(http, ns, "t")
    first = http.post(topic_url(ns, "t", "publish"), content=wire.publish([b"a", b"b"]), headers=wire.headers)
    assert first.status_code == 200 and first.content == b""  # non-transactional: empty body
    assert http.post(topic_url(ns, "t", "publish"), content=wire.publish([b"c"]), headers=wire.headers).is_success

    def poll(**kwargs: Any) -> list[tuple[bytes, bytes]]:
        body = wire.consume(**kwargs)
        return wire.messages(http.post(topic_url(ns, "t", "poll"), content=body, headers=wire.headers))

    everything = poll()
    assert payloads(everything) == [b"a", b"b", b"c"]
    ids = [mid for mid, _ in everything]
    assert ids == sorted(ids) and all(len(i) <= 20 for i in ids)
    assert payloads(poll(start=ids[0], inclusive=False)) == [b"b", b"c"]
    assert payloads(poll(start=ids[1], inclusive=True)) == [b"b", b"c"]
    assert payloads(poll(limit=2)) == [b"a", b"b"]
    assert payloads(poll(start=0)) == [b"a", b"b", b"c"]  # a publish time (long)
    assert poll(start=int(time.time() * 1000) + 3_600_000) == []


def test_poll_response_shapes(http: httpx.Client, ns: str) -> None:
    create(http, ns, "t")
    http.post(topic_url(ns, "t", "publish"), json={"messages": [_b64(b"x")]})
    before = int(time.time() * 1000) - 60_000
    # no body and no Content-Type: JSON, everything; JSON messages carry their publish time
    (message,) = http.post(topic_url(ns, "t", "poll")).json()
    assert set(message) == {"id", "payload", "publishTime"} and message["publishTime"] >= before
    # Avro with ?publishTime=true: CDAP's Message record plus publishTime (a long)
    timed = fastavro.parse_schema(
        {
            "type": "array",
            "items": {
                "type": "record",
                "name": "M",
                "fields": [
                    {"name": "id", "type": "bytes"},
                    {"name": "payload", "type": "bytes"},
                    {"name": "publishTime", "type": "long"},
                ],
            },
        }
    )
    body = Wire(AVRO).consume()
    response = http.post(topic_url(ns, "t", "poll?publishTime=true"), content=body, headers={"Content-Type": AVRO})
    (record,) = fastavro.schemaless_reader(io.BytesIO(response.content), timed, None)
    assert record["payload"] == b"x" and record["publishTime"] == message["publishTime"]


def test_a_poll_is_capped_and_continues_from_the_last_id(http: httpx.Client, ns: str) -> None:
    create(http, ns, "t")
    wire = Wire(AVRO)
    batch = [str(i).encode() for i in range(POLL_CAP + 10)]
    http.post(topic_url(ns, "t", "publish"), content=wire.publish(batch), headers=wire.headers)
    page = wire.messages(http.post(topic_url(ns, "t", "poll"), content=wire.consume(limit=1000), headers=wire.headers))
    assert payloads(page) == batch[:POLL_CAP]
    body = wire.consume(start=page[-1][0], inclusive=False)
    rest = wire.messages(http.post(topic_url(ns, "t", "poll"), content=body, headers=wire.headers))
    assert payloads(rest) == batch[POLL_CAP:]


def test_bad_requests_are_400_and_change_nothing(http: httpx.Client, wire: Wire, ns: str) -> None:
    create(http, ns, "t")
    h = wire.headers
    bad = [
        ("publish", wire.publish([])),  # nothing to publish without a transaction (CDAP's 400)
        ("publish", b"\xff\xfe garbage"),
        ("publish", wire.publish([b"x" * 300, b"y"])[:-4]),  # a body cut short
        ("publish?ttl=soon", wire.publish([b"x"])),
        ("publish?ttl=999999999", wire.publish([b"x"])),  # per-message TTL over the topic's
        ("publish", wire.publish([b"x"], pointer=-5)),
        ("store", wire.publish([b"x"])),  # store needs a write pointer
        ("store", wire.publish([], pointer=write_pointer_now())),  # and payloads
        ("store?sequence=5", wire.publish([b"x"], pointer=write_pointer_now())),  # explicit sequences start at 2**40
        ("poll", wire.consume(start=b"not an id")),
        ("poll", wire.consume(limit=0)),
        ("poll", wire.consume(tx=b"not a transaction")),
        ("rollback", b"not a handle"),
    ]
    if wire.media == JSON:
        bad += [
            ("publish", b'{"messages": ["not base64!"]}'),
            ("publish", b'{"messages": [], "transactionWritePointer": 1, "extra": 1}'),
            ("publish", b'{"message": ["eA=="]}'),
            ("poll", b'{"startFrom": true}'),
            ("poll", b'{"startFrom": 1000000000000000000000000000}'),  # a time past any Avro long
            ("poll", b'{"limit": 1000000000000000000000000000}'),
            ("poll", b"[" * 20_000 + b"]" * 20_000),  # nested too deep for the JSON parser
            ("publish", b'{"messages": ["eA=="], "transactionWritePointer": 1000000000000000000000000000}'),
            ("publish", b'{"messages": [' * 5_000 + b"]}" * 5_000),
        ]
    bad += [
        ("publish?ttl=inf", wire.publish([b"x"])),
        ("store?sequence=" + "9" * 30, wire.publish([b"x"], pointer=write_pointer_now())),
    ]
    for action, body in bad:
        assert_error(http.post(topic_url(ns, "t", action), content=body, headers=h), 400, "InvalidArgument")
    unsupported = http.post(topic_url(ns, "t", "publish"), content=b"x", headers={"Content-Type": "text/plain"})
    assert_error(unsupported, 415, "UnsupportedMediaType")
    assert wire.messages(http.post(topic_url(ns, "t", "poll"), content=wire.consume(), headers=h)) == []


def test_a_topics_tx_mode_is_enforced_with_400(http: httpx.Client, wire: Wire, ns: str) -> None:
    assert http.put(topic_url(ns, "t"), json={"tx.mode": "transactional"}).status_code == 200
    assert_error(http.put(topic_url(ns, "u"), json={"tx.mode": "sometimes"}), 400, "InvalidArgument")
    h = wire.headers
    refused = http.post(topic_url(ns, "t", "publish"), content=wire.publish([b"plain"]), headers=h)
    assert_error(refused, 400, "InvalidArgument")
    assert "transactional-only" in refused.text
    published = http.post(topic_url(ns, "t", "publish"), content=wire.publish([b"tx"], write_pointer_now()), headers=h)
    assert published.status_code == 200
    assert payloads(wire.messages(http.post(topic_url(ns, "t", "poll"), content=wire.consume(), headers=h))) == [b"tx"]


def test_missing_topic_is_404(http: httpx.Client, wire: Wire, ns: str) -> None:
    create(http, ns, "real")
    handle = http.post(
        topic_url(ns, "real", "publish"),
        content=wire.publish([b"x"], pointer=write_pointer_now()),
        headers=wire.headers,
    ).content
    deleted_at = time.monotonic()
    http.delete(topic_url(ns, "real"))
    # the other worker may hold the topic's metadata for up to its cache age (1 s), in which a publish still
    # lands in the deleted generation as one just before the delete would; past that age, every worker says 404
    time.sleep(max(0.0, deleted_at + 1.2 - time.monotonic()))
    for action, body in [
        ("publish", wire.publish([b"x"])),
        ("store", wire.publish([b"x"], pointer=write_pointer_now())),
        ("poll", wire.consume()),
        ("rollback", handle),
    ]:
        response = http.post(topic_url(ns, "real", action), content=body, headers=wire.headers)
        assert_error(response, 404, "TopicNotFound")


def test_batch_over_the_limit_is_413_and_nothing_is_written(http: httpx.Client, wire: Wire, ns: str) -> None:
    create(http, ns, "t")
    h = wire.headers
    over = [b"x" * (LIMIT + 1)]  # fits the body limit, not the batch limit: the library refuses it
    assert_error(http.post(topic_url(ns, "t", "publish"), content=wire.publish(over), headers=h), 413, "BatchTooLarge")
    body = wire.publish(over, pointer=write_pointer_now())
    assert_error(http.post(topic_url(ns, "t", "store"), content=body, headers=h), 413, "BatchTooLarge")
    huge = b"\0" * (4 * LIMIT)  # refused from its Content-Length, before it is read
    assert_error(http.post(topic_url(ns, "t", "publish"), content=huge, headers=h), 413, "BatchTooLarge")
    chunked = (huge[i : i + 8192] for i in range(0, len(huge), 8192))  # no Content-Length: counted as it comes
    response = http.post(topic_url(ns, "t", "publish"), content=chunked, headers=h)
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert_error(response, 413, "BatchTooLarge")
    assert wire.messages(http.post(topic_url(ns, "t", "poll"), content=wire.consume(), headers=h)) == []
    fits = [b"x" * (LIMIT - 8)]
    assert http.post(topic_url(ns, "t", "publish"), content=wire.publish(fits), headers=h).status_code == 200


# -- CDAP's flows --------------------------------------------------------------------------------


def test_publish_then_rollback(http: httpx.Client, wire: Wire, ns: str) -> None:
    create(http, ns, "t")
    create(http, ns, "other")
    h, pointer = wire.headers, write_pointer_now()
    response = http.post(topic_url(ns, "t", "publish"), content=wire.publish([b"x1", b"x2"], pointer), headers=h)
    assert response.status_code == 200 and response.content
    assert response.headers["content-type"] == "application/octet-stream"
    handle = response.content

    def poll(tx: bytes | None) -> list[bytes]:
        return payloads(wire.messages(http.post(topic_url(ns, "t", "poll"), content=wire.consume(tx=tx), headers=h)))

    assert poll(tx_seeing(pointer)) == [b"x1", b"x2"]
    # the rollback body is the publish response as is (sent as octet-stream, Avro or JSON; no type: 415)
    assert_error(http.post(topic_url(ns, "t", "rollback"), content=handle), 415, "UnsupportedMediaType")
    assert http.post(topic_url(ns, "t", "rollback"), content=handle, headers=OCTETS).status_code == 200
    assert http.post(topic_url(ns, "t", "rollback"), content=handle, headers=h).status_code == 200  # again: no-op
    assert poll(tx_seeing(pointer)) == []
    assert poll(None) == [b"x1", b"x2"]  # non-transactional reads still see them (repeatable reads)
    assert_error(http.post(topic_url(ns, "other", "rollback"), content=handle, headers=h), 400, "InvalidArgument")


def test_store_then_publish(http: httpx.Client, wire: Wire, ns: str) -> None:
    create(http, ns, "t")
    h, pointer = wire.headers, write_pointer_now()

    def poll(tx: bytes | None = None) -> list[bytes]:
        return payloads(wire.messages(http.post(topic_url(ns, "t", "poll"), content=wire.consume(tx=tx), headers=h)))

    for batch in ([b"s1", b"s2"], [b"s3"]):
        stored = http.post(topic_url(ns, "t", "store"), content=wire.publish(batch, pointer), headers=h)
        assert stored.status_code == 200 and stored.content == b""
    assert poll() == []  # stored payloads are invisible until their pointer is published
    published = http.post(topic_url(ns, "t", "publish"), content=wire.publish([], pointer), headers=h)
    assert published.status_code == 200 and published.content
    assert poll() == [b"s1", b"s2", b"s3"]  # in store order
    assert poll(tx_seeing(pointer, in_progress=True)) == []
    assert poll(tx_seeing(pointer)) == [b"s1", b"s2", b"s3"]
    assert http.post(topic_url(ns, "t", "rollback"), content=published.content, headers=OCTETS).status_code == 200
    assert poll(tx_seeing(pointer)) == []


def test_transactional_poll_stops_at_the_first_in_progress_message(http: httpx.Client, wire: Wire, ns: str) -> None:
    create(http, ns, "t")
    h, pointer = wire.headers, write_pointer_now()
    for body in (wire.publish([b"m1"]), wire.publish([b"m2"], pointer), wire.publish([b"m3"])):
        assert http.post(topic_url(ns, "t", "publish"), content=body, headers=h).status_code == 200

    def poll(tx: bytes) -> list[bytes]:
        return payloads(wire.messages(http.post(topic_url(ns, "t", "poll"), content=wire.consume(tx=tx), headers=h)))

    assert poll(tx_seeing(pointer, in_progress=True)) == [b"m1"]  # stops at m2: m3 waits, order is kept
    assert poll(tx_seeing(pointer)) == [b"m1", b"m2", b"m3"]
    assert poll(tx_seeing(pointer, invalid=True)) == [b"m1", b"m3"]  # invalid: skipped


# -- operations ----------------------------------------------------------------------------------


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the exposition text (0 if absent)."""
    for line in text.splitlines():
        if line.startswith(name + "{"):
            found = dict(re.findall(r'(\w+)="([^"]*)"', line[len(name) : line.rindex("}") + 1]))
            if found == labels:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_health_and_metrics_cover_every_worker(gateway: GatewayProcess) -> None:
    labels = {"method": "GET", "route": "/health", "status": "200"}
    before = _metric(httpx.get(f"{gateway.url}/metrics").text, "tms_gateway_requests_total", **labels)
    workers, calls = set(), 0
    deadline = time.monotonic() + 60
    while len(workers) < 2 and time.monotonic() < deadline:
        answer = httpx.get(f"{gateway.url}/health", timeout=30)  # a new connection each time
        assert answer.status_code == 200 and answer.json()["status"] == "ok"
        workers.add(answer.json()["worker"])
        calls += 1
    assert len(workers) == 2, "both workers should answer new connections"
    assert httpx.get(f"{gateway.url}/v1/namespaces/n/topics/missing").status_code == 404
    text = httpx.get(f"{gateway.url}/metrics").text
    # every worker's requests, whichever worker answers the scrape
    assert _metric(text, "tms_gateway_requests_total", **labels) == before + calls
    route = "/v1/namespaces/{namespace}/topics/{topic}"
    assert _metric(text, "tms_gateway_errors_total", route=route, status="404", error="TopicNotFound") >= 1
    assert _metric(text, "tms_gateway_request_seconds_count", method="GET", route="/health") >= calls
    assert "tms_gateway_response_bytes_total" in text and "tms_gateway_request_bytes_total" in text


def test_curl_example_from_the_docs(gateway: GatewayProcess, tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "gateway.md").read_text()
    script = re.search(r"<!-- tested: curl -->\s*```bash\n(.*?)```", doc, re.S)
    assert script, "docs/gateway.md lost its tested curl example"
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script.group(1)],
        env={"PATH": "/usr/bin:/bin", "GATEWAY": gateway.url},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    topic = {"name": "orders", "properties": {"ttl": "3600"}, "generation": 1, "ordering": "sequencer"}
    assert json.loads(lines[0]) == topic
    polled = [base64.b64decode(m["payload"]) for m in json.loads(lines[1])]
    assert polled == [b"hello", b"world"]
    created, consumed, committed, state = (json.loads(line) for line in lines[2:6])
    assert (created["name"], created["position"]) == ("billing", None)
    assert [base64.b64decode(m["payload"]) for m in consumed] == [b"hello", b"world"]
    assert committed["committed"] == consumed[-1]["id"] == state["position"]
    assert (state["owner"], state["lag"]["messages"]) == (None, 0)
    assert (tmp_path / "handle.bin").stat().st_size > 0


# -- the Python client: the same program, direct or through the gateway --------------------------


def transcript(client: MessagingClient | GatewayClient, ns: str, pointer: int, ordering: str) -> dict[str, object]:
    """Run one program against ``client`` on a topic of ``ordering``; record what every step returned or
    raised (the error's class). Its transactions write with ``pointer`` and ``pointer + 1``."""
    out: dict[str, object] = {}
    t = TopicId(ns, "orders")

    def step(name: str, call: Callable[[], object]) -> None:
        try:
            out[name] = call()
        except TmsError as error:
            out[name] = type(error).__name__

    def meta(m: TopicMetadata) -> object:
        return dict(m.properties), m.ttl, m.generation, m.topic.topic

    def fetched(**kwargs: Any) -> list[tuple[bytes, bytes]]:
        return [(m.id, m.payload) for m in client.fetch(t, **kwargs)]

    def detail(result: PublishResult) -> object:
        d = result.rollback
        assert isinstance(d, RollbackDetail) and result.count == (1 if d.transaction_write_pointer == pointer else 0)
        return (d.transaction_write_pointer, d.generation, d.start_position, d.end_position)

    def published(result: PublishResult) -> object:
        assert result.topic == t and result.rollback is None and len(result.message_ids) == result.count
        return (result.generation, result.count, result.position)

    step("create", lambda: meta(client.create_topic(t, {"ttl": "3600", "owner": "me", "ordering": ordering})))
    step("create again", lambda: client.create_topic(t))
    step("create bad ttl", lambda: client.create_topic(TopicId(ns, "x"), {"ttl": "0"}))
    step("update", lambda: meta(client.update_topic(t, {"ttl": "600"})))
    step("get", lambda: meta(client.get_topic(t)))
    step("update missing", lambda: client.update_topic(TopicId(ns, "missing"), {"ttl": "60"}))
    step("list", lambda: [x.topic for x in client.list_topics(ns)])
    step("publish", lambda: published(client.publish(t, [b"a", b"b"])))
    step("publish nothing", lambda: client.publish(t, []))
    step("publish ttl too long", lambda: client.publish(t, [b"late"], ttl_seconds=10**9))
    handle = client.publish(t, [b"c"], tx_write_pointer=pointer)
    out["publish tx"] = detail(handle)
    client.store(t, [b"s1", b"s2"], tx_write_pointer=pointer + 1)
    client.store(t, [b"s3"], tx_write_pointer=pointer + 1, sequence=2**40)
    client.store(t, [b"s3"], tx_write_pointer=pointer + 1, sequence=2**40)  # the same keys: no second copy
    step("publish stored", lambda: detail(client.publish(t, [], tx_write_pointer=pointer + 1)))
    everything = fetched()
    out["fetch"] = everything
    out["fetch after id"] = fetched(start_message=everything[1][0], inclusive=False, limit=2)
    out["fetch from time"] = fetched(start_time_ms=0, limit=1)
    out["fetch future"] = fetched(start_time_ms=int(time.time() * 1000) + 3_600_000)
    out["fetch in progress"] = fetched(transaction=TransactionCodec.decode(tx_seeing(pointer, in_progress=True)))
    step("rollback", lambda: client.rollback(t, handle))
    out["fetch rolled back"] = fetched(transaction=TransactionCodec.decode(tx_seeing(pointer + 1)))
    step("rollback garbage", lambda: client.rollback(t, b"garbage"))
    step("fetch bad id", lambda: fetched(start_message=b"bad"))
    step("fetch id and time", lambda: fetched(start_message=everything[0][0], start_time_ms=5))
    step("fetch limit 0", lambda: fetched(limit=0))
    step("publish missing", lambda: client.publish(TopicId(ns, "missing"), [b"x"]))
    step("fetch missing", lambda: client.fetch(TopicId(ns, "missing")))
    step("delete", lambda: client.delete_topic(t))
    step("delete again", lambda: client.delete_topic(t))
    step("create after delete", lambda: meta(client.create_topic(t)))
    step("fetch old generation id", lambda: fetched(start_message=everything[-1][0]))
    return out


def without_offsets(out: dict[str, object]) -> dict[str, object]:
    """A transcript with message ids and rollback positions left out: a sequencer topic's offsets depend on
    how its writer reserved them (blocks while it is busy), which is timing, not behaviour."""
    kept: dict[str, object] = {}
    for name, value in out.items():
        if isinstance(value, list) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            value = [payload for _, payload in value]
        elif name in ("publish", "publish tx", "publish stored") and isinstance(value, tuple):
            value = value[:2]  # write pointer (or generation) and generation (or count)
        kept[name] = value
    return kept


@pytest.mark.parametrize("ordering", ["chain", "sequencer"])
@pytest.mark.parametrize("media", [AVRO, JSON], ids=["avro", "json"])
def test_gateway_client_behaves_as_direct_access(
    gateway: GatewayProcess, direct: MessagingClient, media: str, ns: str, ordering: str
) -> None:
    pointer = write_pointer_now()
    expected = transcript(direct, "d" + ns, pointer, ordering)
    with GatewayClient(gateway.url, media=media, timeout_seconds=60) as client:
        got = transcript(client, "g" + ns, pointer, ordering)
        if ordering == "chain":
            assert got == expected
        else:
            assert without_offsets(got) == without_offsets(expected)
        assert client.ping() is None
    # and what direct access does is what the contract says
    created = {"generation": "1", "owner": "me", "ordering": ordering, "ttl": "3600"}
    assert expected["create"] == (created, 3600, 1, "orders")
    assert [expected[k] for k in ("create again", "create bad ttl", "update missing", "publish nothing")] == [
        "TopicAlreadyExists",
        "InvalidArgument",
        "TopicNotFound",
        "InvalidArgument",
    ]
    assert payloads(expected["fetch"]) == [b"a", b"b", b"c", b"s1", b"s2", b"s3"]
    assert payloads(expected["fetch in progress"]) == [b"a", b"b"]
    assert payloads(expected["fetch rolled back"]) == [b"a", b"b", b"s1", b"s2", b"s3"]
    assert [expected["delete again"], expected["create after delete"][2], expected["fetch old generation id"]] == [
        "TopicNotFound",
        2,
        [],
    ]


@pytest.mark.parametrize("media", [AVRO, JSON], ids=["avro", "json"])
def test_every_field_of_a_page_comes_back_exact_through_the_client(
    gateway: GatewayProcess, direct: MessagingClient, media: str, ns: str
) -> None:
    """Payloads empty, binary, non-ASCII and of 60 KiB, in batches that share a publish time: what the
    gateway client gets from a consumer page and a fetch is what direct access reads, id, payload and time."""
    topic = TopicId(ns, "fields")
    direct.create_topic(topic)
    batches = [
        [b"", bytes(range(256)), "héllo ✓ 𝄞".encode(), b"\x00" * (LIMIT - 4096), b"last"],
        [f"message {i} ✓".encode() * (i % 7) for i in range(300)],
    ]
    with GatewayClient(gateway.url, media=media, timeout_seconds=60) as client:
        for batch in batches:
            client.publish(topic, batch)
        expected = list(direct.fetch(topic))
        assert [m.payload for m in expected] == [p for batch in batches for p in batch]
        assert list(client.fetch(topic)) == expected
        client.create_subscription(topic, "s", start="earliest")
        got = []
        with client.consumer(topic, "s") as consumer:
            deadline = time.monotonic() + 60
            while len(got) < len(expected) and time.monotonic() < deadline:
                got += consumer.poll(max_messages=1000, timeout_seconds=1.0)
            consumer.commit()
        assert got == expected
        assert direct.lag(topic, "s").messages == 0
