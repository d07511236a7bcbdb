"""Apache Kafka as a peer: one KRaft broker (broker and controller in one JVM) from Maven Central's jars,
storage formatted by the benchmark in a temp dir, client confluent-kafka (librdkafka).

Producers are idempotent with ``acks=all`` and flush after every publish, so a publish returns when the
broker acknowledged the whole batch, as tms-hbase's does. The broker fsyncs each partition about once a
second (``log.flush.interval.ms=1000``), like Redis's ``appendfsync everysec`` and JetStream's
``sync_interval: 1s``; Kafka's default is to leave fsync to the OS and rely on replicas."""

from __future__ import annotations

import base64
import importlib.metadata
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tms_hbase_launcher.jars import resolve_jars
from tms_hbase_launcher.paths import default_home, default_jars_root

from ..common import progress
from . import system
from .servers import HOST, Process, ProcessServer, ServerError, free_port, run_tool
from .system import Endpoint, ServerInfo, Tailer

KAFKA_VERSION = "4.4.0"  # keep in step with kafka-pom.xml
POM = Path(__file__).with_name("kafka-pom.xml")
HEAP = ["-Xms512m", "-Xmx1g", "-XX:+UseG1GC"]
TIMEOUT = 30.0  # seconds for any one client call
# Every publish is flushed (a synchronous publish, like the other systems'; flush does not wait out linger.ms).
# Nagle off: with librdkafka's default (on) a one-message publish took 2.6 ms here instead of 1.3 ms.
PRODUCER = {"enable.idempotence": True, "acks": "all", "socket.nagle.disable": True}

LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %-5p [%t] %c{{2}}: %m%n
rootLogger = WARN,file
"""


def server_properties(data: Path, port: int, controller_port: int) -> dict[str, str]:
    """One node in KRaft combined mode on loopback; internal topics with one replica."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{HOST}:{controller_port}",
        "listeners": f"PLAINTEXT://{HOST}:{port},CONTROLLER://{HOST}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(data),
        "num.partitions": "1",
        "auto.create.topics.enable": "false",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "min.insync.replicas": "1",
        # fsync about once a second (the flush scheduler looks every second)
        "log.flush.interval.ms": "1000",
        "log.flush.scheduler.interval.ms": "1000",
    }


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise ServerError("java is not on PATH (nor in $JAVA_HOME); Kafka needs a JDK 17+")
    return java


class Server(ProcessServer):
    name = "kafka"

    def start(self, workdir: Path) -> ServerInfo:
        java = _java()
        lib = resolve_jars(
            POM,
            default_jars_root(default_home()) / f"kafka-{KAFKA_VERSION}",
            f"Apache Kafka {KAFKA_VERSION} jars",
            progress,
            expect=f"kafka_2.13-{KAFKA_VERSION}.jar",
        )
        port, controller_port = free_port(), free_port()
        props = workdir / "server.properties"
        config = server_properties(workdir / "data", port, controller_port)
        props.write_text("".join(f"{k}={v}\n" for k, v in config.items()))
        log4j = workdir / "log4j2.properties"
        log4j.write_text(LOG4J2.format(log=workdir / "kafka.log"))
        classpath = ["-cp", f"{lib}/*", f"-Dlog4j2.configurationFile={log4j}"]
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        run_tool(
            [java, *classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props)],
            "kafka-storage format (kafka.tools.StorageTool)",
        )
        self.proc = Process("Kafka", [java, *HEAP, *classpath, "kafka.Kafka", str(props)], workdir / "kafka.out")
        bootstrap = f"{HOST}:{port}"
        self.proc.wait_listening(port, 120, lambda: _broker_ready(bootstrap))
        java_version = run_tool([java, "-version"], "java -version").splitlines()[0]
        import confluent_kafka

        versions = (
            f"Apache Kafka {KAFKA_VERSION} (kafka_2.13, KRaft combined mode, {' '.join(HEAP)}, {java_version}); "
            f"confluent-kafka {importlib.metadata.version('confluent-kafka')} "
            f"(librdkafka {confluent_kafka.libversion()[0]})"
        )
        durability = (
            "idempotent producer, acks=all (one broker, min.insync.replicas=1): acked once the broker wrote the "
            "batch to its log (the OS page cache); log.flush.interval.ms=1000 fsyncs about once a second"
        )
        return ServerInfo({"bootstrap": bootstrap}, versions, durability)


def _broker_ready(bootstrap: str) -> bool:
    from confluent_kafka.admin import AdminClient

    try:
        return bool(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5).brokers)
    except Exception:
        return False


def _ok(messages: list[Any]) -> list[Any]:
    for m in messages:
        if m.error() is not None:
            raise RuntimeError(f"Kafka consumer error: {m.error()}")
    return messages


def _drain(consumer: Any, count: int, what: str) -> Iterator[bytes]:
    """The first ``count`` payloads ``consumer`` returns; closes it at the end."""
    try:
        seen, progress_at = 0, time.monotonic()
        while seen < count:
            messages = _ok(consumer.consume(min(1000, count - seen), 1.0))
            if messages:
                progress_at = time.monotonic()
            else:
                system.check_progress(progress_at, what)
            for m in messages[: count - seen]:
                yield m.value()
            seen += len(messages)
    finally:
        consumer.close()


class _Tailer(Tailer):
    """An assigned consumer; the broker holds each fetch until data arrives (fetch.wait.max.ms). ``poll``
    returns as soon as one message is there, with whatever else was already fetched."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    def poll(self) -> list[bytes]:
        first = self.consumer.poll(0.1)
        if first is None:
            return []
        return [m.value() for m in _ok([first, *self.consumer.consume(500, 0)])]

    def close(self) -> None:
        self.consumer.close()


class Client(system.Client):
    transactions = True

    def __init__(self, endpoint: Endpoint) -> None:
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient

        self.bootstrap = endpoint["bootstrap"]
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})
        self.producer = Producer({**PRODUCER, "bootstrap.servers": self.bootstrap})
        self._failed: list[str] = []
        self._tx_producer: Any = None
        self._seeker: Any = None

    def _consumer(self, **extra: object) -> Any:
        from confluent_kafka import Consumer

        config = {
            "bootstrap.servers": self.bootstrap,
            "socket.nagle.disable": True,
            "group.id": f"bench-{uuid.uuid4().hex}",  # only assign() is used: no group membership, no commits
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **extra,
        }
        return Consumer(config)

    def _assigned(self, topic: str, **extra: object) -> Any:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        consumer = self._consumer(**extra)
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        return consumer

    def create_topic(self, topic: str) -> None:
        from confluent_kafka.admin import NewTopic

        self.admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)
        deadline = time.monotonic() + TIMEOUT
        while True:  # until the partition has a leader, so the first publish does not wait for metadata
            meta = self.producer.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
            if meta is not None and meta.error is None and meta.partitions and meta.partitions[0].leader >= 0:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka topic {topic} has no leader after {TIMEOUT:.0f} s")
            time.sleep(0.05)

    def delete_topic(self, topic: str) -> None:
        self.admin.delete_topics([topic], operation_timeout=TIMEOUT)[topic].result(TIMEOUT)

    def _delivered(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self._failed.append(str(err))

    def publish(self, topic: str, batch: Sequence[bytes]) -> None:
        for payload in batch:
            self.producer.produce(topic, payload, on_delivery=self._delivered)
        if self.producer.flush(TIMEOUT) or self._failed:
            raise RuntimeError(f"Kafka publish not acknowledged: {self._failed or 'flush timed out'}")

    def read(self, topic: str, count: int) -> Iterator[bytes]:
        return _drain(self._assigned(topic), count, f"Kafka read of {topic}")

    def tailer(self, topic: str) -> Tailer:
        return _Tailer(self._assigned(topic))

    def seek(self, topic: str, t_ms: int) -> int:
        from confluent_kafka import TopicPartition

        if self._seeker is None:  # one consumer for every seek; a fetch at the log end may not hold it 500 ms
            self._seeker = self._consumer(**{"fetch.wait.max.ms": 10})
        found = self._seeker.offsets_for_times([TopicPartition(topic, 0, t_ms)], timeout=TIMEOUT)[0]
        if found.error is not None or found.offset < 0:
            raise AssertionError(f"Kafka offsetsForTimes({t_ms}) found nothing: {found}")
        self._seeker.assign([TopicPartition(topic, 0, found.offset)])
        try:
            messages = _ok(self._seeker.consume(1, TIMEOUT))
        finally:
            self._seeker.unassign()
        if not messages:
            raise AssertionError(f"Kafka returned no message at offset {found.offset}")
        return messages[0].timestamp()[1]

    def transact(self, topic: str, batch: Sequence[bytes]) -> float:
        from confluent_kafka import Producer

        if self._tx_producer is None:
            tx_id = f"bench-{os.getpid()}-{uuid.uuid4().hex}"
            self._tx_producer = Producer({**PRODUCER, "bootstrap.servers": self.bootstrap, "transactional.id": tx_id})
            self._tx_producer.init_transactions(TIMEOUT)
        producer = self._tx_producer
        producer.begin_transaction()
        for payload in batch:
            producer.produce(topic, payload, on_delivery=self._delivered)
        start = time.perf_counter()
        producer.commit_transaction(TIMEOUT)
        elapsed = time.perf_counter() - start
        if self._failed:
            raise RuntimeError(f"Kafka transactional publish failed: {self._failed}")
        return elapsed

    def read_committed(self, topic: str, count: int) -> Iterator[bytes]:
        consumer = self._assigned(topic, **{"isolation.level": "read_committed"})
        return _drain(consumer, count, f"Kafka read_committed of {topic}")

    def close(self) -> None:
        self.producer.flush(TIMEOUT)
        if self._seeker is not None:
            self._seeker.close()
        if self._tx_producer is not None:
            self._tx_producer.flush(TIMEOUT)
