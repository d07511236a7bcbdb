"""Sequencer generations (``ordering=sequencer``, docs/ordering.md) on the real HBase: the two fill
races through the library, a reader held by a hole for at most H and one poll, a time seek within D,
the sweeper deleting only a prefix, and the extended crash test (8 writer processes, 4 SIGKILLed, two
of them right after reserving, 2 tailing readers)."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import happybase
import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.config import thrift_address
from tms_hbase.model.rows import MESSAGE_COLUMN, BatchRow, generation_prefix, message_key, next_position, peek
from tms_hbase.ordering import sequencer
from tms_hbase_sweeper.sweep import Sweeper

from .test_crash import check_acknowledged, check_readers, finish, start, wait_for_acks

T = TopicId("seq", "orders")
CACHE = 1  # tail-cache seconds: W = 0.5 s, H = 1 s, D = W + 1 s
H = sequencer.hole_wait(CACHE)
D_MS = int((sequencer.window(CACHE) + CACHE) * 1000)


@pytest.fixture
def seq(client: MessagingClient) -> MessagingClient:
    client.admin.set_tail_cache_seconds(CACHE)
    client.create_topic(T, {"ordering": "sequencer", "ttl": "3600"})
    return client


def rows(client: MessagingClient) -> dict[int, BatchRow]:
    prefix = generation_prefix(T, client.get_topic(T).generation)
    found = client.installation.messages.scan(prefix + bytes(8), prefix + b"\xff" * 9)
    return {int.from_bytes(k[-8:], "big"): BatchRow.decode(v[MESSAGE_COLUMN]) for k, v in found}


def publish_idle(client: MessagingClient, batch: list[bytes], **kwargs) -> None:
    """Publish, then wait until the writer holds no offsets ahead (a lone writer keeps its block through pauses
    until it is W/2 old, then gives the rest back to the counter), so that the next publish's offsets follow
    this one's: rows land where counted. (A publish that reserves while the block is being released lands
    above the skip marker its writer must then put there, wherever the machine's load puts that moment.)"""
    client.publish(T, batch, **kwargs)
    queues = client._writer.sequencer.reservations._queues
    deadline = time.monotonic() + 60
    while any(q.block or q.ahead or q.reserving_ahead for q in queues.values()) or sequencer.end_offset(
        client.installation.messages, T, 1
    ) != max(next_position(p, row.span) - 1 for p, row in rows(client).items()):
        assert time.monotonic() < deadline, "the writer never gave back the offsets it reserved ahead"
        time.sleep(0.02)


def payloads(client: MessagingClient, **kwargs) -> list[bytes]:
    return [m.payload for m in client.fetch(T, **kwargs)]


def test_a_hole_left_between_reserving_and_writing_is_filled_and_the_slow_writer_goes_elsewhere(
    seq: MessagingClient,
) -> None:
    messages = seq.installation.messages
    reserved = sequencer.reserve(messages, T, 1, 1)  # a writer reserved one offset ... and stopped here
    seq.publish(T, [b"other"])
    assert payloads(seq) == []  # the hole below a row is not passed
    deadline = time.monotonic() + 60
    while not (got := payloads(seq)):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert got == [b"other"] and rows(seq)[reserved].skip  # the reader filled it after H
    late = BatchRow(1, b"s" * 16, 1, (b"slow",), span=1).encode()
    assert not messages.put_if_absent(message_key(T, 1, reserved), MESSAGE_COLUMN, late)  # the fill won
    seq.publish(T, [b"slow"])  # the library's writer simply reserves again
    assert payloads(seq) == [b"other", b"slow"]


def test_a_reader_waiting_on_a_hole_reads_the_writer_that_fills_it_in_time(seq: MessagingClient) -> None:
    messages = seq.installation.messages
    reserved = sequencer.reserve(messages, T, 1, 1)
    seq.publish(T, [b"after"])
    assert payloads(seq) == []
    cell = BatchRow(int(time.time() * 1000), b"s" * 16, 1, (b"slow",), span=1).encode()
    assert messages.put_if_absent(message_key(T, 1, reserved), MESSAGE_COLUMN, cell)  # the writer, in time
    assert payloads(seq) == [b"slow", b"after"]


def test_a_reader_is_held_by_a_dead_writers_hole_for_at_most_h_and_a_poll(seq: MessagingClient) -> None:
    began, polls, slowest = time.monotonic(), 0, 0.0  # the hole's age counts from its reservation
    sequencer.reserve(seq.installation.messages, T, 1, 3)  # three offsets nobody will write
    seq.publish(T, [b"a", b"b"])
    while True:
        poll = time.monotonic()
        got = payloads(seq)
        slowest, polls = max(slowest, time.monotonic() - poll), polls + 1
        if got:
            break
        time.sleep(0.05)
    held = time.monotonic() - began
    assert got == [b"a", b"b"] and polls > 1
    assert H <= held <= H + 0.05 + 2 * slowest + 0.5, (held, slowest)
    assert seq.admin.longest_hole_wait <= held
    assert [rows(seq)[p].skip for p in (1, 2, 3)] == [True, True, True]


def test_a_time_seek_misses_nothing_after_the_time_and_starts_at_most_d_early(seq: MessagingClient) -> None:
    for i in range(30):
        seq.publish(T, [b"%d" % i])
    settled(seq)  # a spare used after a later round's row is a hole for a moment: let the topic settle
    every = list(seq.fetch(T))
    assert len(every) == 30
    at = every[15].publish_time
    got = list(seq.fetch(T, start_time_ms=at))
    assert [m.id for m in got] == [m.id for m in every if m.id >= got[0].id]
    assert {m.id for m in every if m.publish_time >= at} <= {m.id for m in got}
    assert got[0].publish_time >= at - D_MS


def test_the_sweeper_deletes_only_a_prefix_and_keeps_the_counter_row(seq: MessagingClient) -> None:
    publish_idle(seq, [b"old"])
    publish_idle(seq, [b"short"], ttl_seconds=0.5)
    publish_idle(seq, [b"live"])
    time.sleep(0.6 + 4 * CACHE)  # past the short ttl and the grace
    before = rows(seq)
    report = Sweeper(seq.installation, grace_seconds=4 * CACHE).sweep_once()
    assert report.corrupt_rows == 0 and report.messages_dropped == 0  # the counter row is no corrupt row
    # the expired row above a live one stays (payloads stripped) until the prefix below it goes; the batches are
    # told by what they hold, not by offset: a publish slower than W (a loaded machine) leaves a skip marker and
    # lands above it
    after = rows(seq)
    assert report.messages_stripped == 1 and sorted(after) == sorted(before)
    assert [after[p].payloads for p in sorted(after) if not after[p].skip] == [(b"old",), (), (b"live",)]
    assert payloads(seq) == [b"old", b"live"]
    seq.publish(T, [b"more"])
    assert payloads(seq, start_message=bytes(next(iter(seq.fetch(T))).id), inclusive=False) == [b"live", b"more"]


def test_the_sweeper_raises_the_low_water_mark_before_deleting_a_prefix(seq: MessagingClient) -> None:
    for name in (b"a", b"b", b"c"):
        publish_idle(seq, [name], ttl_seconds=0.5)
    publish_idle(seq, [b"live"])
    first = next(iter(seq.fetch(T))).id if payloads(seq) else None
    time.sleep(0.6 + 4 * CACHE)  # past the grace
    report = Sweeper(seq.installation, grace_seconds=4 * CACHE).sweep_once()
    assert report.messages_dropped == 3 and sorted(rows(seq)) == [4]
    assert sequencer.low_water(seq.installation.messages, T, 1) == 4
    assert payloads(seq) == [b"live"]  # from the start: the swept prefix is no hole to wait on
    assert seq.admin.longest_hole_wait == 0, "the swept prefix was waited on as a hole"
    assert first is None or payloads(seq, start_message=first) == [b"live"]


def settled(client: MessagingClient) -> list[tuple[str, str, str]]:
    """Everything readable, once no hole holds the reader any more (killed writers' reservations are
    filled H after their first sighting): fetched until two fetches H apart agree."""

    def read() -> list[tuple[str, str, str]]:
        return [(m.id.hex(), str(m.publish_time), m.payload.decode()) for m in client.fetch(T)]

    last, deadline = read(), time.monotonic() + 60
    while True:
        time.sleep(H + 0.2)
        now = read()
        if now == last:
            return now
        assert time.monotonic() < deadline, "the topic never settled"
        last = now


def _raw_skips(client: MessagingClient, address: str) -> int:
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port)
    try:
        prefix = generation_prefix(T, 1)
        table = conn.table(client.installation.messages.name)
        return sum(peek(v[MESSAGE_COLUMN]).skip for _, v in table.scan(row_prefix=prefix) if MESSAGE_COLUMN in v)
    finally:
        conn.close()


@pytest.mark.slow
def test_eight_writers_half_killed_some_right_after_reserving_lose_and_duplicate_nothing(
    seq: MessagingClient, tms_env: dict[str, str], tmp_path: Path, hbase_address: str
) -> None:
    stop, drain, acks = tmp_path / "stop", tmp_path / "drain", tmp_path / "acks"
    acks.mkdir()
    rng = random.Random()
    blockers = {"w0": rng.randint(3, 12), "w1": rng.randint(3, 12)}  # block right after this reservation
    writers = {}
    for i in range(8):
        name = f"w{i}"
        extra = (str(blockers[name]), str(tmp_path / f"{name}.blocked")) if name in blockers else ()
        writers[name] = start(tms_env, "writer", str(T), name, str(acks / name), str(stop), *extra)
    reader_a = start(tms_env, "tailer", str(T), str(tmp_path / "a"), str(drain), "-", str(D_MS))
    wait_for_acks(acks, 20)
    time.sleep(0.5)
    later = str(int(time.time() * 1000))
    reader_b = start(tms_env, "tailer", str(T), str(tmp_path / "b"), str(drain), later, str(D_MS))

    def kill(name: str) -> None:
        os.kill(writers[name].pid, signal.SIGKILL)
        writers[name].wait()

    deadline = time.monotonic() + 60
    for name in blockers:  # killed between reserving and writing
        while not (tmp_path / f"{name}.blocked").exists():
            assert writers[name].poll() is None and time.monotonic() < deadline, f"{name} never blocked"
            time.sleep(0.05)
        kill(name)
    for name in rng.sample(["w2", "w3", "w4", "w5", "w6", "w7"], 2):  # killed at a random point of its run
        wait_for_acks(acks, 3, name)
        time.sleep(rng.uniform(0.2, 1.5))
        kill(name)
    wait_for_acks(acks, 60)
    finish(writers, [reader_a, reader_b], stop, drain)

    truth = settled(seq)
    payload_list = [p for _, _, p in truth]
    assert len(set(payload_list)) == len(payload_list), "a message was stored twice"
    assert [i for i, _, _ in truth] == sorted(i for i, _, _ in truth)
    times = [int(t) for _, t, _ in truth]
    assert all(t >= max(times[: i + 1]) - D_MS for i, t in enumerate(times)), "publish time fell back more than D"

    acked = check_acknowledged(payload_list, acks)
    assert len(acked) > 50 and sum(w.returncode == -signal.SIGKILL for w in writers.values()) == 4
    assert _raw_skips(seq, hbase_address) >= 2, "the blocked writers' reservations were never filled"
    check_readers(tmp_path, truth)
    for out in ("a", "b"):
        stats = json.loads((tmp_path / f"{out}.json").read_text())
        assert stats["longest_hole_wait"] <= H + 2 * stats["slowest_poll"] + 0.5, stats


def test_totals_come_from_offsets_so_stats_and_lag_need_no_scan(seq: MessagingClient) -> None:
    for size, length in ((3, 10), (1, 1000), (2, 5)):  # sizes that vary: no mean of any row is the answer
        publish_idle(seq, [b"x" * length] * size)
    seq.create_subscription(T, "s")
    stats = seq.topic_stats(T)
    assert (stats.messages, stats.published, stats.last_position) == (6, 6, 5)
    assert (stats.bytes, stats.exact, stats.bytes_exact) == (1040, True, True)  # bytes exact too (checkpoints)
    assert seq.lag(T, "s").messages == 6
    first_batch_end = list(seq.fetch(T))[2]
    seq.reset_subscription(T, "s", start_message=list(seq.fetch(T))[3].id)
    assert seq.lag(T, "s").messages == 3 and first_batch_end.id < list(seq.fetch(T))[3].id


def test_a_block_left_at_the_tail_is_given_back_and_counts_no_messages(seq: MessagingClient) -> None:
    for i in range(20):  # back to back: a busy writer reserves blocks ahead
        seq.publish(T, [b"m%d" % i])
    deadline = time.monotonic() + 30  # once idle, the rest of its block goes back to the counter
    while sequencer.end_offset(seq.installation.messages, T, 1) != 20:
        assert time.monotonic() < deadline, "the unused block was not given back"
        time.sleep(0.02)
    assert seq._writer.sequencer.reservations.given_back >= 1  # a block was reserved ahead (back to back: busy)
    assert not any(row.skip for row in rows(seq).values())  # nothing was written for it
    seq.create_subscription(T, "s")  # from the start
    assert seq.lag(T, "s").messages == 20  # the skip marker's span is not 20 more messages
    stats = seq.topic_stats(T)
    assert (stats.messages, stats.published) == (20, 20)
    seq.reset_subscription(T, "s", start_message=list(seq.fetch(T))[-1].id)
    assert seq.lag(T, "s").messages == 1
