"""The sweeper (``tms-sweeper``) on the cluster while regions move and split under it: a deleted topic's rows
all go, a live topic's messages all stay, a sweep SIGKILLed after its region moved resumes from its checkpoint
after the region split, and two sweepers share the regions by lease while the table splits and moves, each old
row dropped by one of them."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from tms_hbase import MessagingClient, TopicId
from tms_hbase.sweep.state import SweepState
from tms_hbase_launcher.cluster import ClusterHBase

from ..background import Background
from ..waiting import wait_for

SWEEPER = str(Path(sys.executable).with_name("tms-sweeper"))
LIVE = TopicId("cluster", "live")  # must stay whole
CHAIN = {"ordering": "chain"}  # one row a publish: the counts below are rows


def _fill(client: MessagingClient, topic: TopicId, rows: int) -> list[bytes]:
    payloads = [f"{topic.topic}-{i}".encode() for i in range(rows)]
    for payload in payloads:
        client.publish(topic, [payload])
    return payloads


def _middle_key(client: MessagingClient) -> bytes:
    """The key of the message table's middle row (HBase finds no split point of its own in so few rows)."""
    keys = [key for key, _ in client.installation.messages.scan()]
    return keys[len(keys) // 2]


def test_sweep_resumes_after_its_region_moved_and_split(
    cluster: ClusterHBase, client: MessagingClient, tms_env: dict[str, str], prefix: str
) -> None:
    # its rows sort before LIVE's, so whatever the first sweep gets through before it is killed is old's rows:
    # the resumed sweep then drops fewer than all of them however fast the machine (with LIVE first, a quick
    # first sweep had only reached LIVE's rows and the resumed one dropped all 400)
    old = TopicId("cluster", "expired")
    client.create_topic(old, CHAIN)
    client.create_topic(LIVE, CHAIN)
    _fill(client, old, 400)
    live = _fill(client, LIVE, 100)
    client.delete_topic(old)
    middle = _middle_key(client)
    table = f"{prefix}_messages"
    state = SweepState(client.installation.txstate)
    args = [SWEEPER, "once", "--owner", "k", "--chunk-rows", "10", "--max-rows-per-second", "10", "--json"]
    sweep = Background(args, env=tms_env)
    try:
        wait_for(lambda: any(r.checkpoint for r in state.records(table).values()), "a checkpoint", 120, interval=0.1)
        region = cluster.regions(table)[0]
        cluster.move_region(region.name)
        moved = state.records(table)[region.start].checkpoint
        wait_for(
            lambda: state.records(table)[region.start].checkpoint != moved, "progress after the move", 120, interval=0.1
        )
        sweep.send_signal(signal.SIGKILL)
        sweep.wait()
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
    assert state.records(table)[region.start].completed is None  # stopped mid-region
    regions = cluster.split_region(table, middle)  # the half-swept region splits before the sweep resumes
    assert len(regions) == 2
    done = subprocess.run([SWEEPER, "once", "--owner", "k", "--json"], env=tms_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["regions_resumed"] == 1 and 0 < report["messages_dropped"] < 400
    assert [m.payload for m in client.fetch(LIVE)] == live  # nothing of the live topic deleted
    assert len(client.installation.messages.scan()) == len(live)  # a chain's rows: old's are gone
    records = state.records(table)
    for now in client.installation.messages.regions():  # every region of the table, as the sweeper sees them
        assert records[now.start].completed and records[now.start].checkpoint is None


def test_two_sweepers_share_regions_by_lease_while_they_split_and_move(
    cluster: ClusterHBase, client: MessagingClient, tms_env: dict[str, str], prefix: str
) -> None:
    old = TopicId("cluster", "gone")
    client.create_topic(old, CHAIN)
    client.create_topic(LIVE, CHAIN)
    _fill(client, old, 300)
    live = _fill(client, LIVE, 50)
    client.delete_topic(old)
    middle = _middle_key(client)
    table = f"{prefix}_messages"
    common = ["run", "--interval", "0.3", "--chunk-rows", "10", "--max-rows-per-second", "10", "--json"]
    sweepers = [Background([SWEEPER, *common, "--owner", f"s{i}"], env=tms_env) for i in range(2)]
    try:
        state = SweepState(client.installation.txstate)
        wait_for(lambda: any(r.checkpoint for r in state.records(table).values()), "a checkpoint", 120, interval=0.1)
        cluster.split_region(table, middle)
        cluster.move_region(cluster.regions(table)[-1].name)
        wait_for(lambda: len(client.installation.messages.scan()) == len(live), "the old rows gone", 300, interval=0.1)
    finally:
        for proc in sweepers:
            proc.send_signal(signal.SIGTERM)
    reports, errors = [], []
    for proc in sweepers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports += [json.loads(line) for line in out.splitlines()]
        errors.append(err[-3000:])
    assert [m.payload for m in client.fetch(LIVE)] == live
    logs = "\n".join(errors)
    # Every old row deleted (the wait above), each by one sweeper: the sweeper holding the parent's lease scans on
    # to the parent's end, and its lease covers that range, so the other does not lease the new daughter meanwhile
    # (both deleting its rows would count them twice).
    assert sum(r["messages_dropped"] for r in reports) == 300, logs
    assert any(r["regions_skipped"] for r in reports), logs  # they really shared the regions
