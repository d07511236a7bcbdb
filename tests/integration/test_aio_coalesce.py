"""The asyncio client's coalesced publishes on the real HBase: publishes to a sequencer topic made while a write
to it is in flight go together in one batch row, and every guarantee of a publish on its own still holds:
each acknowledged message stored exactly once under the id its publish returned (read back by a new process),
each publisher's messages in its call order, a failed shared write failing every member (with a resume that
stores each exactly once), a cancelled publish not stored while queued and stored whole once its write was
sent, a queued publish failing by its own deadline, and transactional publishes never put together."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from prometheus_client import REGISTRY

from tms_hbase.errors import BatchTooLarge, HBaseUnavailable, PublishOutcomeUnknown, TopicNotFound
from tms_hbase.model.published import PublishResult
from tms_hbase.model.retry import Retry
from tms_hbase.tx import write_pointer_now

from ..aio_client import async_client
from ..tcp_proxy import TcpProxy
from ..waiting import wait_for

TOPIC = "default:coalesced"
HELD = 5.0  # seconds the proxy holds each request of a write that must stay in flight while a publish is cancelled
COUNTERS = ("publishes", "published_messages")  # the client's metrics count each publish call, not each write

_READER = """
import json, sys, time
from tms_hbase import MessagingClient
with MessagingClient(sys.argv[1], sys.argv[2], create_tables=False) as client:
    deadline = time.monotonic() + 30
    while True:  # a fetch ends before a hole not due yet: read again until all are there, or the deadline
        messages = [[m.id.hex(), m.payload.decode()] for m in client.fetch(sys.argv[3])]
        if len(messages) >= int(sys.argv[4]) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    print(json.dumps(messages))
"""


def read_in_new_process(address: str, prefix: str, expected: int) -> list[tuple[str, str]]:
    """Every message of the topic in order as (id hex, payload), read by a new process's synchronous client
    (once at least ``expected`` are there, or after 30 s)."""
    done = subprocess.run(
        [sys.executable, "-c", _READER, address, prefix, TOPIC, str(expected)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return [(i, p) for i, p in json.loads(done.stdout)]


def test_concurrent_publishers_share_rows_and_each_message_is_stored_once_in_its_publishers_order(
    hbase_address: str, prefix: str
) -> None:
    publishers, each = 32, 12

    async def scenario() -> dict[str, str]:
        async with async_client(hbase_address, prefix, pool_size=8) as client:
            await client.create_topic(TOPIC)
            acked: dict[str, str] = {}

            async def publisher(p: int) -> None:
                for n in range(each):
                    # every third publish is a batch of two: a part of a shared row may hold several messages
                    payloads = [b"%d:%d:%d" % (p, n, k) for k in range(2 if n % 3 == 0 else 1)]
                    result = await client.publish(TOPIC, payloads)
                    assert result.count == len(payloads)
                    acked.update(
                        zip((i.hex() for i in result.message_ids), (x.decode() for x in payloads), strict=True)
                    )

            await asyncio.gather(*(publisher(p) for p in range(publishers)))
            return acked

    counted = [REGISTRY.get_sample_value(f"tms_client_{name}_total", {"topic": TOPIC}) or 0.0 for name in COUNTERS]
    acked = asyncio.run(scenario())
    now = [REGISTRY.get_sample_value(f"tms_client_{name}_total", {"topic": TOPIC}) or 0.0 for name in COUNTERS]
    assert [b - a for a, b in zip(counted, now, strict=True)] == [publishers * each, len(acked)]  # per call
    stored = read_in_new_process(hbase_address, prefix, len(acked))
    assert len(stored) == len({i for i, _ in stored})  # no id twice
    assert dict(stored) == acked  # every acknowledged message, under its own id, and nothing else
    rows = {bytes.fromhex(i)[4:12] for i, _ in stored}
    assert len(rows) < len(stored) / 2  # publishes made while a write was in flight went together
    for p in range(publishers):
        own = [payload for _, payload in stored if payload.startswith(f"{p}:")]
        assert own == sorted(own, key=lambda x: tuple(map(int, x.split(":")[1:])))  # its call order


def test_a_bad_publish_among_concurrent_ones_fails_only_its_own_caller(hbase_address: str, prefix: str) -> None:
    limit = 4096

    async def scenario() -> list[PublishResult | BaseException]:
        async with async_client(hbase_address, prefix, max_batch_bytes=limit) as client:
            await client.create_topic(TOPIC)
            good = [client.publish(TOPIC, [b"good %d" % i]) for i in range(16)]
            bad = [client.publish(TOPIC, [b"x" * limit]), client.publish("default:missing", [b"nowhere"])]
            return await asyncio.gather(*good[:8], *bad, *good[8:], return_exceptions=True)

    outcomes = asyncio.run(scenario())
    too_large, not_found = outcomes[8:10]
    good = outcomes[:8] + outcomes[10:]
    assert isinstance(too_large, BatchTooLarge) and isinstance(not_found, TopicNotFound)
    assert all(isinstance(r, PublishResult) for r in good)
    assert len({r.position for r in good}) < len(good)  # type: ignore[union-attr]  # they went together
    stored = read_in_new_process(hbase_address, prefix, len(good))
    assert dict(stored) == {r.first_id.hex(): f"good {i}" for i, r in enumerate(good)}  # type: ignore[union-attr]


@pytest.mark.parametrize("landed", [True, False], ids=["reply-lost", "request-lost"])
def test_a_shared_write_whose_outcome_is_unknown_fails_every_member_and_each_resume_stores_it_once(
    hbase_address: str, prefix: str, proxy: TcpProxy, landed: bool
) -> None:
    """The shared row's put reaches HBase and its answer is lost (or the put never arrives: the resumes settle
    its offset and store each member's own messages), then the link hangs: every member gets
    PublishOutcomeUnknown; resumed all at once, each is stored exactly once."""
    members = 12

    async def scenario() -> tuple[list[BaseException | PublishResult], list[PublishResult]]:
        async with async_client(proxy.address, prefix, timeout_seconds=3.0) as client:
            await client.create_topic(TOPIC)
            await client.publish(TOPIC, [b"before"])
            if landed:
                proxy.lose_reply_to(b"checkAndPut", then_stall=True)
            else:
                proxy.lose_request_to(b"checkAndPut")
            outcomes = await asyncio.gather(
                *(client.publish(TOPIC, [b"m%d" % i]) for i in range(members)), return_exceptions=True
            )
            proxy.stall = False
            proxy.cut()
            resumed = await asyncio.gather(
                *(
                    client.publish(TOPIC, [b"m%d" % i], resume=outcome)  # type: ignore[arg-type]
                    for i, outcome in enumerate(outcomes)
                )
            )
            return outcomes, resumed

    outcomes, resumed = asyncio.run(scenario())
    assert all(isinstance(o, PublishOutcomeUnknown) for o in outcomes), outcomes
    assert proxy.replies_lost == (1 if landed else 0)
    stored = read_in_new_process(hbase_address, prefix, 1 + members)
    assert [p for _, p in stored].count("before") == 1
    expected = {r.first_id.hex(): f"m{i}" for i, r in enumerate(resumed)}  # type: ignore[union-attr]
    assert {i: p for i, p in stored if p != "before"} == expected  # each once, under its resumed id


def test_a_shared_write_that_fails_fails_every_member_and_stores_none(
    hbase_address: str, prefix: str, proxy: TcpProxy
) -> None:
    async def scenario() -> list[BaseException | PublishResult]:
        async with async_client(proxy.address, prefix, timeout_seconds=2.0) as client:
            await client.create_topic(TOPIC)
            proxy.fault = "garbage"
            proxy.cut()
            return await asyncio.gather(
                *(client.publish(TOPIC, [b"m%d" % i]) for i in range(8)), return_exceptions=True
            )

    outcomes = asyncio.run(scenario())
    proxy.fault = None
    assert all(isinstance(o, HBaseUnavailable) for o in outcomes), outcomes
    unknown = [o for o in outcomes if isinstance(o, PublishOutcomeUnknown)]
    assert not unknown  # the proxy answered instead of HBase: nothing was sent to be stored
    assert read_in_new_process(hbase_address, prefix, 0) == []


def test_a_publish_cancelled_while_waiting_for_the_write_before_it_is_not_stored(
    hbase_address: str, prefix: str, proxy: TcpProxy
) -> None:
    async def scenario() -> tuple[PublishResult, PublishResult, bool]:
        async with async_client(proxy.address, prefix, timeout_seconds=30.0) as client:
            await client.create_topic(TOPIC)
            await client.publish(TOPIC, [b"warm"])
            proxy.delay = HELD  # every request held: the first write stays in flight
            seen = proxy.requests
            first = asyncio.create_task(client.publish(TOPIC, [b"first"]))
            await asyncio.to_thread(wait_for, lambda: proxy.requests > seen, "the first write on the wire", 10.0)
            queued = [asyncio.create_task(client.publish(TOPIC, [p])) for p in (b"cancelled", b"kept")]
            await asyncio.sleep(0)  # both queued behind it
            queued[0].cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued[0]
            before = not first.done()
            proxy.delay = 0.0
            return await first, await queued[1], before

    first, kept, before = asyncio.run(scenario())
    assert before, "the cancelled publish was held until the write before it ended"
    stored = read_in_new_process(hbase_address, prefix, 3)
    assert [p for _, p in stored] == ["warm", "first", "kept"]
    assert dict(stored)[first.first_id.hex()] == "first"  # type: ignore[union-attr]
    assert dict(stored)[kept.first_id.hex()] == "kept"  # type: ignore[union-attr]


def test_a_publish_cancelled_while_its_shared_write_is_in_flight_is_stored_whole(
    hbase_address: str, prefix: str, proxy: TcpProxy
) -> None:
    async def scenario() -> tuple[PublishResult, bool]:
        async with async_client(proxy.address, prefix, timeout_seconds=30.0) as client:
            await client.create_topic(TOPIC)
            await client.publish(TOPIC, [b"warm"])
            proxy.delay = HELD
            seen = proxy.requests
            kept = asyncio.create_task(client.publish(TOPIC, [b"kept"]))
            cancelled = asyncio.create_task(client.publish(TOPIC, [b"cancelled", b"whole"]))  # same group
            await asyncio.to_thread(wait_for, lambda: proxy.requests > seen, "the shared write on the wire", 10.0)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            before = not kept.done()
            proxy.delay = 0.0
            return await kept, before  # close() then waits for the cancelled one's write: it is that write

    kept, before = asyncio.run(scenario())
    assert before, "the cancelled publish was held until its shared write ended"
    stored = read_in_new_process(hbase_address, prefix, 4)
    assert [p for _, p in stored] == ["warm", "kept", "cancelled", "whole"]
    ids = [i for i, _ in stored]
    assert ids[1] == kept.first_id.hex()  # type: ignore[union-attr]
    assert len({bytes.fromhex(i)[4:12] for i in ids[1:]}) == 1  # one row: the group's


def test_transactional_publishes_are_never_put_together(hbase_address: str, prefix: str) -> None:
    async def scenario() -> list[PublishResult]:
        async with async_client(hbase_address, prefix) as client:
            await client.create_topic(TOPIC)
            pointers = [write_pointer_now() + i for i in range(8)]
            return await asyncio.gather(
                *(client.publish(TOPIC, [b"tx%d" % i], pointer) for i, pointer in enumerate(pointers))
            )

    results = asyncio.run(scenario())
    assert len({r.position for r in results}) == 8  # a row each: a rollback hides its own transaction only
    assert all(r.first_index == 0 and r.rollback is not None for r in results)


async def until(condition: Callable[[], bool]) -> None:
    """Return once ``condition()`` holds, looking every 5 ms (the caller bounds the wait)."""
    while not condition():
        await asyncio.sleep(0.005)


def test_a_publish_queued_behind_a_hung_write_fails_by_its_own_deadline(
    hbase_address: str, prefix: str, proxy: TcpProxy
) -> None:
    """Its wait in the queue counts: it fails by the client's timeout from its own call, not from its write's start.

    The write before it hangs until its deadline (the hang aimed at its put, so that it cannot land on the
    doorbell refresh the publish before it started in the background). Then the reads of the installation's
    metadata table are held a little longer than the queued publish was called after the hung one: its write
    begins with one (the topic's metadata, read more than a second ago). So it cannot get past that read before
    the deadline counted from its call (at any load: it starts after the hung write's deadline), while a deadline
    counted from the write's start leaves it the whole timeout, and the rest of its write is not held: it would
    be stored."""
    timeout = 20.0
    hung_payload = b"first, the hung write"

    async def scenario() -> list[BaseException | PublishResult]:
        # a reservation older than W is made again, and at load 10 a round trip through the proxy can take W:
        # attempts enough that the first write does send its put
        retry = Retry(attempts=8)
        async with async_client(proxy.address, prefix, timeout_seconds=timeout, retry=retry) as client:
            await client.create_topic(TOPIC)
            await client.publish(TOPIC, [b"warm"])
            # its connection stays hung: it ends at its deadline
            proxy.sticky, proxy.aim, proxy.fault = True, hung_payload, "hang"
            swallowed = proxy.swallowed
            before_first = time.monotonic()
            first = asyncio.create_task(client.publish(TOPIC, [hung_payload]))
            await asyncio.wait_for(until(lambda: proxy.swallowed > swallowed), 60)  # the first write hangs
            queued = asyncio.create_task(client.publish(TOPIC, [b"queued"]))
            await asyncio.sleep(0)  # it is queued (a ready client queues a publish in its first step)
            after_first = time.monotonic() - before_first  # at least how long after the first one it was called
            proxy.fault, proxy.aim, proxy.delay = None, f"{prefix}_metadata".encode(), after_first + 0.5
            outcomes = await asyncio.gather(first, queued, return_exceptions=True)
            proxy.delay = 0.0
            return outcomes

    hung, outcome = asyncio.run(scenario())
    assert isinstance(hung, HBaseUnavailable) and hung.timed_out, f"the first write did not hang: {hung!r}"
    assert isinstance(outcome, HBaseUnavailable) and outcome.timed_out, outcome
