"""Corrupt rows on the real HBase (written with plain happybase): the sweeper leaves them in place,
reports them with topic, generation, position and region, counts them, and cleans up everything
else; topic listings skip a corrupt metadata row with a warning and `topic get` names it."""

from __future__ import annotations

import dataclasses
import json
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import happybase
import pytest

from tms_hbase import CorruptData, MessagingClient, TopicId
from tms_hbase.config import thrift_address
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, message_key, position_of

from ..background import Background
from ..tx_server import free_port

SWEEPER = str(Path(sys.executable).with_name("tms-sweeper"))
TMS_ADMIN = str(Path(sys.executable).with_name("tms-admin"))
DAMAGED = TopicId("ns", "damaged")  # has corrupt message rows
BROKEN = TopicId("ns", "broken")  # its metadata row is not JSON
CLEAN = TopicId("ns", "clean")
GRACE = 4  # the smallest grace a tail-cache setting of 1 s allows
GONE = TopicId("ns", "gone")  # deleted, with a corrupt row: it goes with its generation


@pytest.fixture
def raw(client: MessagingClient, hbase_address: str) -> Iterator[happybase.Connection]:
    host, port = thrift_address(hbase_address)
    conn = happybase.Connection(host, port)
    yield conn
    conn.close()


def positions(raw: happybase.Connection, client: MessagingClient, topic: TopicId) -> list[int]:
    return [position_of(key) for key, _ in raw.table(client.installation.messages.name).scan(row_prefix=topic.key)]


def corrupt_installation(client: MessagingClient, raw: happybase.Connection) -> None:
    """Expired rows in three topics; among them rows that do not decode and a metadata row that is
    not JSON. Returns once every good row is past its TTL and the smallest grace (GRACE)."""
    client.admin.set_tail_cache_seconds(1)  # writers trust a remembered tail for 1 s: a grace of 4 s is allowed
    for topic in (DAMAGED, BROKEN, CLEAN):
        client.create_topic(topic, {"ttl": "1", "ordering": "chain"})  # dense positions, chain sweeper rules
    for i in range(1, 5):
        client.publish(DAMAGED, [f"d{i}".encode()])
    for topic in (BROKEN, CLEAN):
        client.publish(topic, [b"one"])
        client.publish(topic, [b"two"])
    published = time.time()
    messages = raw.table(client.installation.messages.name)
    truncated = messages.row(message_key(DAMAGED, 1, 2))[MESSAGE_COLUMN][:-3]
    messages.put(message_key(DAMAGED, 1, 2), {MESSAGE_COLUMN: truncated})
    messages.put(message_key(DAMAGED, 1, 5), {MESSAGE_COLUMN: b""})
    messages.put(message_key(DAMAGED, 1, 6), {b"d:x": b"not a message"})
    raw.table(client.installation.metadata.name).put(BROKEN.key, {b"d:p": b"{not json"})
    raw.table(client.installation.payloads.name).put(b"junk", {b"d:p": b"?"})
    client.create_topic(GONE, {"ordering": "chain"})
    client.publish(GONE, [b"x"])
    client.delete_topic(GONE)
    messages.put(message_key(GONE, 1, 2), {MESSAGE_COLUMN: b"\x01"})
    time.sleep(max(0.0, published + 1 + GRACE + 0.5 - time.time()))  # past the 1 s TTL and the grace


def test_sweeper_once_leaves_corrupt_rows_reports_them_and_cleans_the_rest(
    client: MessagingClient, raw: happybase.Connection, tms_env: dict[str, str]
) -> None:
    corrupt_installation(client, raw)
    done = subprocess.run(
        [SWEEPER, "once", "--grace", str(GRACE), "--json"], env=tms_env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    # positions 1, 3 and 4 expired and are not the newest row: deleted; 2, 5 and 6 left for an operator
    assert positions(raw, client, DAMAGED) == [2, 5, 6]
    assert positions(raw, client, CLEAN) == [2]  # the other topics were swept as usual
    assert positions(raw, client, BROKEN) == [1, 2]  # no metadata to go by: nothing deleted on a guess
    assert positions(raw, client, GONE) == []  # a deleted generation goes, whatever its rows hold
    assert report["messages_dropped"] == 6 and report["corrupt_rows"] == 5
    found = {(r["table"], r["topic"], r["position"]): r for r in report["corrupt"]}
    assert set(found) == {
        ("messages", "ns:damaged", 2),
        ("messages", "ns:damaged", 5),
        ("messages", "ns:damaged", 6),
        ("metadata", "ns:broken", None),
        ("payloads", None, None),
    }
    assert "truncated" in found["messages", "ns:damaged", 2]["reason"]
    assert "no d:m column" in found["messages", "ns:damaged", 6]["reason"]
    assert "corrupt metadata row for topic ns:broken" in found["metadata", "ns:broken", None]["reason"]
    assert found["payloads", None, None]["key"] == b"junk".hex()
    in_messages = [r for r in report["corrupt"] if r["table"] == "messages"]
    messages = client.installation.messages.name
    assert all(r["generation"] == 1 and r["region"].startswith(messages + "[") for r in in_messages)
    assert found["metadata", "ns:broken", None]["region"] == client.installation.metadata.name
    region = found["messages", "ns:damaged", 5]["region"]
    assert f"corrupt row left in place: topic ns:damaged generation 1 position 5 in {region}: " in done.stderr
    again = subprocess.run(
        [SWEEPER, "once", "--grace", str(GRACE)], env=tms_env, capture_output=True, text=True, timeout=120
    )
    assert again.returncode == 0 and "5 corrupt rows left in place (see the log)" in again.stdout


@pytest.mark.slow
def test_sweeper_daemon_counts_corrupt_rows_in_its_metrics(
    client: MessagingClient, raw: happybase.Connection, tms_env: dict[str, str]
) -> None:
    corrupt_installation(client, raw)
    port = free_port()
    daemon = Background(
        [SWEEPER, "run", "--grace", str(GRACE), "--interval", "0.5", "--metrics-port", str(port), "--json"], env=tms_env
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert daemon.poll() is None, daemon.communicate()[1]
            assert time.monotonic() < deadline, "no sweep counted its corrupt rows"
            try:
                metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
            except OSError:
                metrics = ""
            counted = {
                line.split("{")[1].split("}")[0]: float(line.split()[-1])
                for line in metrics.splitlines()
                if line.startswith("tms_sweeper_corrupt_rows_total{")
            }
            two_sweeps = {'table="messages"': 6, 'table="metadata"': 2, 'table="payloads"': 2}
            if all(counted.get(table, 0) >= n for table, n in two_sweeps.items()):  # every table swept twice
                break  # (waiting on the messages alone raced the second sweep's payload table)
            time.sleep(0.2)
        assert positions(raw, client, DAMAGED) == [2, 5, 6] and positions(raw, client, CLEAN) == [2]
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    reports = [json.loads(line) for line in out.splitlines()]
    finished = [r for r in reports if not r["stopped"]]  # (the SIGTERM may cut the last sweep short)
    assert finished and all(r["corrupt_rows"] == 5 for r in finished), reports  # every sweep went through


def test_topic_listing_skips_a_corrupt_metadata_row_and_get_names_it(
    client: MessagingClient, raw: happybase.Connection, tms_env: dict[str, str]
) -> None:
    for topic in (DAMAGED, BROKEN, CLEAN):
        client.create_topic(topic)
    raw.table(client.installation.metadata.name).put(BROKEN.key, {b"d:p": b"{not json"})
    assert client.list_topics() == [CLEAN, DAMAGED]
    scan = client.admin.scan_topics("ns")
    assert [m.topic for m in scan.topics] == [CLEAN, DAMAGED]
    assert [(c.topic, c.ok) for c in scan.corrupt] == [(BROKEN, False)]
    with pytest.raises(CorruptData, match="corrupt metadata row for topic ns:broken"):
        client.get_topic(BROKEN)

    listed = subprocess.run([TMS_ADMIN, "topic", "list", "--json"], env=tms_env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert [t["topic"] for t in json.loads(listed.stdout)] == ["ns:clean", "ns:damaged"]
    assert listed.stderr.startswith("warning: skipped the corrupt metadata row of topic ns:broken: ")
    got = subprocess.run([TMS_ADMIN, "topic", "get", "ns:broken"], env=tms_env, capture_output=True, text=True)
    assert got.returncode == 1
    assert got.stderr.count("\n") == 1 and got.stderr.startswith("error: corrupt metadata row for topic ns:broken: ")


def test_a_pointer_row_without_a_write_pointer_is_named_by_readers(
    client: MessagingClient, raw: happybase.Connection
) -> None:
    """A row that says its payloads are stored but carries no transaction write pointer to find them by."""
    client.create_topic(DAMAGED, {"ordering": "chain"})  # a row at position 2
    client.publish(DAMAGED, [b"ok"])
    client.publish(DAMAGED, [b"replaced"])
    messages = raw.table(client.installation.messages.name)
    good = BatchRow.decode(messages.row(message_key(DAMAGED, 1, 2))[MESSAGE_COLUMN])
    broken = dataclasses.replace(good, payloads=(), pointer=True, tx_pointer=None)
    messages.put(message_key(DAMAGED, 1, 2), {MESSAGE_COLUMN: broken.encode()})
    with pytest.raises(CorruptData) as error:
        list(client.fetch(DAMAGED))
    assert (error.value.topic, error.value.position) == (str(DAMAGED), 2), error.value
    assert "no transaction write pointer" in str(error.value)
