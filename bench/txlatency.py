"""Transactional visibility latency: how long after a commit returns a TransactionalReader (a fresh
transaction per poll) returns the message. A real `tms-admin tx serve` process runs the transactions."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from tms_hbase import MessagingClient
from tms_hbase.client_tx import TransactionalPublisher, TransactionalReader
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV
from tms_hbase.tx.client import TransactionClient, TransactionServiceUnavailable
from tms_hbase.txaware.context import TransactionContext

from .common import Result, Settings, bench_tables, median, new_topic, percentile, progress
from .procs import die_with_parent

RATE = 50.0  # transactions per second, one message each


def start_tx_server(settings: Settings, prefix: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, THRIFT_ENV: settings.address, PREFIX_ENV: prefix}
    admin = str(Path(sys.executable).with_name("tms-admin"))
    proc = subprocess.Popen(
        [admin, "tx", "serve", "--port", str(port)], env=env, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent
    )
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with TransactionClient(address, timeout_seconds=2) as c:
                c.status()
            return proc, address
        except TransactionServiceUnavailable:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the transaction server did not start") from None
            time.sleep(0.1)


def _round(client: MessagingClient, tx_address: str, topic: str, duration: float) -> tuple[list[float], int]:
    committed: dict[bytes, float] = {}
    latencies: list[float] = []
    done = threading.Event()

    def commit_loop() -> None:
        with TransactionClient(tx_address) as tx:
            publisher = TransactionalPublisher(client)
            context = TransactionContext(tx, publisher)
            start = time.monotonic()
            n = 0
            while time.monotonic() < start + duration:
                n += 1
                payload = f"{n}".encode()
                with context.transaction():
                    publisher.publish(topic, [payload])
                committed[payload] = time.monotonic()
                time.sleep(max(0.0, start + n / RATE - time.monotonic()))  # paced to RATE
        done.set()

    writer = threading.Thread(target=commit_loop)
    with TransactionClient(tx_address) as tx:
        reader = TransactionalReader(client, tx, topic)
        writer.start()
        grace = None
        while grace is None or time.monotonic() < grace:
            for message in reader.poll():
                latencies.append((time.monotonic() - committed.get(message.payload, time.monotonic())) * 1000)
            if done.is_set() and grace is None:
                grace = time.monotonic() + 1.0
            time.sleep(0.002)
    writer.join()
    return latencies, len(committed)


def run(settings: Settings) -> Result:
    duration = settings.pick(6.0, 3.0)
    result = Result(
        "txlatency",
        f"Transactional reader latency after commit ({RATE:g} transactions/s, one message each, {duration:g} s a "
        "round; a fresh short transaction per poll; transaction server in its own process)",
    )
    p50s, p99s, pooled, lost = [], [], [], 0
    with bench_tables(settings, "txl") as (client, _raw, _raw_name):
        proc, tx_address = start_tx_server(settings, client.installation.prefix)
        try:
            for r in range(settings.rounds):
                topic = str(new_topic(client, f"txl{r}"))
                latencies, sent = _round(client, tx_address, topic, duration)
                lost += sent - len(latencies)
                p50s.append(percentile(latencies, 50))
                p99s.append(percentile(latencies, 99))
                pooled.extend(latencies)
                progress(f"txlatency round {r + 1}/{settings.rounds}: p50 {p50s[-1]:.1f} ms, p99 {p99s[-1]:.1f} ms")
        finally:
            proc.terminate()
            proc.wait(timeout=60)
    result.table(
        ["", "p50 ms (median of rounds)", "p99 ms (median of rounds)", "p99 ms (all samples)", "max ms", "missed"],
        [
            [
                "commit returned → transactional poll returns it",
                median(p50s),
                median(p99s),
                percentile(pooled, 99),
                max(pooled, default=float("nan")),
                lost,
            ]
        ],
    )
    result.goal("visible < 100 ms p99 after commit", f"{median(p99s):.1f} ms", median(p99s) < 100)
    result.samples = {"p50": p50s, "p99": p99s}
    return result
