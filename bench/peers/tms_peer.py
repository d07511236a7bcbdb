"""tms-hbase as a peer: the running HBase (its Thrift gateway, as for the other benchmarks), fresh
``benchpeers_<run>`` tables dropped at the end, and a real transaction server (``tms-admin tx serve``,
started with the other benchmarks' starter) when the transactional workload runs.

Reads and the tailing consumer use the consumer API (a subscription of their own from the earliest message,
``consumer.poll``, woken by publishers' doorbells); pipelined publishing uses the background publisher."""

from __future__ import annotations

import contextlib
import importlib.metadata
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from typing import Any

from tms_hbase import BackgroundPublisher, Consumer, MessagingClient, Record, TopicId, __version__
from tms_hbase_launcher.paths import HBASE_VERSION

from .. import latency
from ..common import Settings, bench_tables
from ..shared import IDLE_POLL
from ..txlatency import start_tx_server
from . import system
from .system import Endpoint, ServerInfo, Tailer

NAMESPACE = "bench"
READ_BATCH = 1000  # messages a read takes per poll


class _Subscribed:
    """A consumer of a subscription of its own, from the topic's earliest message; the subscription is
    deleted when it closes."""

    def __init__(self, client: MessagingClient, topic: TopicId) -> None:
        self.client, self.topic, self.name = client, topic, f"bench-{uuid.uuid4().hex[:12]}"
        client.create_subscription(topic, self.name, start="earliest")
        self.consumer: Consumer = client.consumer(topic, self.name)

    def __enter__(self) -> Consumer:
        return self.consumer

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.consumer.close()
        finally:
            self.client.delete_subscription(self.topic, self.name, force=True)


class _ConsumerTailer(Tailer):
    """The consumer API: ``poll`` returns as soon as a message is there (a publisher's doorbell wakes it)."""

    def __init__(self, subscribed: _Subscribed) -> None:
        self.subscribed = subscribed

    def poll(self) -> list[bytes]:
        return [m.payload for m in self.subscribed.consumer.poll(max_messages=500, timeout_seconds=0.1)]

    def close(self) -> None:
        self.subscribed.close()


class Server(system.Server):
    def __init__(self, settings: Settings, workloads: Sequence[str]) -> None:
        self.settings, self.workloads = settings, workloads
        self._stack = ExitStack()

    def __enter__(self) -> ServerInfo:
        try:
            client, _raw, _raw_name = self._stack.enter_context(bench_tables(self.settings, "peers"))
            prefix = client.installation.prefix
            tx_address = None
            if "tx" in self.workloads:
                proc, tx_address = start_tx_server(self.settings, prefix)
                self._stack.callback(_stop, proc)
        except BaseException:
            self._stack.close()
            raise
        versions = (
            f"tms-hbase {__version__} on HBase {HBASE_VERSION} standalone (the shared instance at "
            f"{self.settings.address}, Thrift1 gateway), happybase {importlib.metadata.version('happybase')}, "
            f"thriftpy2 {importlib.metadata.version('thriftpy2')}"
        )
        durability = (
            "a publish returns after HBase's checkAndPut returned: the WAL edit is written with hflush "
            "(SYNC_WAL, the default) to the local file system, which HBase cannot make hflush/hsync-safe "
            "(`hbase.unsafe.stream.capability.enforce=false`), and nothing fsyncs it on a timer; "
            "on an HDFS cluster the same ack means the edit is on 3 datanodes"
        )
        return ServerInfo({"address": self.settings.address, "prefix": prefix, "tx": tx_address}, versions, durability)

    def __exit__(self, *exc_info: object) -> None:
        self._stack.close()


def _stop(proc: Any) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except Exception:
        proc.kill()
        proc.wait(timeout=10)


class Client(system.Client):
    transactions = True

    def __init__(self, endpoint: Endpoint) -> None:
        self.client = MessagingClient(endpoint["address"], prefix=endpoint["prefix"], create_tables=False)
        self.tx_address: str | None = endpoint["tx"]
        self._tx: Any = None  # (TransactionClient, TransactionContext, TransactionalPublisher), made on first use
        self._background: BackgroundPublisher | None = None  # made on the first pipelined publish

    @staticmethod
    def _topic(name: str) -> TopicId:
        return TopicId(NAMESPACE, name)

    def create_topic(self, topic: str) -> None:
        self.client.create_topic(self._topic(topic))

    def delete_topic(self, topic: str) -> None:
        self.client.delete_topic(self._topic(topic))

    def publish(self, topic: str, batch: Sequence[bytes]) -> None:
        self.client.publish(self._topic(topic), batch)

    def publish_pipelined(self, topic: str, messages: Sequence[bytes]) -> None:
        """Each message through the background publisher on its own, then ``flush``: it batches what queued
        up meanwhile into batch rows."""
        if self._background is None:
            self._background = BackgroundPublisher(self.client, on_full="block")
        futures = [self._background.publish(self._topic(topic), [payload]) for payload in messages]
        self._background.flush()
        if not all(future.result() for future in futures):
            raise RuntimeError(f"the background publisher dropped messages of {topic}")

    def read(self, topic: str, count: int) -> Iterator[bytes]:
        """A consumer of a new subscription from the earliest message; one commit at the end."""
        with _Subscribed(self.client, self._topic(topic)) as consumer:
            seen, progress = 0, time.monotonic()
            while seen < count:
                messages = consumer.poll(max_messages=min(READ_BATCH, count - seen), timeout_seconds=1.0)
                if messages:
                    progress = time.monotonic()
                else:
                    system.check_progress(progress, f"consumer read of {topic}")
                for message in messages:
                    yield message.payload
                seen += len(messages)
            consumer.commit()

    def tailer(self, topic: str) -> Tailer:
        return _ConsumerTailer(_Subscribed(self.client, self._topic(topic)))

    def seek(self, topic: str, t_ms: int) -> int:
        found = list(self.client.fetch(self._topic(topic), start_time_ms=t_ms, limit=1))
        if not found:
            raise AssertionError(f"tms-hbase found no message at or after {t_ms}")
        return found[0].publish_time

    def _transactions(self) -> Any:
        if self._tx is None:
            from tms_hbase.client_tx import TransactionalPublisher
            from tms_hbase.tx.client import TransactionClient
            from tms_hbase.txaware.context import TransactionContext

            if self.tx_address is None:
                raise RuntimeError("no transaction server was started (the tx workload was not selected)")
            tx = TransactionClient(self.tx_address)
            publisher = TransactionalPublisher(self.client)
            self._tx = (tx, TransactionContext(tx, publisher), publisher)
        return self._tx

    def transact(self, topic: str, batch: Sequence[bytes]) -> float:
        _tx, context, publisher = self._transactions()
        context.start()
        publisher.publish(self._topic(topic), batch)
        start = time.perf_counter()
        context.finish()
        return time.perf_counter() - start

    def read_committed(self, topic: str, count: int) -> Iterator[bytes]:
        from tms_hbase.client_tx import TransactionalReader

        tx, _context, _publisher = self._transactions()
        reader = TransactionalReader(self.client, tx, self._topic(topic))
        seen, progress = 0, time.monotonic()
        while seen < count:
            messages = reader.poll()
            if messages:
                progress = time.monotonic()
            else:
                system.check_progress(progress, f"read_committed of {topic}")
                time.sleep(latency.POLL_SLEEP)
            for message in messages[: count - seen]:
                yield message.payload
            seen += len(messages)

    queues = True
    by_key = True

    def publish_keyed(self, topic: str, batch: Sequence[tuple[bytes, bytes]]) -> None:
        self.client.publish(self._topic(topic), [Record(payload, key=key) for key, payload in batch])

    def create_queue(self, topic: str, group: str, by_key: bool = False) -> None:
        """A shared subscription (claim_size 128: the fixtures publish 100 messages at a time); ``by_key``:
        key-ordered (``ordering="key"``)."""
        self.client.create_subscription(
            self._topic(topic),
            group,
            shared=True,
            ack_timeout_seconds=30,
            claim_size=128,
            ordering="key" if by_key else None,
        )

    def work_queue(
        self, topic: str, group: str, work: float, batch: int, idle: float
    ) -> tuple[int, float, list[float]]:
        """A shared consumer as bench/shared.py runs it: ``receive(batch)``, then ``ack()`` per message; an
        idle one waits on its doorbell and looks again after ``IDLE_POLL`` regardless."""
        count, last, acks = 0, time.time(), list[float]()
        with self.client.shared_consumer(self._topic(topic), group, poll_interval_seconds=IDLE_POLL) as consumer:
            while True:
                got = consumer.receive(batch, idle)
                if not got:
                    return count, last, acks
                for delivery in got:
                    if work:
                        time.sleep(work)
                    started = time.perf_counter()
                    consumer.ack(delivery)
                    acks.append(time.perf_counter() - started)
                    count += 1
                last = time.time()

    def close(self) -> None:
        if self._background is not None:
            self._background.close()
        if self._tx is not None:
            with contextlib.suppress(Exception):
                self._tx[0].close()
        self.client.close()
