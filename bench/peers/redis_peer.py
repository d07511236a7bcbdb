"""Redis Streams as a peer: Debian's ``redis-server`` (installed by ``make bench-peers`` with apt-get) in a
temp dir, AOF on with ``appendfsync everysec`` and no RDB snapshots, client redis-py.

A topic is one stream key; a message is an entry with one field. A batch is one pipeline of XADDs
(``transaction=False``: Redis runs them back to back anyway). Redis writes the AOF to the OS before it
replies and fsyncs it every second. Reads page with XRANGE; the tailing consumer blocks in XREAD; a time
seek is XRANGE from the entry id ``<ms>-0`` (auto ids are the server's clock in ms)."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from . import system
from .servers import HOST, Process, ProcessServer, ServerError, free_port, run_tool
from .system import Endpoint, ServerInfo, Tailer

FIELD = b"p"
TIMEOUT = 30.0
READ_BATCH = 1000


class Server(ProcessServer):
    name = "redis"

    def start(self, workdir: Path) -> ServerInfo:
        binary = shutil.which("redis-server")
        if binary is None:
            raise ServerError("redis-server is not installed; `make bench-peers` installs it with apt-get")
        port = free_port()
        args = [binary, "--port", str(port), "--bind", HOST, "--dir", str(workdir), "--daemonize", "no"]
        args += ["--logfile", str(workdir / "redis.log"), "--save", ""]
        args += ["--appendonly", "yes", "--appendfsync", "everysec"]
        self.proc = Process("redis-server", args, workdir / "redis.out")
        self.proc.wait_listening(port, 30, lambda: _pong(port))
        import redis

        with redis.Redis(HOST, port, socket_timeout=TIMEOUT) as r:
            version = r.info("server")["redis_version"]
        debian = run_tool(["dpkg-query", "-W", "-f=${Version}", "redis-server"], "dpkg-query").strip()
        versions = f"Redis {version} (Debian redis-server {debian}); redis-py {importlib.metadata.version('redis')}"
        durability = (
            "AOF on, appendfsync everysec, no RDB: a reply follows the write of the AOF to the OS (page cache); "
            "fsync every second"
        )
        return ServerInfo({"host": HOST, "port": port}, versions, durability)


def _pong(port: int) -> bool:
    import redis

    try:
        with redis.Redis(HOST, port, socket_timeout=2) as r:
            return bool(r.ping())
    except redis.RedisError:
        return False


class _Tailer(Tailer):
    """XREAD BLOCK after the last entry id seen."""

    def __init__(self, r: Any, topic: str) -> None:
        self.r, self.topic, self.last = r, topic, b"0-0"

    def poll(self) -> list[bytes]:
        answer = self.r.xread({self.topic: self.last}, count=500, block=100)
        if not answer:
            return []
        entries = answer[0][1]
        self.last = entries[-1][0]
        return [fields[FIELD] for _id, fields in entries]


class Client(system.Client):
    def __init__(self, endpoint: Endpoint) -> None:
        import redis

        self.r = redis.Redis(endpoint["host"], endpoint["port"], socket_timeout=TIMEOUT)

    def create_topic(self, topic: str) -> None:
        pass  # a stream comes to be with its first entry

    def delete_topic(self, topic: str) -> None:
        self.r.delete(topic)

    def publish(self, topic: str, batch: Sequence[bytes]) -> None:
        if len(batch) == 1:
            self.r.xadd(topic, {FIELD: batch[0]})
            return
        pipe = self.r.pipeline(transaction=False)
        for payload in batch:
            pipe.xadd(topic, {FIELD: payload})
        pipe.execute()

    def read(self, topic: str, count: int) -> Iterator[bytes]:
        seen, start = 0, "-"
        while seen < count:
            entries = self.r.xrange(topic, min=start, count=min(READ_BATCH, count - seen))
            if not entries:
                raise system.Stalled(f"Redis stream {topic} ended after {seen} of {count} entries")
            for _id, fields in entries:
                yield fields[FIELD]
            seen += len(entries)
            start = b"(" + entries[-1][0]

    def tailer(self, topic: str) -> Tailer:
        return _Tailer(self.r, topic)

    def seek(self, topic: str, t_ms: int) -> int:
        entries = self.r.xrange(topic, min=f"{t_ms}-0", count=1)
        if not entries:
            raise AssertionError(f"Redis XRANGE from {t_ms}-0 found nothing")
        return int(entries[0][0].split(b"-")[0])

    queues = True

    def create_queue(self, topic: str, group: str, by_key: bool = False) -> None:
        self.r.xgroup_create(topic, group, id="0")

    def work_queue(
        self, topic: str, group: str, work: float, batch: int, idle: float
    ) -> tuple[int, float, list[float]]:
        """XREADGROUP (``>``: new entries, blocking up to ``idle``), then one XACK per entry."""
        name, count, last, acks = f"c{os.getpid()}", 0, time.time(), list[float]()
        while True:
            answer = self.r.xreadgroup(group, name, {topic: ">"}, count=batch, block=int(idle * 1000))
            if not answer or not answer[0][1]:
                return count, last, acks
            for entry_id, _fields in answer[0][1]:
                if work:
                    time.sleep(work)
                started = time.perf_counter()
                self.r.xack(topic, group, entry_id)
                acks.append(time.perf_counter() - started)
                count += 1
            last = time.time()

    def close(self) -> None:
        self.r.close()
