"""Publish and fetch on the real HBase: CDAP's semantics, payload store, TTL, ids, bad input."""

from __future__ import annotations

import threading
import time

import happybase
import pytest

from tms_hbase import (
    InvalidArgument,
    Message,
    MessageId,
    MessagingClient,
    RollbackDetail,
    TopicId,
    TopicNotFound,
)
from tms_hbase.config import thrift_address
from tms_hbase.model import wire
from tms_hbase.tx import MAX_LIFETIME_SECONDS, NO_TX_IN_PROGRESS, Transaction, write_pointer_now

from ..tcp_proxy import TcpProxy
from ..waiting import wait_for

T = TopicId("ns", "events")


def payloads(messages: list[Message]) -> list[bytes]:
    return [m.payload for m in messages]


def tx(pointer: int, in_progress: tuple[int, ...] = (), invalids: tuple[int, ...] = ()) -> Transaction:
    """A reader's transaction: everything up to ``pointer`` committed except the given ones."""
    first_short = min(in_progress) if in_progress else NO_TX_IN_PROGRESS
    return Transaction(
        read_pointer=pointer,
        tx_id=pointer + 1,
        invalids=list(invalids),
        in_progress=list(in_progress),
        first_short_in_progress=first_short,
    )


def message_rows(client: MessagingClient, address: str, table: str | None = None) -> int:
    """How many rows the message table (or ``table``) holds, counted with plain happybase."""
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port)
    try:
        return sum(1 for _ in conn.table(table or client.installation.messages.name).scan())
    finally:
        conn.close()


@pytest.fixture
def topic(client: MessagingClient) -> TopicId:
    client.create_topic(T, {"ttl": "3600"})  # the default ordering (sequencer)
    return T


@pytest.fixture
def chain_topic(client: MessagingClient) -> TopicId:
    """For what only the chain promises: exact time seeks (publish times never step back along it) and
    gaps in the middle that are swept rows (the sequencer's time seek starts up to D early, its sweeper
    deletes only prefixes and a gap in the middle is a hole: tests/integration/test_sequencer.py)."""
    client.create_topic(T, {"ttl": "3600", "ordering": "chain"})
    return T


def test_cdap_fetch_semantics_with_rollback(client: MessagingClient, topic: TopicId) -> None:
    base = write_pointer_now()
    client.publish(topic, [b"m0", b"m1"])
    handle = client.publish(topic, [b"m2"], tx_write_pointer=base + 100)
    assert isinstance(handle.rollback, RollbackDetail) and handle.rollback.transaction_write_pointer == base + 100
    assert payloads(list(client.fetch(topic))) == [b"m0", b"m1", b"m2"]
    # a reader whose transaction sees base + 100 as in progress stops before m2
    assert payloads(list(client.fetch(topic, transaction=tx(base + 150, in_progress=(base + 100,))))) == [b"m0", b"m1"]
    assert payloads(list(client.fetch(topic, transaction=tx(base + 150)))) == [b"m0", b"m1", b"m2"]
    client.rollback(topic, bytes(handle.rollback))
    client.rollback(topic, handle)  # twice is fine
    assert payloads(list(client.fetch(topic))) == [b"m0", b"m1", b"m2"]  # non-tx: repeatable reads
    assert payloads(list(client.fetch(topic, transaction=tx(base + 150)))) == [b"m0", b"m1"]
    client.publish(topic, [b"m3"])
    assert payloads(list(client.fetch(topic, transaction=tx(base + 150)))) == [b"m0", b"m1", b"m3"]


def test_in_progress_stops_invalid_skips_committed_returns(client: MessagingClient, topic: TopicId) -> None:
    base = write_pointer_now()
    b, d = base + 10, base + 20
    client.publish(topic, [b"a"])
    client.publish(topic, [b"b"], tx_write_pointer=b)
    client.publish(topic, [b"c"])
    client.publish(topic, [b"d"], tx_write_pointer=d)
    client.publish(topic, [b"e"])

    def seen(reader: Transaction) -> list[bytes]:
        return payloads(list(client.fetch(topic, transaction=reader)))

    assert seen(tx(base + 30, in_progress=(b,))) == [b"a"]
    assert seen(tx(base + 30, in_progress=(d,))) == [b"a", b"b", b"c"]
    assert seen(tx(base + 15)) == [b"a", b"b", b"c"]  # d > read pointer
    assert seen(tx(base + 30, invalids=(b,))) == [b"a", b"c", b"d", b"e"]
    assert seen(tx(base + 30)) == [b"a", b"b", b"c", b"d", b"e"]
    assert payloads(list(client.fetch(topic))) == [b"a", b"b", b"c", b"d", b"e"]


def test_start_from_id_inclusive_exclusive_and_limit(client: MessagingClient, topic: TopicId) -> None:
    client.publish(topic, [b"0", b"1", b"2"])
    client.publish(topic, [b"3", b"4"])
    every = list(client.fetch(topic))
    assert payloads(every) == [b"0", b"1", b"2", b"3", b"4"]
    ids = [m.id for m in every]
    assert ids == sorted(ids) and len(set(ids)) == 5 and all(len(i) <= 20 for i in ids)
    assert payloads(list(client.fetch(topic, start_message=ids[1]))) == [b"1", b"2", b"3", b"4"]
    assert payloads(list(client.fetch(topic, start_message=ids[1], inclusive=False))) == [b"2", b"3", b"4"]
    assert payloads(list(client.fetch(topic, start_message=ids[2], inclusive=False, limit=1))) == [b"3"]
    assert payloads(list(client.fetch(topic, start_message=ids[4], inclusive=False))) == []
    assert payloads(list(client.fetch(topic, limit=2))) == [b"0", b"1"]


def test_start_from_time_with_limit(client: MessagingClient, chain_topic: TopicId) -> None:
    topic = chain_topic
    client.publish(topic, [b"early"])
    time.sleep(0.05)
    client.publish(topic, [b"mid1", b"mid2"])
    mid_time = list(client.fetch(topic))[1].publish_time
    time.sleep(0.05)
    client.publish(topic, [b"late"])
    assert payloads(list(client.fetch(topic, start_time_ms=mid_time))) == [b"mid1", b"mid2", b"late"]
    assert payloads(list(client.fetch(topic, start_time_ms=mid_time, limit=1))) == [b"mid1"]
    assert payloads(list(client.fetch(topic, start_time_ms=mid_time, inclusive=False))) == [b"late"]
    assert payloads(list(client.fetch(topic, start_time_ms=0))) == [b"early", b"mid1", b"mid2", b"late"]
    assert payloads(list(client.fetch(topic, start_time_ms=int(time.time() * 1000) + 60_000))) == []
    times = [m.publish_time for m in client.fetch(topic)]
    assert times == sorted(times)


def test_payload_store_is_invisible_until_the_pointer_is_published(client: MessagingClient, topic: TopicId) -> None:
    base = write_pointer_now()
    client.publish(topic, [b"before"])
    for i in range(10):
        client.store(topic, [f"s{i}a".encode(), f"s{i}b".encode()], tx_write_pointer=base + 500)
    assert payloads(list(client.fetch(topic))) == [b"before"]
    handle = client.publish(topic, [], tx_write_pointer=base + 500)
    client.publish(topic, [b"after"])
    stored = [f"s{i}{x}".encode() for i in range(10) for x in "ab"]
    every = list(client.fetch(topic))
    assert payloads(every) == [b"before", *stored, b"after"]
    assert payloads(list(client.fetch(topic, transaction=tx(base + 600)))) == [b"before", *stored, b"after"]
    assert payloads(list(client.fetch(topic, transaction=tx(base + 600, in_progress=(base + 500,))))) == [b"before"]
    group = every[1:21]
    assert payloads(list(client.fetch(topic, start_message=group[5].id, limit=3))) == stored[5:8]
    assert payloads(list(client.fetch(topic, start_message=group[5].id, inclusive=False, limit=3))) == stored[6:9]
    assert payloads(list(client.fetch(topic, start_message=group[19].id, inclusive=False))) == [b"after"]
    client.rollback(topic, handle)
    assert payloads(list(client.fetch(topic, transaction=tx(base + 600)))) == [b"before", b"after"]
    assert len(list(client.fetch(topic))) == 22


# A time to live long enough that a publish and the read after it fit in it on a machine at load 30.
TTL_SECONDS = 8


def test_topic_ttl_applies_at_read(client: MessagingClient) -> None:
    client.create_topic(T, {"ttl": str(TTL_SECONDS)})
    client.publish(T, [b"old"])
    assert payloads(list(client.fetch(T))) == [b"old"]
    wait_for(lambda: not list(client.fetch(T)), "the message past the topic's TTL to be gone", 120)
    client.publish(T, [b"new"])
    assert payloads(list(client.fetch(T))) == [b"new"]
    assert payloads(list(client.fetch(T, start_time_ms=0))) == [b"new"]


def test_per_message_ttl_shorter_than_topic(client: MessagingClient, topic: TopicId) -> None:
    client.publish(topic, [b"keep1"])
    client.publish(topic, [b"short"], ttl_seconds=TTL_SECONDS)
    client.publish(topic, [b"keep2"])
    assert payloads(list(client.fetch(topic))) == [b"keep1", b"short", b"keep2"]

    def remaining() -> list[bytes]:
        return payloads(list(client.fetch(topic)))

    wait_for(lambda: remaining() != [b"keep1", b"short", b"keep2"], "the short-lived message to go", 120)
    assert remaining() == [b"keep1", b"keep2"]
    with pytest.raises(InvalidArgument, match="longer than the topic"):
        client.publish(topic, [b"x"], ttl_seconds=7200)
    for bad in (0, -1, "5", True):
        with pytest.raises(InvalidArgument, match="per-message ttl"):
            client.publish(topic, [b"x"], ttl_seconds=bad)


def test_recreated_topic_starts_over_from_an_old_id(client: MessagingClient, topic: TopicId) -> None:
    client.publish(topic, [b"g1-a", b"g1-b"])
    old_id = list(client.fetch(topic))[1].id
    client.delete_topic(topic)
    with pytest.raises(TopicNotFound):
        list(client.fetch(topic))
    client.create_topic(topic)
    client.publish(topic, [b"g2-a"])
    client.publish(topic, [b"g2-b"])
    assert payloads(list(client.fetch(topic))) == [b"g2-a", b"g2-b"]
    assert payloads(list(client.fetch(topic, start_message=old_id, inclusive=False))) == [b"g2-a", b"g2-b"]
    new_ids = [m.id for m in client.fetch(topic)]
    assert all(MessageId.decode(i).generation == 2 for i in new_ids)


def test_many_batches_read_in_chunks_and_seek_in_log_reads(client: MessagingClient, chain_topic: TopicId) -> None:
    topic = chain_topic
    for i in range(600):
        client.publish(topic, [f"{i}".encode()])
    every = list(client.fetch(topic))
    assert payloads(every) == [f"{i}".encode() for i in range(600)]
    target = every[437]
    before = client.installation.calls
    found = list(client.fetch(topic, start_time_ms=target.publish_time, limit=1))
    reads = client.installation.calls - before
    assert found[0].publish_time == target.publish_time
    assert found[0].id <= target.id  # the first message published at that millisecond
    assert reads <= 2 * 10 + 4, f"time seek over 600 rows took {reads} reads"


def test_lost_publish_answer_is_not_stored_twice(client: MessagingClient, proxy: TcpProxy, prefix: str) -> None:
    client.create_topic(T)
    with MessagingClient(proxy.address, prefix, timeout_seconds=5) as flaky:
        flaky.publish(T, [b"first"])
        proxy.lose_reply_to(b"checkAndPut")
        flaky.publish(T, [b"second"])
        assert proxy.replies_lost == 1
        proxy.lose_reply_to(b"checkAndPut")
        flaky.publish(T, [b"third"], tx_write_pointer=write_pointer_now())
        assert proxy.replies_lost == 2
    assert payloads(list(client.fetch(T))) == [b"first", b"second", b"third"]


def test_a_16_mib_batch_is_stored_whole(client: MessagingClient, topic: TopicId) -> None:
    big = [bytes([i]) * (1024 * 1024 - 8) for i in range(16)]
    client.publish(topic, big)
    assert payloads(list(client.fetch(topic))) == big


def test_bad_input_is_a_clear_error_and_writes_nothing(
    client: MessagingClient, topic: TopicId, hbase_address: str
) -> None:
    client.publish(topic, [b"only"])
    rows = message_rows(client, hbase_address)
    unknown = TopicId("ns", "nope")
    for call in (
        lambda: client.publish(unknown, [b"x"]),
        lambda: client.store(unknown, [b"x"], tx_write_pointer=write_pointer_now()),
        lambda: client.fetch(unknown),
        lambda: client.rollback(unknown, RollbackDetail(str(unknown), 5, 1, 1, 1)),
    ):
        with pytest.raises(TopicNotFound):
            call()
    bad_calls = {
        "nothing to publish": lambda: client.publish(topic, []),
        "over the limit": lambda: client.publish(topic, [b"x" * (16 * 1024 * 1024)]),
        "not bytes": lambda: client.publish(topic, ["text"]),
        "list of bytes": lambda: client.publish(topic, b"abc"),
        "write pointer": lambda: client.publish(topic, [b"x"], tx_write_pointer=-3),
        "corrupt rollback handle": lambda: client.rollback(topic, b"garbage"),
        "belongs to topic": lambda: client.rollback(topic, RollbackDetail("ns:other", 5, 1, 1, 1)),
        "does not match": lambda: client.rollback(topic, RollbackDetail(str(topic), 5, 1, 1, 1)),
        "corrupt message id": lambda: client.fetch(topic, start_message=b"\x01\x02"),
        "positive integer": lambda: client.fetch(topic, limit=0),
        "bad limit": lambda: client.fetch(topic, limit=-5),
        "bad start_time": lambda: client.fetch(topic, start_time_ms=-1),
        "not both": lambda: client.fetch(topic, start_message=b"x" * 20, start_time_ms=5),
        "must be a tms_hbase.tx.Transaction": lambda: client.fetch(topic, transaction=b"\x00" * 30),
        "nothing to store": lambda: client.store(topic, [], tx_write_pointer=write_pointer_now()),
    }
    for message, call in bad_calls.items():
        with pytest.raises(InvalidArgument) as info:
            call()
        assert message.split()[0] in str(info.value) or message in str(info.value), (message, info.value)
    with (
        MessagingClient(client.installation.address, client.installation.prefix, max_batch_bytes=100) as small,
        pytest.raises(InvalidArgument, match="over the limit of 100 bytes"),
    ):
        small.publish(topic, [b"x" * 60, b"y" * 60])
    assert message_rows(client, hbase_address) == rows
    assert payloads(list(client.fetch(topic))) == [b"only"]


def test_a_forged_rollback_handle_is_refused_at_once_and_changes_nothing(
    client: MessagingClient, topic: TopicId
) -> None:
    """A handle naming positions 1..10^12 (a real one names the one row its publish wrote) used to
    roll back position 1 and then read HBase once per position, without end."""
    base = write_pointer_now()
    client.publish(topic, [b"kept"], tx_write_pointer=base + 100)
    forged = wire.HANDLE_MAGIC + wire.encode(
        "PublishResponse",
        {
            "topic": str(topic),
            "transactionWritePointer": base + 100,
            "generation": 1,
            "startPosition": 1,
            "endPosition": 10**12,
        },
    )
    outcome: list[BaseException | None] = []

    def roll_back() -> None:
        try:
            client.rollback(topic, forged)
            outcome.append(None)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    worker = threading.Thread(target=roll_back, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert outcome, "rollback of a forged handle did not return"
    assert isinstance(outcome[0], InvalidArgument) and "exactly one position" in str(outcome[0])
    assert payloads(list(client.fetch(topic, transaction=tx(base + 150)))) == [b"kept"]  # not rolled back
    with pytest.raises(InvalidArgument, match="exactly one position"):
        client.rollback(topic, RollbackDetail(str(topic), base + 100, 1, 1, 10**12))


def test_swept_rows_in_the_middle_are_stepped_over(
    client: MessagingClient, chain_topic: TopicId, hbase_address: str
) -> None:
    """Rows the sweeper deleted (here: deleted with plain happybase) leave gaps readers step over."""
    topic = chain_topic
    for i in range(6):
        client.publish(topic, [f"{i}".encode()])
    ids = [m.id for m in client.fetch(topic)]
    host, port = thrift_address(hbase_address)
    conn = happybase.Connection(host, port)
    try:
        table = conn.table(client.installation.messages.name)
        keys = [key for key, _ in table.scan()]
        for key in (keys[0], keys[2], keys[3]):
            table.delete(key)
    finally:
        conn.close()
    assert payloads(list(client.fetch(topic))) == [b"1", b"4", b"5"]
    assert payloads(list(client.fetch(topic, start_message=ids[1], inclusive=False))) == [b"4", b"5"]
    assert payloads(list(client.fetch(topic, start_message=ids[2]))) == [b"4", b"5"]
    assert payloads(list(client.fetch(topic, start_time_ms=0, limit=2))) == [b"1", b"4"]


def test_a_write_pointer_older_than_the_tx_max_lifetime_is_refused_and_nothing_is_written(
    client: MessagingClient, topic: TopicId, hbase_address: str
) -> None:
    """As CDAP: Tephra may already have pruned such a transaction from its invalid list."""
    client.publish(topic, [b"before"])
    rows, stored = (
        message_rows(client, hbase_address),
        message_rows(client, hbase_address, client.installation.payloads.name),
    )
    stale = write_pointer_now() - (MAX_LIFETIME_SECONDS + 60) * 1000 * 10**6  # started 25 h and a minute ago
    for call in (
        lambda: client.publish(topic, [b"late"], tx_write_pointer=stale),
        lambda: client.publish(topic, [], tx_write_pointer=stale),
        lambda: client.store(topic, [b"late"], tx_write_pointer=stale),
        lambda: client.publish(topic, [b"fake"], tx_write_pointer=5),  # not a Tephra pointer: from 1970
    ):
        with pytest.raises(InvalidArgument, match=r"too old.*max lifetime of 90000 s"):
            call()
    assert message_rows(client, hbase_address) == rows
    assert message_rows(client, hbase_address, client.installation.payloads.name) == stored
    assert payloads(list(client.fetch(topic))) == [b"before"]

    fresh = write_pointer_now() - (MAX_LIFETIME_SECONDS - 60) * 1000 * 10**6  # 24 h 59 min: still alive
    client.store(topic, [b"stored"], tx_write_pointer=fresh)
    client.publish(topic, [], tx_write_pointer=fresh)
    client.publish(topic, [b"direct"], tx_write_pointer=fresh)
    assert payloads(list(client.fetch(topic))) == [b"before", b"stored", b"direct"]

    # a shorter lifetime of the deployment's own is honoured; a longer one than pruning allows is refused
    minute_old = write_pointer_now() - 120 * 1000 * 10**6
    with MessagingClient(client.installation.address, client.installation.prefix, tx_max_lifetime_seconds=60) as strict:
        with pytest.raises(InvalidArgument, match="max lifetime of 60 s"):
            strict.publish(topic, [b"x"], tx_write_pointer=minute_old)
        strict.publish(topic, [b"y"], tx_write_pointer=write_pointer_now())
    for bad in (0, -1, MAX_LIFETIME_SECONDS + 1, "90000", True, float("nan")):
        with pytest.raises(InvalidArgument, match="tx_max_lifetime_seconds"):
            MessagingClient(client.installation.address, client.installation.prefix, tx_max_lifetime_seconds=bad)
