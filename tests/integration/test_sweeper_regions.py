"""The sweeper region by region on the real HBase: splits, leases shared by processes, resuming after
SIGKILL, major compactions, invalid-list pruning, metrics, config file."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.model.clock import now_ms
from tms_hbase.model.rows import message_key
from tms_hbase.sweep.pruning import plan
from tms_hbase.sweep.state import SweepState
from tms_hbase.txserver.state_store import StateStore
from tms_hbase_sweeper.sweep import Sweeper

from ..background import Background
from ..tx_server import TxServer, free_port

SWEEPER = str(Path(sys.executable).with_name("tms-sweeper"))
OLD = TopicId("ns", "old")  # deleted: everything of it goes
LIVE = TopicId("ns", "live")  # must stay whole
CHAIN = {"ordering": "chain"}  # the counts are a chain's rows (a sequencer adds its counter row)


def fill(client: MessagingClient, topic: TopicId, batches: int) -> None:
    for i in range(batches):
        client.publish(topic, [f"{topic.topic}-{i}".encode()])


def payloads(client: MessagingClient, topic: TopicId) -> list[bytes]:
    return [m.payload for m in client.fetch(topic)]


def test_regions_after_a_split_are_all_swept(client: MessagingClient, region_splitter: Callable) -> None:
    client.create_topic(OLD, CHAIN)
    client.create_topic(LIVE, CHAIN)
    fill(client, OLD, 60)
    fill(client, LIVE, 30)
    client.delete_topic(OLD)
    region_splitter(client.installation.messages.name, message_key(OLD, 1, 30))
    regions = client.installation.messages.regions()
    assert len(regions) == 2
    sweeper = Sweeper(
        client.installation, chunk_rows=7, compact_after=10, metadata_refresh_seconds=0, snapshot_refresh_seconds=0
    )
    report = sweeper.sweep_once()  # re-reading metadata and transaction state before every chunk
    assert report.messages_dropped == 60 and report.regions_swept == 3  # 2 message regions + 1 payload region
    assert report.compactions >= 1
    assert payloads(client, LIVE) == [f"live-{i}".encode() for i in range(30)]
    records = SweepState(client.installation.txstate).records(client.installation.messages.name)
    assert set(records) == {r.start for r in regions} and all(
        r.completed and r.checkpoint is None for r in records.values()
    )


def test_a_leased_region_is_left_alone_and_blocks_pruning(client: MessagingClient, region_splitter: Callable) -> None:
    client.create_topic(OLD, CHAIN)
    fill(client, OLD, 10)
    client.delete_topic(OLD)
    client.admin.init_tables()
    store = StateStore(client.installation.txstate)
    manager = store.recover()
    manager.initialize(now_ms())
    doomed = manager.start_long(now_ms())
    manager.invalidate(doomed.tx_id)
    store.append(manager.drain_edits())

    region_splitter(client.installation.messages.name, message_key(OLD, 1, 5))
    _, second = client.installation.messages.regions()
    state = SweepState(client.installation.txstate)
    assert state.acquire(second, "someone-else", 600, now_ms()) is not None
    report = Sweeper(client.installation, owner="me").sweep_once()
    assert report.regions_skipped == 1 and report.messages_dropped == 4  # positions 1-4: the first region
    pruning = plan(client.installation, now_ms(), max_lifetime_s=0)
    assert pruning.blocking == [second.label()] and pruning.prunable == []
    assert state.acquire(second, "me", 600, now_ms() + 601_000) is not None  # the other lease expired
    Sweeper(client.installation, owner="me").sweep_once()
    pruning = plan(client.installation, now_ms(), max_lifetime_s=0)
    assert pruning.blocking == [] and pruning.prunable == [doomed.tx_id]
    assert plan(client.installation, now_ms()).prunable == []  # not older than Tephra's max lifetime


def test_tx_prune_truncates_only_what_every_region_applied(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(LIVE, CHAIN)
    server = TxServer(tms_env, free_port()).start()
    admin = str(Path(sys.executable).with_name("tms-admin"))
    env = {**tms_env, "TMS_TX_SERVER": server.address}
    try:
        from tms_hbase.tx.client import TransactionClient

        with TransactionClient(server.address) as tx:
            doomed = tx.start_long()
            client.publish(LIVE, [b"from doomed"], tx_write_pointer=doomed.write_pointer)
            tx.abort(doomed)  # a long transaction: invalid
            args = [admin, "tx", "prune", "--max-lifetime", "0", "--json"]
            before = json.loads(subprocess.run(args, env=env, capture_output=True, text=True).stdout)
            assert before["blocking"] and before["pruned"] == []  # no region swept yet
            Sweeper(client.installation).sweep_once()
            after = json.loads(subprocess.run(args, env=env, capture_output=True, text=True).stdout)
            assert after["pruned"] == [doomed.tx_id]
            assert doomed.tx_id not in tx.snapshot().invalid
            reader = tx.start_short()
            assert [m.payload for m in client.fetch(LIVE, transaction=reader)] == []  # still hidden: -p
        state = subprocess.run([admin, "sweeper", "state", "--json"], env=env, capture_output=True, text=True)
        assert json.loads(state.stdout)["pruning"]["blocking"] == []
    finally:
        server.stop()


@pytest.mark.slow
def test_sigkilled_sweeper_resumes_from_its_checkpoint(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(OLD, CHAIN)
    fill(client, OLD, 400)
    client.delete_topic(OLD)
    args = [SWEEPER, "once", "--owner", "k", "--chunk-rows", "50", "--max-rows-per-second", "100", "--json"]
    proc = Background(args, env=tms_env)
    region = client.installation.messages.regions()[0]
    state, deadline = SweepState(client.installation.txstate), time.monotonic() + 120
    while (record := state.record(region)).checkpoint is None:  # killed once it has swept a chunk or more
        assert proc.poll() is None and time.monotonic() < deadline, f"no checkpoint: {proc.communicate(timeout=60)}"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    record = state.record(region)
    assert record.checkpoint is not None and record.completed is None  # stopped mid-region
    done = subprocess.run([SWEEPER, "once", "--owner", "k", "--json"], env=tms_env, capture_output=True, text=True)
    report = json.loads(done.stdout)
    assert report["regions_resumed"] == 1 and 0 < report["messages_dropped"] < 400
    assert SweepState(client.installation.txstate).record(region).checkpoint is None


@pytest.mark.slow
def test_two_sweeper_processes_with_writers_and_readers(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(OLD, CHAIN)
    fill(client, OLD, 300)
    client.delete_topic(OLD)
    client.create_topic(LIVE, CHAIN)
    common = ["--interval", "0.3", "--chunk-rows", "40", "--max-rows-per-second", "150", "--json"]
    sweepers = [
        Background([SWEEPER, "run", *common], env=tms_env)  # (a JSON line a pass: not into a pipe)
        for _ in range(2)
    ]
    published, seen = [], []
    last = None
    started = time.monotonic()

    def old_rows_left() -> int:
        return len(client.installation.messages.scan())

    # write and read until the sweepers have removed the old generation (at least 5 s, at most 60 s)
    while time.monotonic() - started < 5 or (old_rows_left() > len(published) and time.monotonic() - started < 60):
        batch = [f"m{len(published)}".encode()]
        client.publish(LIVE, batch)
        published += batch
        new = list(client.fetch(LIVE, start_message=last, inclusive=False)) if last else list(client.fetch(LIVE))
        seen += [m.payload for m in new]
        last = new[-1].id if new else last
    for proc in sweepers:
        proc.send_signal(signal.SIGTERM)
    reports, errors = [], []
    for proc in sweepers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports += [json.loads(line) for line in out.splitlines()]
        errors.append(err[-3000:])
    assert seen == published == payloads(client, LIVE)  # nothing lost, nothing reordered
    logs = "\n".join(errors)
    assert sum(r["messages_dropped"] for r in reports) == 300, logs  # each old row deleted once
    assert any(r["regions_skipped"] for r in reports)  # they really shared the regions


def test_metrics_and_config_file(client: MessagingClient, tms_env: dict[str, str], tmp_path: Path) -> None:
    client.create_topic(OLD, CHAIN)
    fill(client, OLD, 5)
    client.delete_topic(OLD)
    config = tmp_path / "sweeper.toml"
    config.write_text("interval = 0.2\nchunk-rows = 2\ngrace = 900\n")
    port = free_port()
    proc = Background([SWEEPER, "--config", str(config), "run", "--metrics-port", str(port), "--json"], env=tms_env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                dropped = 'tms_sweeper_rows_dropped_total{table="messages"} 5.0' in text
                if dropped and "tms_sweeper_region_lag_seconds{" in text:  # lag: from the second sweep on
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "metrics never showed the sweep"
            time.sleep(0.2)
        assert "tms_sweeper_regions_total" in text and "tms_sweeper_last_sweep_timestamp_seconds" in text
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out.splitlines()[0])["messages_dropped"] == 5
