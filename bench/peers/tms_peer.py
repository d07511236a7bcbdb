"""tms-hbase as a peer: the running HBase (its Thrift gateway, as for the other benchmarks), fresh
``benchpeers_<run>`` tables dropped at the end, and a real transaction server (``tms-admin tx serve``,
started with the other benchmarks' starter) when the transactional workload runs.

The tailing consumer is ``client.fetch`` in a polling loop (bench/latency.py's FetchPoller: a 2 ms sleep
after an empty poll): tms-hbase has no push or long-poll consumer yet."""

from __future__ import annotations

import contextlib
import importlib.metadata
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from typing import Any

from tms_hbase import MessagingClient, TopicId, __version__
from tms_hbase.launcher.paths import HBASE_VERSION

from .. import latency
from ..common import Settings, bench_tables
from ..shared import IDLE_POLL
from ..txlatency import start_tx_server
from . import system
from .system import Endpoint, ServerInfo, Tailer

NAMESPACE = "bench"


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

    @staticmethod
    def _topic(name: str) -> TopicId:
        return TopicId(NAMESPACE, name)

    def create_topic(self, topic: str) -> None:
        self.client.create_topic(self._topic(topic))

    def delete_topic(self, topic: str) -> None:
        self.client.delete_topic(self._topic(topic))

    def publish(self, topic: str, batch: Sequence[bytes]) -> None:
        self.client.publish(self._topic(topic), batch)

    def read(self, topic: str, count: int) -> Iterator[bytes]:
        for n, message in enumerate(self.client.fetch(self._topic(topic), limit=count), 1):
            yield message.payload
            if n == count:
                return

    def tailer(self, topic: str) -> Tailer:
        return latency.FetchPoller(self.client, self._topic(topic))

    def seek(self, topic: str, t_ms: int) -> int:
        found = list(self.client.fetch(self._topic(topic), start_time_ms=t_ms, limit=1))
        if not found:
            raise AssertionError(f"tms-hbase found no message at or after {t_ms}")
        return found[0].publish_time

    def _transactions(self) -> Any:
        if self._tx is None:
            from tms_hbase.tx.client import TransactionClient
            from tms_hbase.tx.context import TransactionContext
            from tms_hbase.tx.messaging import TransactionalPublisher

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
        from tms_hbase.tx.messaging import TransactionalReader

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

    def create_queue(self, topic: str, group: str) -> None:
        """A shared subscription (claim_size 128: the fixtures publish 100 messages at a time)."""
        self.client.create_subscription(self._topic(topic), group, shared=True, ack_timeout=30, claim_size=128)

    def work_queue(self, topic: str, group: str, work: float, batch: int, idle: float) -> tuple[int, float]:
        """A shared consumer as bench/shared.py runs it: ``receive(batch)``, then ``ack()`` per message; an
        idle one waits on its doorbell and looks again after ``IDLE_POLL`` regardless."""
        count, last = 0, time.time()
        with self.client.shared_consumer(self._topic(topic), group, poll_interval=IDLE_POLL) as consumer:
            while True:
                got = consumer.receive(batch, idle)
                if not got:
                    return count, last
                for delivery in got:
                    if work:
                        time.sleep(work)
                    consumer.ack(delivery)
                    count += 1
                last = time.time()

    def close(self) -> None:
        if self._tx is not None:
            with contextlib.suppress(Exception):
                self._tx[0].close()
        self.client.close()
