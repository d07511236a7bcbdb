"""Trace context on messages (tms_hbase.tracing): a producer's context travels in the headers to consumers in
other processes, whose receive spans link to it, on every publish and consume path; where tracing is not
configured or OpenTelemetry is not importable, a message is stored as without it (no header added).

Each producer and consumer runs as its own process with an in-memory span exporter (a tracer provider is set
once per process, so the test process itself keeps tracing off for the other tests it runs) and prints the
spans it made and the messages it got as JSON."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from tms_hbase import MessagingClient, TopicId

from ..gateway_server import GatewayProcess, module_gateway

gateway = module_gateway("workers = 1\n")

PRELUDE = textwrap.dedent(
    """
    import asyncio, json, sys
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from tms_hbase import BackgroundPublisher, MessagingClient, Record, TopicId
    from tms_hbase.gateway_client.http import GatewayClient

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    tracer = trace.get_tracer("test")
    thrift, prefix, url, topic, how = sys.argv[1:6]
    topic = TopicId.parse(topic)
    BATCH = [b"plain", Record(b"body", key=b"k-1", headers=[("x", b"1")])]

    def span(s):
        return {
            "name": s.name,
            "kind": s.kind.name,
            "trace": format(s.context.trace_id, "032x"),
            "id": format(s.context.span_id, "016x"),
            "parent": format(s.parent.span_id, "016x") if s.parent else None,
            "links": [[format(l.context.trace_id, "032x"), format(l.context.span_id, "016x")] for l in s.links],
            "attributes": dict(s.attributes),
        }

    def message(m):
        return {"payload": m.payload.decode(), "key": m.key and m.key.decode(),
                "headers": [[n, v.decode()] for n, v in m.headers]}

    def done(**out):
        print(json.dumps(out | {"spans": [span(s) for s in exporter.get_finished_spans()]}))
    """
)

PRODUCE = textwrap.dedent(
    """
    with tracer.start_as_current_span("order") as root:
        if how == "direct":
            with MessagingClient(thrift, prefix) as client:
                client.publish(topic, BATCH)
        elif how == "background":
            with MessagingClient(thrift, prefix) as client, BackgroundPublisher(client) as publisher:
                publisher.publish(topic, BATCH).result(60)
        elif how == "asyncio":
            from tms_hbase.aio import AsyncMessagingClient
            async def main():
                async with AsyncMessagingClient(thrift, prefix) as client:
                    await client.publish(topic, BATCH)
            asyncio.run(main())
        else:
            with GatewayClient(url, timeout_seconds=60) as client:
                client.publish(topic, BATCH)
    done(root=format(root.get_span_context().span_id, "016x"))
    """
)

CONSUME = textwrap.dedent(
    """
    got = []
    if how == "direct":
        with MessagingClient(thrift, prefix) as client, client.consumer(topic, "exclusive") as consumer:
            while len(got) < 2:
                got += consumer.poll(10, 5.0)
    elif how == "iterated":
        with MessagingClient(thrift, prefix) as client, client.consumer(topic, "exclusive") as consumer:
            for m in consumer:
                got.append(m)
                if len(got) == 2:
                    break
    elif how == "shared":
        with MessagingClient(thrift, prefix) as client, client.shared_consumer(topic, "work") as consumer:
            while len(got) < 2:
                got += consumer.receive(10, 5.0)
            consumer.ack(*got)
    else:
        with GatewayClient(url, timeout_seconds=60) as client, client.consumer(topic, "exclusive") as consumer:
            while len(got) < 2:
                got += consumer.poll(10, 5.0)
    done(messages=[message(m) for m in got])
    """
)


def run(script: str, *args: str) -> dict:
    """Run a prelude + ``script`` process; its JSON output."""
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + script, *args], capture_output=True, text=True, timeout=180, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def topic(direct: MessagingClient) -> Iterator[TopicId]:
    """A topic with an exclusive subscription and a shared one, created before anything is published."""
    name = TopicId("default", f"traced{abs(hash(object()))}")
    direct.create_topic(name)
    direct.create_subscription(name, "exclusive")
    direct.create_subscription(name, "work", shared=True)
    yield name
    direct.delete_topic(name)


def _check_publish(produced: dict, kind: str, topic: TopicId) -> dict:
    """The publish span (``kind``: send or create) is the child of the caller's span, named and typed as the
    messaging conventions say; returns it."""
    ours = [s for s in produced["spans"] if s["name"] == f"{kind} {topic}"]
    assert len(ours) == 1, produced["spans"]
    span = ours[0]
    assert span["kind"] == "PRODUCER" and span["parent"] == produced["root"]
    assert span["attributes"]["messaging.system"] == "tms_hbase"
    assert span["attributes"]["messaging.destination.name"] == str(topic)
    assert span["attributes"]["messaging.operation.type"] == kind
    assert span["attributes"]["messaging.batch.message_count"] == 2
    return span


def _check_consumed(consumed: dict, producer: dict, topic: TopicId) -> None:
    """Both messages carry the producer span's context after their own headers, and the consumer's receive
    span links to it."""
    messages = consumed["messages"]
    assert [m["payload"] for m in messages] == ["plain", "body"]
    assert messages[0]["key"] is None and messages[1]["key"] == "k-1"
    assert [n for n, _ in messages[0]["headers"]] == ["traceparent"]
    assert messages[1]["headers"][:1] == [["x", "1"]] and [n for n, _ in messages[1]["headers"]] == ["x", "traceparent"]
    sampled = f"00-{producer['trace']}-{producer['id']}-"  # then the trace flags
    assert all(m["headers"][-1][1].startswith(sampled) for m in messages)
    receives = [s for s in consumed["spans"] if s["name"] == f"receive {topic}"]
    assert receives and all(s["kind"] == "CONSUMER" for s in receives)
    links = [link for s in receives for link in s["links"]]
    assert links and all(link == [producer["trace"], producer["id"]] for link in links)


@pytest.mark.parametrize(("how", "kind"), [("direct", "send"), ("background", "create"), ("asyncio", "create")])
def test_a_direct_publish_carries_its_context_to_consumers_in_other_processes(
    hbase_address: str, module_prefix: str, gateway: GatewayProcess, topic: TopicId, how: str, kind: str
) -> None:
    args = (hbase_address, module_prefix, gateway.url, str(topic))
    produced = run(PRODUCE, *args, how)
    producer = _check_publish(produced, kind, topic)
    for consumer in ("direct", "iterated", "shared", "gateway"):
        _check_consumed(run(CONSUME, *args, consumer), producer, topic)


def test_a_publish_through_the_gateway_carries_the_clients_context(
    hbase_address: str, module_prefix: str, gateway: GatewayProcess, topic: TopicId
) -> None:
    args = (hbase_address, module_prefix, gateway.url, str(topic))
    produced = run(PRODUCE, *args, "gateway")
    producer = _check_publish(produced, "create", topic)
    _check_consumed(run(CONSUME, *args, "shared"), producer, topic)


UNTRACED = textwrap.dedent(
    """
    import sys
    if sys.argv[4] == "absent":
        sys.modules["opentelemetry"] = None  # as if the package were not installed
    from tms_hbase import MessagingClient, TopicId
    with MessagingClient(sys.argv[1], sys.argv[2]) as client:
        client.publish(TopicId.parse(sys.argv[3]), [b"plain"])
    """
)


@pytest.mark.parametrize("otel", ["absent", "unconfigured"])
def test_without_a_configured_tracer_a_message_is_stored_as_without_tracing(
    hbase_address: str, module_prefix: str, direct: MessagingClient, topic: TopicId, otel: str
) -> None:
    subprocess.run(
        [sys.executable, "-c", UNTRACED, hbase_address, module_prefix, str(topic), otel], check=True, timeout=120
    )
    (message,) = direct.fetch(topic, limit=10)
    assert (message.payload, message.key, message.headers) == (b"plain", None, ())
