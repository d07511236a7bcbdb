"""The processes of a verification run: ``python -m tests.verify.worker CONFIG_JSON``.

The configuration names the role, the process name, the run folder, the topics and a seed. Every role
records what it does to the history (``history.Recorder``); payloads are unique strings such as
``w3-17`` (process name, message number). Roles:

- ``writer``: publishes batches of 1-3 messages to random topics; long-lived (until the stop file
  appears) or short-lived (``ops`` publishes), then leaves with ``close()`` or with ``os._exit(0)``
  without it (``exit``: offsets it reserved are left as holes);
- ``reader``: one long-lived client polling each topic from where it stopped (a stream);
- ``fresh-reader``: a new MessagingClient for every poll, reading each topic from its start;
- ``probe``: a one-shot process: reads each topic from its start, then time-seeks to publish times it saw;
- ``consumer``: consumers on subscriptions, opened and closed in turn, committing as they go;
- ``tx-writer`` / ``tx-reader``: TransactionContext + TransactionalPublisher, and TransactionalReader;
- ``final``: one-shot reads of every kind after the faults healed, and the counts (stats, lag).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import select
import signal
import sys
import time
from pathlib import Path
from typing import Any

from .history import Recorder


def patch_sleep_under_faketime() -> None:
    """libfaketime 0.9.10 (Debian 12) breaks ``time.sleep`` when the monotonic clock is not faked: Python
    3.11 sleeps with clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) and gets EINVAL
    (wolfcw/libfaketime#426). Sleep with a relative select() timeout instead; every other wait
    (Event, Condition, Lock, socket timeouts) works as it is."""
    if "faketime" in os.environ.get("LD_PRELOAD", ""):

        def sleep(seconds: float) -> None:
            if seconds > 0:
                select.select([], [], [], seconds)

        time.sleep = sleep  # type: ignore[assignment]


patch_sleep_under_faketime()

# Imported after the patch, so modules that bind time.sleep at import get the working one.
from tms_hbase import MessagingClient, TopicId  # noqa: E402
from tms_hbase.errors import (  # noqa: E402
    BatchTooLarge,
    InvalidArgument,
    SubscriptionAlreadyExists,
    SubscriptionBusy,
    TopicNotFound,
    TransactionConflict,
    TransactionFailure,
)
from tms_hbase.model.message import Message  # noqa: E402
from tms_hbase.model.message_id import MessageId  # noqa: E402

DEFINITE = (InvalidArgument, BatchTooLarge, TopicNotFound)  # errors raised before anything is written


def encode(messages: list[Message]) -> list[list[Any]]:
    """Messages as the history keeps them: [payload, [generation, position, index], publish time ms]."""
    out = []
    for m in messages:
        mid = MessageId.decode(m.id)
        out.append([m.payload.decode(errors="replace"), [mid.generation, mid.position, mid.index], m.publish_time])
    return out


def decode_id(value: list[int] | None) -> bytes | None:
    return None if value is None else bytes(MessageId(*value))


class Whole:
    """Records whole-topic reads compactly: a view that continues this process's previous view of the
    topic (the same messages from some point, then new ones) is recorded as (base read, dropped, new
    messages); the worker compares the views itself, the checker rebuilds them."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[int, list[list[Any]]]] = {}

    def fields(self, topic: str, op: int, msgs: list[list[Any]]) -> dict[str, Any]:
        prev = self.last.get(topic)
        self.last[topic] = (op, msgs)
        if prev and msgs:
            base, old = prev
            ids = [m[1] for m in old]
            if msgs[0][1] in ids:
                drop = ids.index(msgs[0][1])
                keep = len(old) - drop
                if old[drop:] == msgs[:keep]:
                    return {"base": base, "drop": drop, "msgs": msgs[keep:]}
        return {"msgs": msgs}


class Worker:
    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = cfg
        self.name: str = cfg["name"]
        self.run = Path(cfg["run_dir"])
        self.rec = Recorder(self.run / "history" / f"{self.name}.jsonl", self.name)
        self.rng = random.Random(cfg["seed"])
        self.stop_file = self.run / "stop"
        self.timeout = float(cfg.get("timeout", 5.0))
        self.topics: list[dict[str, Any]] = cfg["topics"]

    def client(self) -> MessagingClient:
        return MessagingClient(timeout_seconds=self.timeout, create_tables=False)

    def stopped(self) -> bool:
        return self.stop_file.exists()

    def writers_stopped(self) -> bool:
        return self.stop_file.exists() or (self.run / "stop-writers").exists()

    def topics_of(self, *kinds: str) -> list[dict[str, Any]]:
        return [t for t in self.topics if t["kind"] in kinds]

    def pause(self, low: float, high: float) -> None:
        time.sleep(self.rng.uniform(low, high))

    # -- writers ------------------------------------------------------------------------------

    def die_after_reserving(self, at: int) -> None:
        """SIGKILL this process right after its ``at``-th reservation of offsets in a sequencer topic (between
        reserving and writing, the dead writer's hole a new reader must pass), as tests/workers/writer.py does: the
        module function the writer calls is wrapped; the library itself is unchanged."""
        from tms_hbase.ordering import sequencer

        reserve, calls = sequencer.reserve, iter(range(1, 2**62))

        def reserving(*args: Any, **kwargs: Any) -> int:
            first = reserve(*args, **kwargs)
            if next(calls) == at:
                self.rec.event("exit", how="SIGKILL between reserving offsets and writing", offset=first)
                os.kill(os.getpid(), signal.SIGKILL)
            return first

        sequencer.reserve = reserving

    def writer(self) -> None:
        topics = self.topics_of("main", "fresh", "ttl")
        if self.cfg.get("die_after_reserve"):
            self.die_after_reserving(int(self.cfg["die_after_reserve"]))
        ops = self.cfg.get("ops")
        client = self.client()
        number = done = 0
        # A short-lived writer is usually a script publishing to one topic; a long-lived one moves between
        # topics in runs (so that it is busy on one topic at a time and reserves blocks ahead there).
        topic = self.cfg.get("topic") or self.rng.choice(topics)["name"]
        one_topic = ops is not None and (self.rng.random() < 0.7 or "topic" in self.cfg)
        while (ops is None and not self.writers_stopped()) or (ops is not None and done < ops):
            if not one_topic and self.rng.random() < 0.2:
                topic = self.rng.choice(topics)["name"]
            size = self.rng.randint(1, 3)
            payloads = [f"{self.name}-{number + i}" for i in range(size)]
            number += size
            op = self.rec.invoke("publish", topic=topic, payloads=payloads)
            try:
                client.publish(TopicId.parse(topic), [p.encode() for p in payloads])
            except DEFINITE as exc:
                self.rec.complete("fail", "publish", op, error=repr(exc))
            except Exception as exc:  # the outcome is open: HBaseUnavailable, PublishOutcomeUnknown, ...
                self.rec.complete("info", "publish", op, error=repr(exc))
            else:
                self.rec.complete("ok", "publish", op)
            done += 1
            if self.cfg.get("burst") or (ops is None and self.rng.random() < 0.3):
                continue  # back to back: a busy writer reserves blocks of offsets ahead (docs/ordering.md)
            self.pause(*self.cfg.get("pause", (0.05, 0.3)))
        if self.cfg.get("exit") == "exit":
            self.rec.event("exit", how="os._exit without close()")
            os._exit(0)
        self.rec.event("exit", how="close()")
        client.close()

    def tx_writer(self) -> None:
        from tms_hbase.client_tx import TransactionalPublisher
        from tms_hbase.tx.client import TransactionClient
        from tms_hbase.txaware.context import TransactionContext

        class Abort(Exception):
            pass

        topics = self.topics_of("tx")
        client = self.client()
        tx_client = TransactionClient(self.cfg["tx_address"], timeout_seconds=self.timeout)
        publisher = TransactionalPublisher(client)
        context = TransactionContext(tx_client, publisher)
        number = 0
        while not self.writers_stopped():
            topic = self.rng.choice(topics)["name"]
            size = self.rng.randint(1, 3)
            payloads = [f"{self.name}-{number + i}" for i in range(size)]
            number += size
            abort = self.rng.random() < 0.25
            op = self.rec.invoke("txpublish", topic=topic, payloads=payloads, abort=abort)
            commit_start: float | None = None
            try:
                with context.transaction():
                    publisher.publish(TopicId.parse(topic), [p.encode() for p in payloads])
                    if abort:
                        raise Abort
                    commit_start = self.rec.now()
            except Abort:
                self.rec.complete("fail", "txpublish", op, aborted=True)
            except (TransactionConflict, TransactionFailure) as exc:  # rolled back, or invalidated
                self.rec.complete("fail", "txpublish", op, error=repr(exc), commit_start=commit_start)
            except Exception as exc:
                kind = "fail" if commit_start is None else "info"  # buffered only, never persisted
                self.rec.complete(kind, "txpublish", op, error=repr(exc), commit_start=commit_start)
                context.tx = None
            else:
                self.rec.complete("ok", "txpublish", op, commit_start=commit_start)
            self.pause(0.1, 0.4)
        self.rec.event("exit", how="close()")
        client.close()

    # -- readers ------------------------------------------------------------------------------

    def reader(self) -> None:
        topics = self.topics_of("main", "ttl")
        client = self.client()
        last: dict[str, list[int] | None] = {t["name"]: None for t in topics}
        while not self.stopped():
            for t in topics:
                topic = t["name"]
                start = last[topic]
                op = self.rec.invoke("read", topic=topic, kind="long", stream=f"{self.name}/{topic}", start=start)
                try:
                    if start is None:
                        got = list(client.fetch(TopicId.parse(topic), limit=500))
                    else:
                        got = list(
                            client.fetch(
                                TopicId.parse(topic), start_message=decode_id(start), inclusive=False, limit=500
                            )
                        )
                except Exception as exc:
                    self.rec.complete("fail", "read", op, error=repr(exc))
                    continue
                msgs = encode(got)
                self.rec.complete("ok", "read", op, msgs=msgs)
                if msgs:
                    last[topic] = msgs[-1][1]
            self.pause(0.1, 0.5)
        client.close()

    def whole_read(self, topic: str, kind: str, whole: Whole, **extra: Any) -> list[list[Any]] | None:
        """Read the topic from its start with a new client; None if the read failed."""
        op = self.rec.invoke("read", topic=topic, kind=kind, whole=True, **extra)
        try:
            with self.client() as client:
                msgs = encode(list(client.fetch(TopicId.parse(topic))))
        except Exception as exc:
            self.rec.complete("fail", "read", op, error=repr(exc))
            return None
        self.rec.complete("ok", "read", op, **whole.fields(topic, op, msgs))
        return msgs

    def fresh_reader(self) -> None:
        whole = Whole()
        while not self.stopped():
            for t in self.topics_of("main", "fresh", "ttl"):
                self.whole_read(t["name"], "fresh-client", whole)
            self.pause(0.5, 1.5)

    def seek(self, topic: str, at: int, **extra: Any) -> None:
        op = self.rec.invoke("seek", topic=topic, T=at, **extra)
        try:
            with self.client() as client:
                msgs = encode(list(client.fetch(TopicId.parse(topic), start_time_ms=at, limit=20)))
        except Exception as exc:
            self.rec.complete("fail", "seek", op, error=repr(exc))
            return
        self.rec.complete("ok", "seek", op, msgs=msgs)

    def seek_times(self, msgs: list[list[Any]], count: int) -> list[int]:
        times = []
        for _ in range(count if msgs else 0):
            m = self.rng.choice(msgs)
            times.append(m[2] + (0 if self.rng.random() < 0.6 else self.rng.randint(-1500, 1500)))
        return times

    def probe(self) -> None:
        whole = Whole()
        for t in self.topics_of("main", "fresh", "ttl"):
            msgs = self.whole_read(t["name"], "fresh-process", whole)
            for at in self.seek_times(msgs or [], 2):
                self.seek(t["name"], at)
        self.rec.event("exit", how="close()")

    # -- consumers ----------------------------------------------------------------------------

    def consumer(self) -> None:
        topics = self.topics_of("main", "tx")  # (subscriptions deliver committed messages only: checked)
        client = self.client()
        sessions = 0
        while not self.stopped():
            topic = self.rng.choice(topics)["name"]
            tid = TopicId.parse(topic)
            sub = "sub-" + tid.topic
            sessions += 1
            session = f"{self.name}/{sessions}"
            op = self.rec.invoke("open", topic=topic, sub=sub, session=session)
            try:
                consumer = client.consumer(tid, sub, max_wait_seconds=1.0, lease_seconds=4.0, doorbell=None)
            except SubscriptionBusy as exc:
                self.rec.complete("fail", "open", op, error=repr(exc))
                self.pause(0.2, 1.0)
                continue
            except Exception as exc:
                self.rec.complete("fail", "open", op, error=repr(exc))
                self.pause(0.2, 1.0)
                continue
            current = "open"
            try:
                mark = client.get_subscription(tid, sub).position
                self.rec.complete("ok", "open", op, mark=_id(mark))
                for _ in range(self.rng.randint(1, 15)):
                    if self.stopped():
                        break
                    current, op = "consume", self.rec.invoke("consume", topic=topic, sub=sub, session=session)
                    got = consumer.poll(max_messages=50, timeout_seconds=1.0)
                    msgs = encode(got)
                    self.rec.complete("ok", "consume", op, msgs=msgs, stream=session)
                    if got and self.rng.random() < 0.8:
                        current = "commit"
                        op = self.rec.invoke("commit", topic=topic, sub=sub, session=session, id=msgs[-1][1])
                        consumer.commit()
                        self.rec.complete("ok", "commit", op)
                if self.rng.random() < 0.1:
                    self.rec.event("exit", how="os._exit holding a consumer lease")
                    os._exit(0)
            except Exception as exc:  # LeaseLost, HBaseUnavailable, ...: this session ends
                self.rec.complete("fail", current, op, error=repr(exc))
            finally:
                try:
                    consumer.close()
                except Exception as exc:
                    self.rec.event("note", what=f"consumer close failed: {exc!r}")
        client.close()

    def tx_reader(self) -> None:
        from tms_hbase.client_tx import TransactionalReader
        from tms_hbase.tx.client import TransactionClient

        client = self.client()
        tx_client = TransactionClient(self.cfg["tx_address"], timeout_seconds=self.timeout)
        readers = {
            t["name"]: TransactionalReader(client, tx_client, TopicId.parse(t["name"])) for t in self.topics_of("tx")
        }
        while not self.stopped():
            for topic, reader in readers.items():
                start = reader.last_id
                op = self.rec.invoke("txread", topic=topic, stream=f"{self.name}/{topic}", start=_id(start))
                try:
                    msgs = encode(reader.poll(limit=500))
                except Exception as exc:
                    self.rec.complete("fail", "txread", op, error=repr(exc))
                    continue
                self.rec.complete("ok", "txread", op, msgs=msgs)
            self.pause(0.2, 0.6)
        client.close()

    # -- the final phase ----------------------------------------------------------------------

    def final(self) -> None:
        kinds = self.cfg["kinds"]
        whole = Whole()
        plain = self.topics_of("main", "fresh", "ttl")
        if "fetch" in kinds:
            for t in plain:
                self.whole_read(t["name"], "final-fetch", whole, final=True)
        if "range" in kinds:
            for t in plain:
                self.final_range(t["name"])
        if "consumer" in kinds:
            for t in plain + self.topics_of("tx"):
                self.final_consumer(t["name"])
        if "tx" in kinds:
            for t in self.topics_of("tx"):
                self.final_tx(t["name"])
        if "seek" in kinds:
            for t in plain:
                msgs = self.whole_read(t["name"], "final-fetch", whole, final=True)
                for at in self.seek_times(msgs or [], int(self.cfg.get("seeks", 10))):
                    self.seek(t["name"], at, final=True)
        if "stats" in kinds:
            for t in plain:
                self.final_stats(t["name"])
        self.rec.event("exit", how="close()")

    def final_range(self, topic: str) -> None:
        op = self.rec.invoke("read", topic=topic, kind="final-range", whole=True, final=True)
        try:
            with self.client() as client:
                tid = TopicId.parse(topic)
                span = client.slices.positions(tid)
                got = (
                    []
                    if span.last < span.first
                    else list(client.slices.fetch_range(tid, MessageId(span.generation, span.first, 0)))
                )
        except Exception as exc:
            self.rec.complete("fail", "read", op, error=repr(exc))
            return
        self.rec.complete("ok", "read", op, msgs=encode(got))

    def final_consumer(self, topic: str) -> None:
        """A new subscription from the earliest message, drained by a consumer that commits half way
        (so its lag is checked against a known truth)."""
        tid = TopicId.parse(topic)
        sub = f"final-{self.name}-{tid.topic}"
        op = self.rec.invoke("read", topic=topic, kind="final-consumer", whole=True, final=True, sub=sub)
        try:
            with self.client() as client:
                with contextlib.suppress(SubscriptionAlreadyExists):
                    client.create_subscription(tid, sub, start="earliest")
                got: list[Message] = []
                with client.consumer(tid, sub, max_wait_seconds=0.5, doorbell=None) as consumer:
                    while batch := consumer.poll(max_messages=1000, timeout_seconds=0.5):
                        got.extend(batch)
                    if got:
                        consumer.commit(got[len(got) // 2])
        except Exception as exc:
            self.rec.complete("fail", "read", op, error=repr(exc))
            return
        self.rec.complete("ok", "read", op, msgs=encode(got))

    def final_tx(self, topic: str) -> None:
        from tms_hbase.client_tx import TransactionalReader
        from tms_hbase.tx.client import TransactionClient

        op = self.rec.invoke("txread", topic=topic, kind="final-tx", whole=True, final=True)
        try:
            with (
                self.client() as client,
                TransactionClient(self.cfg["tx_address"], timeout_seconds=self.timeout) as txc,
            ):
                reader = TransactionalReader(client, txc, TopicId.parse(topic))
                got: list[Message] = []
                while batch := reader.poll(limit=1000):
                    got.extend(batch)
        except Exception as exc:
            self.rec.complete("fail", "txread", op, error=repr(exc))
            return
        self.rec.complete("ok", "txread", op, msgs=encode(got))

    def final_stats(self, topic: str) -> None:
        tid = TopicId.parse(topic)
        op = self.rec.invoke("stats", topic=topic, final=True)
        try:
            with self.client() as client:
                stats = client.topic_stats(tid)
                subs = []
                for s in client.list_subscriptions(tid):
                    lag = client.lag(tid, s.name)
                    mark = client.get_subscription(tid, s.name).position
                    subs.append([s.name, _id(mark), lag.messages, lag.exact])
        except Exception as exc:
            self.rec.complete("fail", "stats", op, error=repr(exc))
            return
        self.rec.complete("ok", "stats", op, messages=stats.messages, exact=stats.exact, subs=subs)


def _id(raw: bytes | None) -> list[int] | None:
    if raw is None:
        return None
    mid = MessageId.decode(raw)
    return [mid.generation, mid.position, mid.index]


ROLES = {
    "writer": Worker.writer,
    "tx-writer": Worker.tx_writer,
    "reader": Worker.reader,
    "fresh-reader": Worker.fresh_reader,
    "probe": Worker.probe,
    "consumer": Worker.consumer,
    "tx-reader": Worker.tx_reader,
    "final": Worker.final,
}


def main() -> None:
    cfg = json.loads(sys.argv[1])
    worker = Worker(cfg)
    worker.rec.event("start", role=cfg["role"], pid=os.getpid())
    ROLES[cfg["role"]](worker)


if __name__ == "__main__":
    main()
