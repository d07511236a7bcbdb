"""Many consumer processes on one shared subscription with a backlog drain it without stalling: the
acknowledgements never stop for long while messages are left. A message claimed but not delivered, or a
range of positions left held, is found again only when its deadline passes, so such a fault shows as
every consumer idle for about an ack timeout (a minute here) with work left; the bound below is well
under that and well over what a loaded machine takes between two acknowledgements of eight consumers."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.test_shared_crash import T, check_deliveries, events, start
from tms_hbase import MessagingClient

CONSUMERS = 8
ROWS, ROW = 30, 100  # the backlog: batch rows of 100 messages, as a publisher of batches writes them
ACK_TIMEOUT = 60.0
STALL = 25.0  # seconds without any acknowledgement while messages are left: a stall


@pytest.mark.slow
def test_many_consumer_processes_drain_a_backlog_without_a_stall(
    client: MessagingClient, tms_env: dict[str, str], tmp_path: Path
) -> None:
    client.create_topic(T)
    total = ROWS * ROW
    for row in range(ROWS):
        client.publish(T, [str(row * ROW + i).encode() for i in range(ROW)])
    client.create_subscription(T, "work", shared=True, ack_timeout=ACK_TIMEOUT, claim_size=128)
    files = [tmp_path / f"w{i}" for i in range(CONSUMERS)]
    # --idle far past the drain: a consumer that found nothing for a while is still there when work shows up
    procs = [start(tms_env, f, "--batch", "32", "--idle", "600") for f in files]
    try:
        ready = time.monotonic() + 120
        while sum(1 for _, f in events(files) if f[0] == "ready") < CONSUMERS:
            assert all(p.poll() is None for p in procs), "a consumer process ended before it was ready"
            assert time.monotonic() < ready, "the consumer processes did not start within 120 s"
            time.sleep(0.1)
        acked, since = 0, time.monotonic()
        while acked < total:
            now_acked = sum(1 for _, f in events(files) if f[0] == "acked")
            if now_acked > acked:
                acked, since = now_acked, time.monotonic()
            assert all(p.poll() is None for p in procs), "a consumer process ended with messages left"
            assert time.monotonic() - since < STALL, (
                f"no message acknowledged for {STALL:.0f} s with {total - acked} of {total} left: a stall"
            )
            time.sleep(0.2)
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()

    seen = events(files)
    deliveries = check_deliveries(seen)
    acks = [f[1] for _, f in seen if f[0] == "acked"]
    assert sorted(acks, key=int) == [str(n) for n in range(total)], "each message acknowledged exactly once"
    assert all(got[0][0] == 1 for got in deliveries.values())
    numbers = client.get_subscription(T, "work").shared
    assert numbers is not None
    assert (numbers.acknowledged, numbers.waiting, numbers.in_flight) == (total, 0, 0)
