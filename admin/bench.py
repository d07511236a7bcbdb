"""tms-admin bench: publish and consume rates and latencies against this installation, on a topic of its own.

Like ``nats bench`` and ``kafka-producer-perf-test``: publishers (threads, each with its own client) publish
for a count or a duration, one message or a batch per call, each call acknowledged before the next (sync) or
through the background publisher (pipelined); one consumer reads through the consumer API (with its doorbell),
at the same time (so publish-to-consume latency is measured) or after the publishers finished (its catch-up
rate). The topic, its subscription and its messages are removed at the end, also when interrupted.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import struct
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option

if TYPE_CHECKING:  # the client is imported when the command runs
    from tms_hbase import MessagingClient, TopicId

NAMESPACE = "tms-bench"
SUBSCRIPTION = "bench"
STAMP = struct.Struct(">d")  # a payload of 8 bytes or more starts with its send time (seconds since the epoch)
PROGRESS_SECONDS = 1.0
POLL_SECONDS = 0.5


@dataclass
class _Counts:
    """What one side did: messages, and each message's (or call's) latency in ms."""

    messages: int = 0
    latencies: list[float] = field(default_factory=list)
    first: float | None = None  # time.monotonic() of the first message
    last: float | None = None
    errors: list[BaseException] = field(default_factory=list)  # of pipelined publishes
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, messages: int, latencies: Sequence[float]) -> None:
        now = time.monotonic()
        with self.lock:
            self.messages += messages
            self.latencies.extend(latencies)
            self.first = now if self.first is None else self.first
            self.last = now


def _percentiles(values: Sequence[float]) -> dict[str, float] | None:
    """p50, p95, p99 and max (nearest rank), in ms rounded to µs; None without values."""
    if not values:
        return None
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))], 3)

    return {"p50": at(50), "p95": at(95), "p99": at(99), "max": round(ordered[-1], 3)}


def _summary(counts: _Counts, size: int, seconds: float) -> dict[str, Any]:
    rate = counts.messages / seconds if seconds > 0 else 0.0
    return {
        "messages": counts.messages,
        "seconds": round(seconds, 3),
        "messages_per_second": round(rate, 1),
        "mb_per_second": round(rate * size / 1e6, 3),
        "latency_ms": _percentiles(counts.latencies),
    }


def _payload(size: int) -> bytes:
    body = os.urandom(size)
    return STAMP.pack(time.time()) + body[STAMP.size :] if size >= STAMP.size else body


def _publisher(
    settings: Settings,
    topic: TopicId,
    plan: _Plan,
    counts: _Counts,
    stop: threading.Event,
) -> None:
    """One publisher: its own client, sync calls or the background publisher, until its share is sent."""
    from tms_hbase import BackgroundPublisher

    with settings.client() as client:
        sent = 0
        if plan.mode == "sync":
            while not plan.done(sent, stop):
                plan.pace(sent)
                batch = [_payload(plan.size) for _ in range(plan.batch_of(sent))]
                began = time.perf_counter()
                client.publish(topic, batch)
                counts.add(len(batch), [(time.perf_counter() - began) * 1000])
                sent += len(batch)
            return
        with BackgroundPublisher(client, on_full="block") as publisher:
            while not plan.done(sent, stop):
                plan.pace(sent)
                batch = [_payload(plan.size) for _ in range(plan.batch_of(sent))]
                began = time.perf_counter()
                future = publisher.publish(topic, batch)
                future.add_done_callback(_acknowledged(counts, len(batch), began))
                sent += len(batch)
            publisher.flush()
        if counts.errors:
            raise counts.errors[0]


def _acknowledged(counts: _Counts, messages: int, began: float) -> Callable[[Future], None]:
    def done(future: Future) -> None:
        error = future.exception()
        if error is not None:
            counts.errors.append(error)
        elif future.result():
            counts.add(messages, [(time.perf_counter() - began) * 1000])

    return done


@dataclass(frozen=True)
class _Plan:
    """One publisher's share: ``count`` messages, or as many as fit before ``until`` (monotonic)."""

    mode: str
    size: int
    batch: int
    count: int | None
    until: float | None
    rate: float | None  # messages per second of this publisher (None: as fast as it goes)
    began: float  # time.monotonic() when publishing began

    def pace(self, sent: int) -> None:
        """With a rate, wait until ``sent`` messages are due (an open loop: a slow call is not made up for by
        waiting less after it, so latency includes any queueing it causes)."""
        if self.rate is not None:
            pause = self.began + sent / self.rate - time.monotonic()
            if pause > 0:
                time.sleep(pause)

    def done(self, sent: int, stop: threading.Event) -> bool:
        if stop.is_set():
            return True
        if self.count is not None:
            return sent >= self.count
        return self.until is not None and time.monotonic() >= self.until

    def batch_of(self, sent: int) -> int:
        return self.batch if self.count is None else min(self.batch, self.count - sent)


def _consume(
    client: MessagingClient,
    topic: TopicId,
    counts: _Counts,
    expected: Callable[[], int | None],
    start: threading.Event,
    stop: threading.Event,
    give_up: float,
    latency: bool,
) -> None:
    """Read through the consumer API until ``expected()`` messages came (known once publishing ended), or
    ``give_up`` seconds passed without one after that; with ``latency``, each stamped message's time from
    its publish call to its delivery."""
    start.wait()
    with client.consumer(topic, SUBSCRIPTION, max_wait_seconds=POLL_SECONDS) as consumer:
        quiet_since = None
        while not stop.is_set():
            messages = consumer.poll(max_messages=1000, timeout_seconds=POLL_SECONDS)
            now = time.time()
            if messages:
                consumer.commit()
                stamped = [m.payload for m in messages if latency and len(m.payload) >= STAMP.size]
                counts.add(len(messages), [(now - STAMP.unpack_from(p)[0]) * 1000 for p in stamped])
                quiet_since = None
            total = expected()
            if total is not None and counts.messages >= total:
                return
            if total is not None and not messages:
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since > give_up:
                    return


def _drop(client: MessagingClient, topic: TopicId) -> None:
    """Delete the bench's subscription and topic, and its generation's rows at once (the sweeper would
    remove them later; nothing else reads a deleted generation)."""
    from tms_hbase.errors import SubscriptionNotFound, TopicNotFound
    from tms_hbase.model.rows import generation_prefix
    from tms_hbase.storage.hbase import KEYS_ONLY

    try:
        generation = client.get_topic(topic).generation
    except TopicNotFound:
        return
    with contextlib.suppress(SubscriptionNotFound):
        client.delete_subscription(topic, SUBSCRIPTION, force=True)
    client.delete_topic(topic)
    prefix = generation_prefix(topic, generation)
    for table in (client.installation.messages, client.installation.payloads):
        while keys := [key for key, _ in table.scan(prefix=prefix, limit=5000, filter=KEYS_ONLY)]:
            table.delete_many(keys)


def _progress(published: _Counts, consumed: _Counts, began: float, stop: threading.Event) -> None:
    while not stop.wait(PROGRESS_SECONDS):
        elapsed = time.monotonic() - began
        click.echo(
            f"bench: {elapsed:5.1f} s  published {published.messages:,} ({published.messages / elapsed:,.0f}/s)"
            f"  consumed {consumed.messages:,} ({consumed.messages / elapsed:,.0f}/s)",
            err=True,
        )


@click.command()
@click.option("--size", type=click.IntRange(min=1), default=128, show_default=True, help="Bytes per message.")
@click.option(
    "--count",
    type=click.IntRange(min=1),
    help="Messages to publish in all (shared by the publishers) [default: 10000 unless --duration].",
)
@click.option(
    "--duration", type=click.FloatRange(min=0, min_open=True), metavar="SECONDS", help="Publish for this long instead."
)
@click.option("--publishers", type=click.IntRange(1, 256), default=1, show_default=True, help="Publisher threads.")
@click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="Messages per publish call.")
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    metavar="MSGS_PER_S",
    help="Publish at most this many messages per second in all (default: as fast as they go). Latencies mean "
    "most at a rate below the maximum: without one, pipelined publishes queue up.",
)
@click.option(
    "--mode",
    type=click.Choice(["sync", "pipelined"]),
    default="sync",
    show_default=True,
    help="sync: each publish acknowledged before the next; pipelined: through the background publisher.",
)
@click.option(
    "--consumer",
    "consumer_mode",
    type=click.Choice(["concurrent", "after", "none"]),
    default="concurrent",
    show_default=True,
    help="concurrent: consume while publishing (publish-to-consume latency); after: once publishing ended "
    "(the catch-up rate); none: publish only.",
)
@click.option(
    "--ordering",
    type=click.Choice(["sequencer", "chain"]),
    default="sequencer",
    show_default=True,
    help="The bench topic's ordering.",
)
@json_option
@pass_settings
@handle_errors
def bench(
    settings: Settings,
    size: int,
    count: int | None,
    duration: float | None,
    publishers: int,
    batch: int,
    rate: float | None,
    mode: str,
    consumer_mode: str,
    ordering: str,
    as_json: bool,
) -> None:
    """Measure publish and consume rates and latencies against this installation.

    Creates a topic of its own (tms-bench:bench-<random>) and a subscription, publishes --count messages
    of --size bytes (or for --duration seconds) from --publishers threads, each with its own client, in
    calls of --batch messages, and reads them back with one consumer (the consumer API, woken by the
    publishers' doorbell). Progress goes to stderr every second; the result to stdout.

    Publish latency is per call: until the call returned (sync) or its future was resolved (pipelined).
    Consume latency (with --consumer concurrent) is from a message's publish call to its delivery
    (messages of 8 bytes or more carry their send time). Rates are messages per second over the time
    the side was busy. The topic, its subscription and its messages are removed at the end, also after
    an error or Ctrl-C; like every deleted topic, its metadata row stays, marked deleted.

    \b
    Examples:
      tms-admin bench                                        # 10,000 × 128 B, one publisher, sync
      tms-admin bench --mode pipelined --count 100000        # through the background publisher
      tms-admin bench --mode pipelined --rate 2000 --duration 10  # latencies at 2,000 msg/s
      tms-admin bench --publishers 4 --batch 100 --size 1024 --duration 10 --json
    """
    from tms_hbase import TopicId

    if count is not None and duration is not None:
        raise click.UsageError("give --count or --duration, not both")
    if count is None and duration is None:
        count = 10_000
    topic = TopicId(NAMESPACE, f"bench-{secrets.token_hex(4)}")
    published, consumed = _Counts(), _Counts()
    stop, publishing_done, consume_start = threading.Event(), threading.Event(), threading.Event()
    with settings.client() as client:
        client.create_topic(topic, {"ordering": ordering, "ttl": "86400"})
        threads: list[threading.Thread] = []
        try:
            if consumer_mode != "none":
                client.create_subscription(topic, SUBSCRIPTION, start="earliest")
            began = time.monotonic()
            until = None if duration is None else began + duration
            per_publisher = None if rate is None else rate / publishers

            def plan(share: int | None) -> _Plan:
                return _Plan(mode, size, batch, share, until, per_publisher, began)

            shares: list[int | None] = (
                [None] * publishers
                if count is None
                else [count // publishers + (1 if i < count % publishers else 0) for i in range(publishers)]
            )
            threads = [
                threading.Thread(
                    target=_publisher,
                    args=(
                        settings,
                        topic,
                        _Plan(mode, size, batch, share, until, per_publisher, began),
                        published,
                        stop,
                    ),
                    name=f"bench-publisher-{i}",
                    daemon=True,
                )
                for i, share in enumerate(shares)
                if share != 0
            ]
            reader = None
            if consumer_mode != "none":
                reader = threading.Thread(
                    target=_consume,
                    args=(
                        client,
                        topic,
                        consumed,
                        lambda: published.messages if publishing_done.is_set() else None,
                        consume_start,
                        stop,
                        max(10.0, settings.timeout),
                        consumer_mode == "concurrent",
                    ),
                    name="bench-consumer",
                    daemon=True,
                )
                reader.start()
                if consumer_mode == "concurrent":
                    consume_start.set()
            reporter = threading.Thread(target=_progress, args=(published, consumed, began, stop), daemon=True)
            reporter.start()
            errors = _run(threads)
            publishing_done.set()
            publish_seconds = time.monotonic() - began
            consume_start.set()
            if reader is not None:
                reader.join()
            stop.set()
            reporter.join()
            if errors:
                raise errors[0]
        finally:
            stop.set()
            for thread in threads:  # after an error or Ctrl-C: let each finish its call, so none writes after the drop
                if thread.is_alive():
                    thread.join(settings.timeout)
            _drop(client, topic)
    consume = None if consumer_mode == "none" else _consumed(consumed, size, published.messages)
    data = {
        "topic": str(topic),
        "ordering": ordering,
        "settings": {
            "size": size,
            "count": count,
            "duration": duration,
            "publishers": publishers,
            "batch": batch,
            "rate": rate,
            "mode": mode,
            "consumer": consumer_mode,
        },
        "publish": _summary(published, size, publish_seconds),
        "consume": consume,
        "load_average": list(os.getloadavg()),
    }
    emit(as_json, data, _human)
    if consume is not None and not consume["complete"]:
        raise click.ClickException(f"the consumer got {consumed.messages:,} of {published.messages:,} messages")


def _run(threads: list[threading.Thread]) -> list[BaseException]:
    """Start the publishers and wait for them; the errors they ended with."""
    errors: list[BaseException] = []
    for thread in threads:
        run = thread.run

        def guarded(run: Callable[[], None] = run) -> None:
            try:
                run()
            except BaseException as exc:  # reported by the command, after the topic is removed
                errors.append(exc)

        thread.run = guarded  # type: ignore[method-assign]
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def _consumed(counts: _Counts, size: int, expected: int) -> dict[str, Any]:
    busy = 0.0 if counts.first is None or counts.last is None else counts.last - counts.first
    summary = _summary(counts, size, busy)
    summary["complete"] = counts.messages == expected
    return summary


def _human(d: dict[str, Any]) -> str:
    s = d["settings"]
    how = f"{s['count']:,} messages" if s["count"] is not None else f"{s['duration']} s"
    lines = [
        f"{d['topic']} ({d['ordering']}): {how} of {s['size']} B, {s['publishers']} publisher(s), "
        f"batch {s['batch']}, {s['mode']}, consumer {s['consumer']}"
    ]
    for side in ("publish", "consume"):
        r = d[side]
        if r is None:
            continue
        line = f"{side:8} {r['messages']:,} msgs in {r['seconds']} s: {r['messages_per_second']:,.0f} msg/s"
        line += f", {r['mb_per_second']} MB/s"
        if r["latency_ms"]:
            lat = r["latency_ms"]
            line += f"; latency ms p50 {lat['p50']} p95 {lat['p95']} p99 {lat['p99']} max {lat['max']}"
        if side == "consume" and not r["complete"]:
            line += " (INCOMPLETE)"
        lines.append(line)
    lines.append("load average: " + ", ".join(f"{x:.2f}" for x in d["load_average"]))
    return "\n".join(lines)
