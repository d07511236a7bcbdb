"""The sweeper on the real HBase: TTL, old generations, the tail row, dry runs, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import happybase
import pytest

from tms_hbase import MessageId, MessagingClient, TopicId
from tms_hbase.config import thrift_address
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, counter_key, rolled_back_column
from tms_hbase.publish import rolled_back
from tms_hbase.tx import write_pointer_now
from tms_hbase_sweeper.sweep import Sweeper

T = TopicId("ns", "swept")
OTHER = TopicId("ns", "kept")
# The chain's sweeper rules and exact row counts (the newest row stays, positions are never reused). A
# sequencer topic's rows also hold its counter and the skip markers of released blocks, which depend on
# timing; its sweeper rules (prefix only, low-water mark, counter kept) are in test_sequencer.py.
CHAIN = {"ordering": "chain"}


def raw_rows(client: MessagingClient, address: str, table: str) -> list[tuple[bytes, dict]]:
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port)
    try:
        return list(conn.table(table).scan())
    finally:
        conn.close()


GRACE = 4  # the smallest grace with a tail-cache setting of 1 s


def sweeper(client: MessagingClient, **kwargs) -> Sweeper:
    """A sweeper on an installation whose writers trust a remembered tail for 1 s, with the grace that allows."""
    client.admin.set_tail_cache_seconds(1)
    return Sweeper(client.installation, grace_seconds=kwargs.pop("grace", GRACE), **kwargs)


def test_ttl_sweep_keeps_live_rows_drops_expired_and_never_reuses_positions(
    client: MessagingClient, hbase_address: str
) -> None:
    ttl = 8  # the publishes, a sweep and a read fit in it on a machine at load 30
    client.create_topic(T, {"ttl": str(ttl), **CHAIN})
    client.create_topic(OTHER, {"ttl": "3600", **CHAIN})
    client.publish(T, [b"a"])
    wp = write_pointer_now()
    client.store(T, [b"s1", b"s2"], tx_write_pointer=wp)
    client.publish(T, [], tx_write_pointer=wp)
    client.publish(T, [b"last"])
    client.publish(OTHER, [b"stays"])
    early = sweeper(client).sweep_once()
    assert (early.messages_dropped, early.payloads_dropped, early.messages_stripped) == (0, 0, 0)
    assert [m.payload for m in client.fetch(T)] == [b"a", b"s1", b"s2", b"last"]

    time.sleep(ttl + GRACE + 0.3)  # past the TTL and the grace
    report = sweeper(client).sweep_once()
    assert (report.messages_dropped, report.messages_stripped) == (2, 1)
    assert report.payloads_dropped == 3  # two payloads and the pointer's sequence counter
    assert list(client.fetch(T)) == []
    assert [m.payload for m in client.fetch(OTHER)] == [b"stays"]
    remaining = [
        BatchRow.decode(d[MESSAGE_COLUMN])
        for _, d in raw_rows(client, hbase_address, client.installation.messages.name)
    ]
    assert sorted(len(r.payloads) for r in remaining) == [0, 1]  # T's stripped tail and OTHER's row
    assert raw_rows(client, hbase_address, client.installation.payloads.name) == []

    client.publish(T, [b"new"])
    (new,) = list(client.fetch(T))
    assert new.payload == b"new" and MessageId.decode(new.id).position == 4  # after the kept tail

    again = sweeper(client).sweep_once()  # the old tail is no longer the newest row: now it goes
    assert (again.messages_dropped, again.messages_stripped) == (1, 0)
    assert [m.payload for m in client.fetch(T)] == [b"new"]


def test_grace_period_protects_expired_rows(client: MessagingClient) -> None:
    client.create_topic(T, {"ttl": "1", **CHAIN})
    client.publish(T, [b"old"])
    client.publish(T, [b"old2"])
    time.sleep(1.2)
    assert list(client.fetch(T)) == []  # readers apply the TTL themselves
    assert sweeper(client, grace=600).sweep_once().messages_dropped == 0
    time.sleep(GRACE)  # past the smallest grace
    assert sweeper(client).sweep_once().messages_dropped == 1


def test_old_generation_is_removed_and_new_one_untouched(client: MessagingClient, hbase_address: str) -> None:
    client.create_topic(T, CHAIN)
    client.publish(T, [b"g1"])
    wp = write_pointer_now()
    client.store(T, [b"g1-stored"], tx_write_pointer=wp)
    client.publish(T, [], tx_write_pointer=wp)
    client.delete_topic(T)
    client.create_topic(T, CHAIN)
    client.publish(T, [b"g2"])
    client.store(T, [b"g2-stored"], tx_write_pointer=write_pointer_now())
    report = sweeper(client, grace=600).sweep_once()
    assert (report.messages_dropped, report.payloads_dropped) == (2, 2)
    assert [m.payload for m in client.fetch(T)] == [b"g2"]
    keys = [k for k, _ in raw_rows(client, hbase_address, client.installation.messages.name)]
    assert len(keys) == 1 and keys[0][len(T.key) : len(T.key) + 4] == b"\x00\x00\x00\x02"
    assert len(raw_rows(client, hbase_address, client.installation.payloads.name)) == 2  # g2's payload and counter

    client.delete_topic(T)
    assert sweeper(client, grace=600).sweep_once().messages_dropped == 1
    assert raw_rows(client, hbase_address, client.installation.messages.name) == []


def test_dry_run_changes_nothing(client: MessagingClient, hbase_address: str) -> None:
    client.create_topic(T, CHAIN)
    client.publish(T, [b"x"])
    client.delete_topic(T)
    before = raw_rows(client, hbase_address, client.installation.messages.name)
    report = sweeper(client, dry_run=True).sweep_once()
    assert report.dry_run and report.messages_dropped == 1
    assert raw_rows(client, hbase_address, client.installation.messages.name) == before


def test_tms_sweeper_once_cli(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(T, CHAIN)
    client.publish(T, [b"x"])
    client.delete_topic(T)
    sweeper_cli = str(Path(sys.executable).with_name("tms-sweeper"))
    dry = subprocess.run([sweeper_cli, "once", "--dry-run", "--json"], env=tms_env, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["messages_dropped"] == 1
    assert json.loads(dry.stdout)["regions_swept"] >= 2  # messages and payloads at least: gone through
    text = subprocess.run([sweeper_cli, "once", "--dry-run"], env=tms_env, capture_output=True, text=True).stdout
    assert " regions scanned (dry run: nothing changed)" in text and not text.startswith("0 "), text
    done = subprocess.run([sweeper_cli, "once"], env=tms_env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "dropped 1" in done.stdout
    bad = subprocess.run([sweeper_cli, "once", "--thrift", "127.0.0.1:1"], env=tms_env, capture_output=True, text=True)
    assert bad.returncode == 5 and "Traceback" not in bad.stderr  # HBase unreachable
    assert bad.stderr.strip().splitlines()[-1].startswith("error: ")  # after the log lines


@pytest.mark.slow
def test_daemon_stops_cleanly_on_sigterm(client: MessagingClient, tms_env: dict[str, str], tmp_path: Path) -> None:
    """SIGTERM once the daemon runs (two passes reported, however long its start took on a loaded machine)."""
    client.create_topic(T, CHAIN)
    sweeper_cli = str(Path(sys.executable).with_name("tms-sweeper"))
    with open(tmp_path / "stderr", "w+") as errors:
        proc = subprocess.Popen(
            [sweeper_cli, "run", "--interval", "0.2", "--json"],
            env=tms_env,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        assert proc.stdout is not None
        passes = [proc.stdout.readline(), proc.stdout.readline()]  # one JSON line a pass (blocks until written)
        assert all(passes), f"the sweeper exited with {proc.wait(60)}"
        proc.terminate()
        proc.communicate(timeout=60)
        errors.seek(0)
        err = errors.read()
    assert proc.returncode == 0, err
    assert "sweeper stopped" in err


def test_invalid_pointer_is_marked_so_pruning_the_invalid_list_stays_safe(client: MessagingClient) -> None:
    from tms_hbase.tx import NO_TX_IN_PROGRESS, Transaction
    from tms_hbase.txserver.state_store import StateStore

    client.create_topic(T, CHAIN)
    client.admin.init_tables()
    store = StateStore(client.installation.txstate)
    manager = store.recover()
    manager.initialize(int(time.time() * 1000))
    doomed = manager.start_long(int(time.time() * 1000))
    manager.invalidate(doomed.tx_id)
    store.append(manager.drain_edits())
    x = doomed.write_pointer

    client.publish(T, [b"ok"])
    client.publish(T, [b"from invalid tx"], tx_write_pointer=x)

    def reader(invalids: tuple[int, ...]) -> Transaction:
        return Transaction(x + 10, x + 11, list(invalids), [], NO_TX_IN_PROGRESS)

    def seen(tx: Transaction | None) -> list[bytes]:
        return [m.payload for m in client.fetch(T, transaction=tx)]

    assert seen(None) == [b"ok", b"from invalid tx"]
    assert seen(reader((x,))) == [b"ok"]  # the invalid list hides it...
    assert seen(reader(())) == [b"ok", b"from invalid tx"]  # ...and only the invalid list, so far

    report = sweeper(client, grace=600).sweep_once()
    assert (report.invalid_transactions, report.messages_invalidated) == (1, 1)
    assert seen(None) == [b"ok", b"from invalid tx"]  # non-transactional readers still see it
    assert seen(reader(())) == [b"ok"]  # now hidden even once X is pruned from the invalid list
    assert sweeper(client, grace=600).sweep_once().messages_invalidated == 0  # already -X
    # indexed as rolled back, so lag and stats leave it out once X is pruned from the invalid list
    generation = client.get_topic(T).generation
    assert rolled_back.positions(client.installation.messages, T, generation, 1, 9) == [2]
    # a chain generation's counter row holds that index only (a sweep gives it no sequencer cells)
    assert list(client.installation.messages.get(counter_key(T, generation))) == [rolled_back_column(2)]
    assert client.topic_stats(T).messages == 1

    client.delete_topic(T)
    assert sweeper(client, grace=600).sweep_once().messages_dropped == 3  # its two rows and its counter row
