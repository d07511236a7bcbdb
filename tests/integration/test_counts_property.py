"""Every number the system reports about a topic is what a full read of it finds: random sequences of
publishes of every kind (plain, transactional inline, payloads stored under a pointer, a Spark-like store
from several writers with explicit sequences, retried), rollbacks, consumed messages and sweeps, on
both orderings, each followed by a comparison of topic_stats (messages and bytes), lag and the exporter's
gauges with a committed-only fetch of the whole topic, as a subscription reads it (hypothesis draws the
sequences; a failing one is shrunk to the shortest that fails)."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tms_hbase import MessageId, MessagingClient, TopicId
from tms_hbase.model.clock import now_ms
from tms_hbase.model.published import RollbackDetail
from tms_hbase.model.rows import BYTES_PREFIX, counter_key
from tms_hbase.ops.exporter import TopicCollector
from tms_hbase.ordering import sequencer
from tms_hbase.publish import byte_totals
from tms_hbase.publish.writer import EXPLICIT_SEQUENCES
from tms_hbase.tx import write_pointer_now
from tms_hbase_sweeper.sweep import Sweeper

TTL = 3600
GRACE = 4  # the smallest grace with a tail-cache setting of 1 s
SUB = "counted"

payload = st.binary(min_size=0, max_size=300)
payloads = st.lists(payload, min_size=1, max_size=6)
operation = st.one_of(
    st.tuples(st.just("publish"), payloads),
    st.tuples(st.just("tx_publish"), payloads),
    st.tuples(st.just("stored"), st.lists(payloads, min_size=1, max_size=3)),  # store calls, then the pointer
    st.tuples(st.just("spark"), st.lists(payloads, min_size=1, max_size=3)),  # one writer each, one retried
    st.tuples(st.just("rollback"), st.integers(min_value=0)),
    st.tuples(st.just("consume"), st.integers(min_value=1, max_value=8)),
    st.tuples(st.just("sweep"), st.integers(min_value=0, max_value=3)),  # how many of the newest rows it spares
)


@dataclass
class Scenario:
    """The test's installation and what it did: the topic of this example and its transactional publishes."""

    client: MessagingClient
    topic: TopicId
    rollbacks: list[RollbackDetail] = field(default_factory=list)
    mark: bytes | None = None
    published: dict[int, int] = field(default_factory=dict)  # row position: the bytes published there


@pytest.fixture
def installation(client: MessagingClient) -> Iterator[MessagingClient]:
    client.admin.init_tables()
    client.admin.set_tail_cache_seconds(1)
    yield client


def run(s: Scenario, op: tuple[str, object]) -> None:
    kind, arg = op
    c, t = s.client, s.topic
    size = sum(len(p) for batch in arg for p in batch) if kind in ("stored", "spark") else 0  # type: ignore[attr-defined]
    if kind == "publish":
        s.published[c.publish(t, arg).position] = sum(map(len, arg))  # type: ignore[arg-type]
    elif kind == "tx_publish":
        result = c.publish(t, arg, tx_write_pointer=write_pointer_now())  # type: ignore[arg-type]
        s.rollbacks.append(result.rollback)
        s.published[result.position] = sum(map(len, arg))  # type: ignore[arg-type]
    elif kind == "stored":
        wp = write_pointer_now()
        for batch in arg:  # type: ignore[attr-defined]
            c.store(t, batch, tx_write_pointer=wp)
        result = c.publish(t, [], tx_write_pointer=wp)
        s.rollbacks.append(result.rollback)
        s.published[result.position] = size
    elif kind == "spark":
        wp = write_pointer_now()
        for writer, batch in enumerate(arg):  # type: ignore[arg-type]
            c.store(t, batch, tx_write_pointer=wp, sequence=EXPLICIT_SEQUENCES + writer * 2**20)
        c.store(t, arg[0], tx_write_pointer=wp, sequence=EXPLICIT_SEQUENCES)  # type: ignore[index]  # a retried task
        result = c.publish(t, [], tx_write_pointer=wp)
        s.rollbacks.append(result.rollback)
        s.published[result.position] = size
    elif kind == "rollback" and s.rollbacks:
        c.rollback(t, s.rollbacks[arg % len(s.rollbacks)])  # type: ignore[operator]
    elif kind == "consume":
        with c.consumer(t, SUB, max_wait_seconds=0, doorbell=None) as consumer:
            if consumer.poll(arg, timeout_seconds=0.5):  # type: ignore[arg-type]
                consumer.commit()
            s.mark = consumer.committed
    elif kind == "sweep":
        # as if the TTL and the grace had passed for every row but the newest ``arg`` ones
        rows = sorted({MessageId.decode(m.id).position for m in c.fetch(t)})
        spared = rows[-arg:] if arg and rows else []
        newest = [m.publish_time for m in c.fetch(t) if MessageId.decode(m.id).position in spared]
        at = (min(newest) if newest else now_ms()) + (TTL + GRACE) * 1000 - 1
        Sweeper(c.installation, grace_seconds=GRACE, clock=lambda: at).sweep_once()


def check(s: Scenario, history: list[tuple[str, object]]) -> None:
    """topic_stats, lag and the exporter's gauges say what a committed-only fetch of the whole topic finds."""
    c, t = s.client, s.topic
    view = c.slices.committed_view()  # (no transaction system here: rolled-back rows are skipped)
    messages = list(c.fetch(t, transaction=view))
    after_mark = messages
    if s.mark is not None:
        after_mark = list(c.fetch(t, start_message=s.mark, inclusive=False, transaction=view))
    true_bytes = sum(len(m.payload) for m in messages)
    stats = c.topic_stats(t)
    where = f"after {history}"
    assert (stats.messages, stats.exact) == (len(messages), True), where
    assert (stats.bytes, stats.bytes_exact) == (true_bytes, True), where
    (name, _, lag), *_ = stats.subscriptions
    assert name == SUB and (lag.messages, lag.exact) == (len(after_mark), True), where
    assert c.lag(t, SUB).messages == len(after_mark), where
    gauges = {
        (metric.name, sample.labels.get("subscription")): sample.value
        for metric in TopicCollector(c, t.namespace, max_age=0).collect()
        for sample in metric.samples
        if sample.labels.get("topic") == str(t)
    }
    assert gauges[("tms_topic_messages", None)] == len(messages), where
    assert gauges[("tms_topic_bytes", None)] == true_bytes, where
    assert gauges[("tms_subscription_lag_messages", SUB)] == len(after_mark), where
    if t.topic == "sequencer":  # each pair of bytes checkpoints differs by the bytes published between them
        generation = c.get_topic(t).generation
        swept = sequencer.low_water(c.installation.messages, t, generation)
        cells = c.installation.messages.get(counter_key(t, generation))
        marks = sorted(
            (int(column[len(BYTES_PREFIX) :], 16), int.from_bytes(value, "big"))
            for column, value in cells.items()
            if column.startswith(BYTES_PREFIX) and column != BYTES_PREFIX
        )
        marks = [(1, 0), *marks] if swept <= 1 else [m for m in marks if m[0] >= swept]
        for (low, below_low), (high, below_high) in itertools.pairwise(marks):
            between = sum(size for position, size in s.published.items() if low <= position < high)
            assert below_high - below_low == between, f"{where}: checkpoints {low} and {high}"


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@example(  # the sweeper's checkpoint at its low-water mark, between two of stats, is what counts from there
    ordering="sequencer", ops=[("publish", [b"x" * 10])] * 5 + [("sweep", 3), ("publish", [b"y"])], spacing=4
)
@given(
    ordering=st.sampled_from(["chain", "sequencer"]),
    ops=st.lists(operation, min_size=1, max_size=8),
    spacing=st.integers(min_value=1, max_value=4),
)
def test_reported_counts_and_bytes_equal_a_full_read(
    installation: MessagingClient,
    monkeypatch: pytest.MonkeyPatch,
    ordering: str,
    ops: list[tuple[str, object]],
    spacing: int,
) -> None:
    # a sequencer generation's bytes checkpoints every ``spacing`` rows or 400 bytes: short sequences pass several
    monkeypatch.setattr(byte_totals, "CHECKPOINT_ROWS", spacing)
    monkeypatch.setattr(byte_totals, "CHECKPOINT_BYTES", 400)
    topic = TopicId(f"n{uuid.uuid4().hex[:10]}", ordering)  # a namespace of its own: the exporter reads only it
    installation.create_topic(topic, {"ttl": str(TTL), "ordering": ordering})
    installation.create_subscription(topic, SUB)
    scenario = Scenario(installation, topic)
    history: list[tuple[str, object]] = []
    for op in ops:
        run(scenario, op)
        history.append(op)
        check(scenario, history)
