"""How the asyncio client's publish lanes put publishes together (tms_hbase/aio/coalesce.py): what goes in one
write, in which order, and what each caller gets back. The writes are recorded here; the real HBase tests of
the same are in tests/integration/test_aio_coalesce.py."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from tms_hbase.aio.coalesce import MAX_GROUP_MESSAGES, GroupOutcome, PublishLanes
from tms_hbase.errors import HBaseUnavailable, InvalidArgument, PublishOutcomeUnknown
from tms_hbase.model.published import PublishResult
from tms_hbase.model.topic import TopicId
from tms_hbase.ordering.appends import Resume
from tms_hbase.publish.writer import unknown_part

TOPIC = TopicId("default", "t")


class Writes:
    """Records each group write; each is held until ``release`` (so later publishes queue behind it)."""

    def __init__(self, sequencer: bool = True, fail: BaseException | None = None) -> None:
        self.groups: list[list[tuple[bytes, ...]]] = []
        self.ttls: list[float | None] = []
        self.singles: list[tuple[bytes, ...]] = []
        self.sequencer = sequencer
        self.fail = fail
        self.gate = asyncio.Event()
        self.position = 0

    async def group(
        self, topic: TopicId, batches: Sequence[tuple[bytes, ...]], ttl: float | None, since: float
    ) -> GroupOutcome:
        self.groups.append(list(batches))
        self.ttls.append(ttl)
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        if not self.sequencer and len(batches) > 1:
            return GroupOutcome(False, None)
        self.position += 1
        return GroupOutcome(self.sequencer, PublishResult(topic, 1, self.position, sum(map(len, batches))))

    async def one(self, topic: TopicId, payloads: tuple[bytes, ...], ttl: float | None, since: float) -> PublishResult:
        self.singles.append(payloads)
        self.position += 1
        return PublishResult(topic, 1, self.position, len(payloads))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_publishes_made_while_a_write_is_in_flight_go_together_in_order_each_with_its_part() -> None:
    async def scenario() -> tuple[Writes, list[PublishResult]]:
        writes = Writes()
        lanes = PublishLanes(writes.group, writes.one, unknown_part, 1 << 20, 1.0)
        first = asyncio.create_task(lanes.publish(TOPIC, (b"a",), None))
        await settle()  # its write is in flight
        rest = [asyncio.create_task(lanes.publish(TOPIC, p, None)) for p in [(b"b",), (b"c", b"d"), (b"e",)]]
        await settle()
        writes.gate.set()
        return writes, [await first] + [await t for t in rest]

    writes, results = asyncio.run(scenario())
    assert writes.groups == [[(b"a",)], [(b"b",), (b"c", b"d"), (b"e",)]]
    assert [(r.position, r.first_index, r.count) for r in results] == [(1, 0, 1), (2, 0, 1), (2, 1, 2), (2, 3, 1)]


def test_a_group_is_cut_where_the_ttl_changes_and_at_its_limits() -> None:
    async def scenario(payloads: list[tuple[bytes, ...]], ttls: list[float | None], max_bytes: int) -> Writes:
        writes = Writes()
        writes.gate.set()
        lanes = PublishLanes(writes.group, writes.one, unknown_part, max_bytes, 1.0)
        await asyncio.gather(*(lanes.publish(TOPIC, p, t) for p, t in zip(payloads, ttls, strict=True)))
        return writes

    by_ttl = asyncio.run(scenario([(b"a",), (b"b",), (b"c",), (b"d",)], [None, None, 60.0, None], 1 << 20))
    assert by_ttl.groups == [[(b"a",), (b"b",)], [(b"c",)], [(b"d",)]]
    assert by_ttl.ttls == [None, 60.0, None]
    by_bytes = asyncio.run(scenario([(b"x" * 10,)] * 3, [None] * 3, 2 * 14))  # 14 bytes a message in a row
    assert [len(g) for g in by_bytes.groups] == [2, 1]
    many = MAX_GROUP_MESSAGES + 1
    by_count = asyncio.run(scenario([(b"m",)] * many, [None] * many, 1 << 20))
    assert [len(g) for g in by_count.groups] == [MAX_GROUP_MESSAGES, 1]


def test_a_failed_group_write_fails_every_member_and_an_unknown_one_gives_each_its_own_resume() -> None:
    resume = Resume(TOPIC, 1, 7, 3, span=4)

    async def scenario(error: BaseException) -> list[BaseException | PublishResult]:
        writes = Writes(fail=error)
        writes.gate.set()
        lanes = PublishLanes(writes.group, writes.one, unknown_part, 1 << 20, 1.0)
        calls = [lanes.publish(TOPIC, p, None) for p in [(b"a",), (b"b", b"c"), (b"d",)]]
        return await asyncio.gather(*calls, return_exceptions=True)

    down = HBaseUnavailable("down")
    assert asyncio.run(scenario(down)) == [down, down, down]
    unknown = PublishOutcomeUnknown("lost", resume)
    unknown.timed_out = True
    outcomes = asyncio.run(scenario(unknown))
    assert all(isinstance(o, PublishOutcomeUnknown) and o.timed_out for o in outcomes)
    resumes = [o.resume for o in outcomes]  # type: ignore[union-attr]
    assert [(r.position, r.batch_no, r.span, r.first_index, r.shared) for r in resumes] == [
        (7, 3, 4, 0, True),
        (7, 3, 4, 1, True),
        (7, 3, 4, 3, True),
    ]


def test_a_publish_cancelled_while_queued_leaves_the_group_and_one_in_flight_runs_on() -> None:
    async def scenario() -> tuple[Writes, PublishResult]:
        writes = Writes()
        lanes = PublishLanes(writes.group, writes.one, unknown_part, 1 << 20, 1.0)
        in_flight = asyncio.create_task(lanes.publish(TOPIC, (b"sent",), None))
        await settle()
        queued = asyncio.create_task(lanes.publish(TOPIC, (b"queued",), None))
        kept = asyncio.create_task(lanes.publish(TOPIC, (b"kept",), None))
        await settle()
        in_flight.cancel()
        queued.cancel()
        for task in (in_flight, queued):
            with pytest.raises(asyncio.CancelledError):
                await task
        writes.gate.set()
        result = await kept
        await lanes.wait_idle()
        return writes, result

    writes, kept = asyncio.run(scenario())
    assert writes.groups == [[(b"sent",)], [(b"kept",)]]  # the in-flight write went on; the queued one left
    assert (kept.position, kept.first_index) == (2, 0)


def test_on_a_chain_topic_each_publish_is_written_on_its_own() -> None:
    async def scenario() -> tuple[Writes, list[PublishResult]]:
        writes = Writes(sequencer=False)
        writes.gate.set()
        lanes = PublishLanes(writes.group, writes.one, unknown_part, 1 << 20, 1.0)
        assert not lanes.direct(TOPIC)  # not known yet
        together = await asyncio.gather(*(lanes.publish(TOPIC, (b"%d" % i,), None) for i in range(3)))
        assert lanes.direct(TOPIC)  # known to be a chain topic: the client writes the next ones on their own
        return writes, together

    writes, results = asyncio.run(scenario())
    assert writes.groups == [[(b"0",), (b"1",), (b"2",)]]  # asked once; nothing written for the group
    assert writes.singles == [(b"0",), (b"1",), (b"2",)]  # then each on its own
    assert len({r.position for r in results}) == 3


def test_a_group_refused_as_a_whole_is_written_again_in_halves_until_only_the_bad_publish_fails() -> None:
    """As the gateway's client does when the gateway refuses a request as bad input: one member's fault."""
    bad = InvalidArgument("too large")

    async def refusing(
        topic: TopicId, batches: Sequence[tuple[bytes, ...]], ttl: float | None, since: float
    ) -> GroupOutcome:
        writes.groups.append(list(batches))
        if any(b"bad" in batch for batch in batches):
            if len(batches) == 1:
                raise bad
            return GroupOutcome(True, None)
        writes.position += 1
        return GroupOutcome(True, PublishResult(topic, 1, writes.position, sum(map(len, batches))))

    writes = Writes()

    async def scenario() -> list[PublishResult | BaseException]:
        lanes = PublishLanes(refusing, writes.one, unknown_part, 1 << 20, 1.0)
        payloads = [(b"a",), (b"b",), (b"bad",), (b"c",), (b"d",)]
        return await asyncio.gather(*(lanes.publish(TOPIC, p, None) for p in payloads), return_exceptions=True)

    results = asyncio.run(scenario())
    assert results[2] is bad
    good = [r for r in results if isinstance(r, PublishResult)]
    assert [r.position for r in good] == [1, 1, 2, 2]  # the others still share rows, in order
    assert writes.groups[1:] == [[(b"a",), (b"b",)], [(b"bad",), (b"c",), (b"d",)], [(b"bad",)], [(b"c",), (b"d",)]]
    assert not writes.singles


def test_with_abandon_a_write_whose_callers_were_all_cancelled_is_cut_short_and_the_queue_goes_on() -> None:
    """The gateway's client: a request nobody waits for no longer holds up the publishes queued behind it."""

    async def scenario() -> tuple[Writes, PublishResult, PublishResult]:
        writes = Writes()
        lanes = PublishLanes(writes.group, writes.one, unknown_part, 1 << 20, 1.0, abandon=True)
        shared = [asyncio.create_task(lanes.publish(TOPIC, (p,), None)) for p in (b"kept", b"cancelled")]
        await settle()  # both in one write, held
        shared[1].cancel()
        with pytest.raises(asyncio.CancelledError):
            await shared[1]
        writes.gate.set()  # a caller still waits: the write ran on
        kept = await shared[0]
        writes.gate.clear()
        lone = asyncio.create_task(lanes.publish(TOPIC, (b"lone",), None))
        await settle()  # its write is held
        queued = asyncio.create_task(lanes.publish(TOPIC, (b"queued",), None))
        await settle()
        lone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await lone
        await settle()
        writes.gate.set()
        return writes, kept, await queued

    writes, kept, queued = asyncio.run(scenario())
    assert writes.groups == [[(b"kept",), (b"cancelled",)], [(b"lone",)], [(b"queued",)]]
    assert (kept.position, queued.position) == (1, 2)  # the lone write was cut short: it stored nothing
