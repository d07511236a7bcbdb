"""Benchmark: how cost grows with the work. Each dimension is grown by ×10 steps on one installation, and at
each step the operations that should not depend on it are timed and their HBase calls counted:

- subscriptions on one topic (1 → 10,000): publish, one consumer's poll, ``lag``, ``topic_stats``,
  ``list_subscriptions``;
- topics in one installation (10 → 10,000): publish, fetch, ``get_topic``, ``create_topic``;
- stored messages in one topic (10⁴ → 10⁶): a time seek, a fetch of 100 from the middle, publish;
- consumers on one shared subscription (1 → 64, threads of one process: 2 cores hold no more processes), each
  receiving and acknowledging 50 messages: HBase calls per message delivered and acknowledged (reported, not
  checked: idle consumers' looks depend on timing), and the wall time per message;
- distinct keys on a key-ordered shared subscription (``ordering="key"``, 10 → 10⁶): KEYED_CONSUMERS threads
  receive (up to 10 at a time) and acknowledge a backlog of at least as many messages as keys (published 100 a
  batch, as benchmark 12b's), keys taking turns (a key's messages are as many apart as there are keys):
  messages/s, the time of a receive and its ack per message, HBase calls per message (every table's, the
  subscription's state included);
- open transactions on one topic (1 → 1,000, each with a row written and not committed; a real
  ``tms-admin tx serve``): a plain publish, a transaction's publish and commit, and a committed-only consumer's
  poll held behind them (the transaction server's in-progress list grows with them; the HBase calls should not).

An operation marked O(1) should keep its calls and time within 1.5× from the smallest step to the largest; a
seek within O(log n) calls. Calls are counted through the storage port (:mod:`bench.calls`), so they do not
depend on the machine's load: with ``--quick`` (CI) the two smallest steps of each curve run and a call count
that grows where it should stay flat fails the run. Times are goals, reported, not failed on.
"""

from __future__ import annotations

import functools
import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tms_hbase import MessagingClient, Record, TopicId
from tms_hbase.client_tx import TransactionalPublisher
from tms_hbase.model.transaction import Transaction
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext

from .calls import CallCounter
from .common import Result, Settings, bench_tables, median, payloads, percentile, progress
from .shared import CLAIM, PAYLOAD, ROW
from .txlatency import start_tx_server

GROWTH = 1.5  # an O(1) operation's largest step ÷ its smallest, at most
BATCH = payloads(10, 100)
KEYED_CONSUMERS = 2  # consumers of the key-ordered subscription (threads: the machine has 2 cores)
_NAMES = itertools.count()  # topics create_topic makes while measured


@dataclass
class Curve:
    """One operation's cost at each step of a dimension."""

    dimension: str
    operation: str
    flat: str  # "O(1)", "O(log n)" or "O(n)" (reported, not checked)
    steps: list[int] = field(default_factory=list)
    medians_ms: list[float] = field(default_factory=list)
    p99s_ms: list[float] = field(default_factory=list)
    calls: list[float] = field(default_factory=list)
    # False: the calls depend on timing (idle consumers' looks), so they are reported, not checked
    checked: bool = True
    rates: list[float] = field(default_factory=list)  # messages/s at each step (curves of a throughput)

    def growth(self, values: list[float]) -> float:
        return values[-1] / values[0] if values[0] else (1.0 if not values[-1] else math.inf)

    def calls_bound(self) -> float:
        """The call count the largest step may reach: the smallest step's × 1.5, × log n growth for a seek."""
        if self.flat == "O(log n)":
            return self.calls[0] * GROWTH * math.log10(self.steps[-1]) / math.log10(max(self.steps[0], 10))
        return self.calls[0] * GROWTH


def _measure(curve: Curve, step: int, operation: Callable[[], object], client: MessagingClient, reps: int) -> None:
    counter = CallCounter()
    times = []
    with counter.counting(client.installation):
        for _ in range(reps):
            start = time.perf_counter()
            operation()
            times.append((time.perf_counter() - start) * 1000)
    curve.steps.append(step)
    curve.medians_ms.append(median(times))
    curve.p99s_ms.append(percentile(times, 99))
    curve.calls.append(counter.total / reps)


def _subscriptions(client: MessagingClient, steps: list[int], reps: int, _settings: Settings) -> list[Curve]:
    topic = TopicId("scale", "subs")
    client.create_topic(topic)
    client.publish(topic, BATCH)
    curves = {
        name: Curve("subscriptions on one topic", name, flat)
        for name, flat in (
            ("publish 10 × 100 B", "O(1)"),
            ("publish 1 and poll it (one consumer)", "O(1)"),
            ("lag", "O(1)"),
            ("topic_stats", "O(1)"),
            ("list_subscriptions", "O(n)"),
        )
    }
    made = 0
    for step in steps:
        while made < step:
            client.create_subscription(topic, f"s{made}")
            made += 1
        progress(f"scale: {step:,} subscriptions")
        with client.consumer(topic, "s0") as consumer:

            def poll() -> None:
                client.publish(topic, BATCH[:1])
                if not consumer.poll(100, 30.0):
                    raise AssertionError("the consumer's poll got nothing")
                consumer.commit()

            _measure(curves["publish 10 × 100 B"], step, lambda: client.publish(topic, BATCH), client, reps)
            _measure(curves["publish 1 and poll it (one consumer)"], step, poll, client, reps)
        _measure(curves["lag"], step, lambda: client.lag(topic, "s0"), client, reps)
        _measure(curves["topic_stats"], step, lambda: client.topic_stats(topic), client, reps)
        _measure(curves["list_subscriptions"], step, lambda: client.list_subscriptions(topic), client, reps)
    return list(curves.values())


def _topics(client: MessagingClient, steps: list[int], reps: int, _settings: Settings) -> list[Curve]:
    probe = TopicId("scalet", "probe")
    client.create_topic(probe)
    client.publish(probe, BATCH)
    curves = {
        name: Curve("topics in one installation", name, "O(1)")
        for name in ("publish 10 × 100 B", "fetch 10", "get_topic", "create_topic")
    }
    made = 1
    for step in steps:
        while made < step:
            client.create_topic(TopicId("scalet", f"t{made}"))
            made += 1
        progress(f"scale: {step:,} topics")
        _measure(curves["publish 10 × 100 B"], step, lambda: client.publish(probe, BATCH), client, reps)
        _measure(curves["fetch 10"], step, lambda: list(client.fetch(probe, limit=10)), client, reps)
        _measure(curves["get_topic"], step, lambda: client.get_topic(probe), client, reps)

        def create() -> None:
            client.create_topic(TopicId("scalex", f"x{next(_NAMES)}"))

        _measure(curves["create_topic"], step, create, client, reps)
    return list(curves.values())


def _messages(client: MessagingClient, steps: list[int], reps: int, _settings: Settings) -> list[Curve]:
    topic = TopicId("scalem", "stored")
    client.create_topic(topic)
    chunk = payloads(1000, 100)
    curves = {
        name: Curve("stored messages in one topic", name, flat)
        for name, flat in (("time seek", "O(log n)"), ("fetch 100 from the middle", "O(log n)"), ("publish", "O(1)"))
    }
    stored, middle_time, middle_id = 0, 0, b""
    for step in steps:
        while stored < step:
            published = client.publish(topic, chunk[: min(len(chunk), step - stored)])
            stored += published.count
            if stored >= step // 2 and not middle_id:  # the step's middle: the last message published so far
                middle_time, middle_id = int(time.time() * 1000), published.last_id or b""
        progress(f"scale: {step:,} stored messages")

        def seek(at: int = middle_time) -> None:
            list(client.fetch(topic, start_time_ms=at, limit=1))

        def middle(start: bytes = middle_id) -> None:
            list(client.fetch(topic, start, limit=100))

        _measure(curves["time seek"], step, seek, client, reps)
        _measure(curves["fetch 100 from the middle"], step, middle, client, reps)
        _measure(curves["publish"], step, lambda: client.publish(topic, BATCH), client, reps)
        middle_id = b""  # the next step's middle is found again
    return list(curves.values())


def _consumers(client: MessagingClient, steps: list[int], _reps: int, _settings: Settings) -> list[Curve]:
    per_message = Curve("consumers on one shared subscription", "receive and ack, per message", "O(1)", checked=False)
    for step in steps:
        topic, name, total = TopicId("scalec", f"queue{step}"), "work", 50 * step
        client.create_topic(topic)
        client.create_subscription(topic, name, shared=True, ack_timeout_seconds=60, claim_size=16)
        for first in range(0, total, 100):
            client.publish(topic, payloads(min(100, total - first), 100))
        progress(f"scale: {step} consumers")
        calls = client.installation.calls  # round trips of every table, the subscriptions' state included
        started = time.perf_counter()
        _drain(client, topic, name, step, total)
        seconds = time.perf_counter() - started
        per_message.steps.append(step)
        per_message.medians_ms.append(seconds * 1000 / total)  # wall time per message, all consumers together
        per_message.p99s_ms.append(per_message.medians_ms[-1])
        per_message.calls.append((client.installation.calls - calls) / total)
    return [per_message]


def _drain(client: MessagingClient, topic: TopicId, name: str, consumers: int, total: int) -> None:
    """``consumers`` threads, each a shared consumer receiving and acknowledging until ``total`` are done."""
    done = [0] * consumers
    errors: list[BaseException] = []

    def consume(i: int) -> None:
        try:
            with client.shared_consumer(topic, name) as consumer:
                while sum(done) < total:
                    for delivery in consumer.receive(10, 1.0):
                        consumer.ack(delivery)
                        done[i] += 1
        except BaseException as exc:  # a consumer that failed fails the benchmark, below
            errors.append(exc)

    _run_threads([functools.partial(consume, i) for i in range(consumers)], errors)
    if sum(done) != total:
        raise AssertionError(f"{consumers} consumers acknowledged {sum(done)} of {total} messages")


def _keys(client: MessagingClient, steps: list[int], _reps: int, settings: Settings) -> list[Curve]:
    """A key-ordered subscription's backlog of ``max(step, minimum)`` messages whose keys take turns over
    ``step`` keys, received and acknowledged by KEYED_CONSUMERS consumers; a receive's time and its ack's,
    per message it got."""
    # (calls reported, not checked: how many a look finds depends on timing, as for the consumers' curve; a reap's
    # reads are bounded by tests/integration/test_shared_key_order.py)
    curve = Curve(
        "distinct keys on a key-ordered shared subscription", "receive and ack, per message", "O(1)", checked=False
    )
    minimum = settings.pick(10_000, 2_000)
    for step in steps:
        topic, name, total = TopicId("scalek", f"keys{step}"), "work", max(step, minimum)
        client.create_topic(topic)
        client.create_subscription(topic, name, shared=True, ack_timeout_seconds=60, claim_size=CLAIM, ordering="key")
        chunk = payloads(ROW, PAYLOAD)
        for first in range(0, total, ROW):  # (as benchmark 12b's topics: a batch row of 100 per range)
            count = min(ROW, total - first)
            client.publish(topic, [Record(chunk[i], key=b"k%d" % ((first + i) % step)) for i in range(count)])
        progress(f"scale: {step:,} keys, {total:,} messages")
        calls = client.installation.calls
        started = time.perf_counter()
        times = _drain_keyed(client, topic, name, total)
        seconds = time.perf_counter() - started
        curve.steps.append(step)
        curve.rates.append(total / seconds)
        curve.medians_ms.append(median(times))
        curve.p99s_ms.append(percentile(times, 99))
        curve.calls.append((client.installation.calls - calls) / total)
    return [curve]


def _drain_keyed(client: MessagingClient, topic: TopicId, name: str, total: int) -> list[float]:
    """KEYED_CONSUMERS threads receiving and acknowledging until ``total`` are done, each key in order (checked:
    a key's messages are published in turn, so each delivery's id is above its key's last one); each receive
    and ack's time per message it got (ms)."""
    done, times, last = [0], [], dict[bytes | None, bytes]()
    errors: list[BaseException] = []
    lock = threading.Lock()

    def consume() -> None:
        try:
            with client.shared_consumer(topic, name) as consumer:
                while done[0] < total:
                    start = time.perf_counter()
                    got = consumer.receive(10, 1.0)
                    with lock:  # (before the ack: a key's next message goes out only after it)
                        for d in got:
                            if last.get(d.key, b"") >= d.id:
                                raise AssertionError(
                                    f"key {d.key!r}: {d.id.hex()} (delivery {d.deliveries}) delivered after "
                                    f"{last[d.key].hex()}"
                                )
                            last[d.key] = d.id
                    if got:
                        consumer.ack(*got)
                        took = (time.perf_counter() - start) * 1000 / len(got)
                        with lock:
                            done[0] += len(got)
                            times.append(took)
        except BaseException as exc:  # a consumer that failed fails the benchmark, below
            errors.append(exc)

    _run_threads([consume] * KEYED_CONSUMERS, errors)
    if done[0] != total:
        raise AssertionError(f"{KEYED_CONSUMERS} consumers acknowledged {done[0]} of {total} messages")
    return times


def _transactions(client: MessagingClient, steps: list[int], reps: int, settings: Settings) -> list[Curve]:
    server, tx_address = start_tx_server(settings, client.installation.prefix)
    try:
        return _open_transactions(client, steps, reps, tx_address)
    finally:
        server.terminate()
        server.wait(timeout=60)


def _open_transactions(client: MessagingClient, steps: list[int], reps: int, tx_address: str) -> list[Curve]:
    topic = TopicId("scaletx", "open")
    client.create_topic(topic)
    curves = {
        name: Curve("open transactions on one topic", name, "O(1)")
        for name in ("publish 10 × 100 B", "publish 1 in a transaction and commit", "poll held behind them")
    }
    opened: list[Transaction] = []
    with (
        TransactionClient(tx_address) as tx,
        MessagingClient(config=client.config, tx_server=tx_address) as reader,
    ):
        publisher = TransactionalPublisher(client)
        committing = TransactionContext(tx, publisher)
        reader.create_subscription(topic, "s")
        reader.publish(topic, BATCH[:1])
        with reader.consumer(topic, "s") as consumer:
            if not consumer.poll(10, 30.0):
                raise AssertionError("the consumer did not get the message published before the transactions")
            try:
                for step in steps:
                    while len(opened) < step:  # each holds one message and stays open (an hour's timeout)
                        # a row written in a transaction not yet committed (as a long transaction's or an
                        # application's with its own write pointer): committed-only readers stop at it
                        running = tx.start_short(3600)
                        client.publish(topic, [b"open"], tx_write_pointer=running.write_pointer)
                        opened.append(running)
                    progress(f"scale: {step:,} open transactions")

                    def commit() -> None:
                        with committing.transaction():
                            publisher.publish(str(topic), BATCH[:1])

                    def held() -> None:
                        if consumer.poll(100, 0.0):
                            raise AssertionError("the consumer passed an open transaction")

                    _measure(curves["publish 10 × 100 B"], step, lambda: client.publish(topic, BATCH), client, reps)
                    _measure(curves["publish 1 in a transaction and commit"], step, commit, client, reps)
                    _measure(curves["poll held behind them"], step, held, reader, reps)
            finally:
                for running in opened:
                    tx.abort(running)
    return list(curves.values())


def run(settings: Settings) -> Result:
    reps = settings.pick(20, 3)
    dimensions = {
        "subscriptions": (_subscriptions, settings.pick([1, 10, 100, 1000, 10_000], [1, 10])),
        "topics": (_topics, settings.pick([10, 100, 1000, 10_000], [10, 100])),
        "messages": (_messages, settings.pick([10_000, 100_000, 1_000_000], [1000, 10_000])),
        "consumers": (_consumers, settings.pick([1, 4, 16, 64], [1, 4])),
        "keys": (_keys, settings.pick([10, 100, 1000, 10_000, 100_000, 1_000_000], [10, 100])),
        "transactions": (_transactions, settings.pick([1, 10, 100, 1000], [1, 10])),
    }
    result = Result("scale", f"How cost grows ({reps} operations per step; calls are HBase calls per operation)")
    curves: list[Curve] = []
    for name, (grow, steps) in dimensions.items():
        with bench_tables(settings, f"scale{name}") as (client, _raw, _raw_name):
            curves += grow(client, steps, reps, settings)
    rows = []
    for c in curves:
        rows.append(
            [
                c.dimension,
                c.operation,
                c.flat,
                " → ".join(f"{s:,}" for s in c.steps),
                " / ".join(f"{m:.2f}" for m in c.medians_ms),
                " / ".join(f"{p:.2f}" for p in c.p99s_ms),
                " / ".join(f"{n:g}" for n in c.calls),
                " / ".join(f"{r:,.0f}" for r in c.rates) or "—",
            ]
        )
    result.table(["dimension", "operation", "should be", "steps", "median ms", "p99 ms", "HBase calls", "msg/s"], rows)
    broken = []
    for c in curves:
        if c.flat == "O(n)" or not c.checked:
            continue
        calls_ok = c.calls[-1] <= c.calls_bound()
        time_growth = c.growth(c.medians_ms)
        result.goal(
            f"{c.dimension}: {c.operation} {c.flat} in HBase calls",
            f"{c.calls[0]:g} → {c.calls[-1]:g}",
            calls_ok,
        )
        if c.flat == "O(1)":
            result.goal(
                f"{c.dimension}: {c.operation} median within {GROWTH}×", f"{time_growth:.2f}×", time_growth <= GROWTH
            )
        if not calls_ok:
            broken.append(f"{c.dimension}: {c.operation} ({c.calls[0]:g} → {c.calls[-1]:g} calls)")
    result.samples = {
        "curves": [
            {
                "dimension": c.dimension,
                "operation": c.operation,
                "flat": c.flat,
                "steps": c.steps,
                "median_ms": c.medians_ms,
                "p99_ms": c.p99s_ms,
                "calls": c.calls,
                "messages_per_s": c.rates,
            }
            for c in curves
        ]
    }
    if broken:  # deterministic (calls, not time): a step made super-linear fails the run, in CI too
        result.error = "calls grow where they should stay flat: " + "; ".join(broken)
    return result


def _run_threads(work: list[Callable[[], None]], errors: list[BaseException]) -> None:
    """Each of ``work`` in a thread of its own, all waited for; the first error they recorded is raised."""
    threads = [threading.Thread(target=w) for w in work]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
