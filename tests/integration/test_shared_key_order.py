"""Key-ordered shared subscriptions (ordering="key") in one process: the setting is kept and checked, a key's
next message goes out only once the one before is settled, different keys go out at once, a nack with a
delay keeps its key waiting, a poison message's key moves on after the dead letter, and a transactional ack
lets the key's next message go only at commit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import pytest

from tms_hbase import DeadLetter, InvalidArgument, MessagingClient, Record, SubscriptionNotFound, TopicId
from tms_hbase.aio import AsyncMessagingClient
from tms_hbase.model.message import Delivery
from tms_hbase.shared.key_order import REAP_CLAIMS
from tms_hbase.shared.state import Claim, ClaimState, RangeCell, key_of
from tms_hbase.shared.store import UNSETTLED
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext

T = TopicId("queue", "orders")
DLT = TopicId("queue", "orders-dead")


def records(keys: str, per_key: int) -> list[Record | bytes]:
    """``per_key`` messages of each key in ``keys`` (one letter each), interleaved, payload ``k:n``; a
    keyless message ``-:n`` after each round."""
    out: list[Record | bytes] = []
    for n in range(per_key):
        out += [Record(f"{k}:{n}".encode(), key=k.encode()) for k in keys]
        out.append(f"-:{n}".encode())
    return out


def drain(
    receive: Callable[[], list[Delivery]], until: Callable[[list[Delivery]], bool], timeout: float = 30.0
) -> list:
    got: list[Delivery] = []
    end = time.monotonic() + timeout
    while not until(got):
        assert time.monotonic() < end, f"timed out with {[d.payload for d in got]}"
        got += receive()
    return got


def names(deliveries: list[Delivery]) -> set[str]:
    return {d.payload.decode() for d in deliveries}


def test_the_ordering_is_kept_and_checked(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True, ordering="key")
    shared = client.get_subscription(T, "work").shared
    assert shared is not None and shared.ordering == "key"
    client.create_subscription(T, "plain", shared=True)
    plain = client.get_subscription(T, "plain").shared
    assert plain is not None and plain.ordering is None
    for bad in (
        {"ordering": "key"},
        {"ordering": "key", "shared": True, "claim_size": 0},
        {"ordering": "fifo", "shared": True},
    ):
        with pytest.raises(InvalidArgument):
            client.create_subscription(T, "bad", **bad)  # type: ignore[arg-type]
        with pytest.raises(SubscriptionNotFound):
            client.get_subscription(T, "bad")


def test_the_asyncio_client_creates_one(client: MessagingClient, hbase_address: str) -> None:
    client.create_topic(T)

    async def create() -> None:
        async with AsyncMessagingClient(hbase_address, client.installation.prefix, timeout_seconds=60) as aio:
            with pytest.raises(InvalidArgument):
                await aio.create_subscription(T, "work", ordering="key")
            await aio.create_subscription(T, "work", shared=True, ordering="key")
            shared = (await aio.get_subscription(T, "work")).shared
            assert shared is not None and shared.ordering == "key"

    asyncio.run(create())


def test_a_key_waits_for_its_message_in_flight_and_other_keys_do_not(client: MessagingClient) -> None:
    client.create_topic(T)
    client.publish(T, records("abc", 3))
    client.create_subscription(T, "work", shared=True, ordering="key", ack_timeout_seconds=30, claim_size=4)
    with client.shared_consumer(T, "work") as one, client.shared_consumer(T, "work") as two:
        # every key's first message and every keyless one, and nothing else, whoever asks
        first = drain(lambda: one.receive(10, 0.2) + two.receive(10, 0.2), lambda g: len(g) >= 6, timeout=30)
        time.sleep(0.5)
        first += one.receive(10, 0.5) + two.receive(10, 0.5)
        assert names(first) == {"a:0", "b:0", "c:0", "-:0", "-:1", "-:2"}
        by_name = {d.payload.decode(): d for d in first}
        holder = {d.payload.decode(): c for c in (one, two) for d in first if d.id in c.held}
        holder["b:0"].ack(by_name["b:0"])
        nxt = drain(lambda: one.receive(10, 0.2) + two.receive(10, 0.2), lambda g: len(g) >= 1)
        assert names(nxt) == {"b:1"}, "only the acknowledged key's next message goes out"
        nacked_at = client.hbase_clock.now_ms()
        holder["a:0"].nack(by_name["a:0"], delay_seconds=3.0)
        again = drain(lambda: one.receive(10, 0.2) + two.receive(10, 0.2), lambda g: len(g) >= 1)
        assert client.hbase_clock.now_ms() >= nacked_at + 3000, "a nacked message came back before its delay"
        assert [(d.payload, d.deliveries) for d in again] == [(b"a:0", 2)], "its key waited: the nacked head first"
        assert {p.state for p in client.pending(T, "work")} >= {"waiting", "held"}
        stats = client.get_subscription(T, "work").shared
        assert stats is not None and (stats.waiting, stats.due) == (5, 0)  # a:1, a:2, b:2, c:1, c:2


@pytest.mark.parametrize("consumers", [1, 3])
def test_every_key_in_order_with_acks_as_they_come(client: MessagingClient, consumers: int) -> None:
    client.create_topic(T)
    keys = "abcdefgh"
    client.publish(T, records(keys, 12))
    client.create_subscription(T, "work", shared=True, ordering="key", claim_size=8)
    order: dict[str, list[int]] = {k: [] for k in keys}
    cs = [client.shared_consumer(T, "work") for _ in range(consumers)]
    try:
        total, done = len(keys) * 12 + 12, 0
        end = time.monotonic() + 120
        while done < total:
            assert time.monotonic() < end, f"{done} of {total} done"
            for c in cs:
                for d in c.receive(5, 0.1):
                    k, n = d.payload.decode().split(":")
                    if k != "-":
                        order[k].append(int(n))
                    c.ack(d)
                    done += 1
    finally:
        for c in cs:
            c.close()
    assert order == {k: list(range(12)) for k in keys}
    stats = client.get_subscription(T, "work").shared
    assert stats is not None and (stats.acknowledged, stats.waiting, stats.in_flight, stats.due) == (total, 0, 0, 0)


def test_a_poison_message_is_dead_lettered_and_its_key_moves_on(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_topic(DLT)
    client.publish(T, records("ab", 3))
    client.create_subscription(
        T, "work", shared=True, ordering="key", max_deliveries=2, dead_letter=DLT, ack_timeout_seconds=30
    )
    seen: list[tuple[str, int]] = []
    with client.shared_consumer(T, "work", reap_interval=0.1) as c:
        end = time.monotonic() + 60
        while len([s for s in seen if s[1] == 1]) < 9:
            assert time.monotonic() < end, seen
            for d in c.receive(10, 0.2):
                seen.append((d.payload.decode(), d.deliveries))
                if d.payload == b"a:1":
                    c.nack(d)
                else:
                    c.ack(d)
    a = [p for p, _ in seen if p.startswith("a:")]
    assert a == ["a:0", "a:1", "a:1", "a:2"], "a:2 only after a:1 went to the dead letters"
    assert [DeadLetter.of(m).payload for m in client.fetch(DLT)] == [b"a:1"]


def test_a_transactional_ack_lets_the_key_go_on_only_at_commit(
    client: MessagingClient, tx_client: TransactionClient
) -> None:
    client.create_topic(T)
    client.publish(T, records("a", 2))
    client.create_subscription(T, "work", shared=True, ordering="key", ack_timeout_seconds=30)
    with client.shared_consumer(T, "work", reap_interval=0.1) as consumer:
        first = drain(lambda: consumer.receive(10, 0.2), lambda g: len(g) >= 3)
        assert names(first) == {"a:0", "-:0", "-:1"}
        head = next(d for d in first if d.payload == b"a:0")
        consumer.ack(*(d for d in first if d is not head))
        tx = tx_client.start_short()
        consumer.ack(head, transaction=tx)
        assert consumer.receive(10, 1.0) == [], "a:1 went out while a:0's acknowledgement was pending"
        assert consumer.rollback_tx()
        tx_client.abort(tx)
        assert [p.state for p in client.pending(T, "work")] == ["held", "waiting"], "an abort gives a:0 back"
        assert consumer.receive(10, 1.0) == []
        with TransactionContext(tx_client, consumer).transaction():
            consumer.ack(head)
            assert consumer.receive(10, 1.0) == [], "a:1 went out before the commit"
        after = drain(lambda: consumer.receive(10, 0.2), lambda g: len(g) >= 1)
        assert names(after) == {"a:1"}


def test_a_reap_reads_a_bounded_number_of_claims_and_every_key_goes_on(
    client: MessagingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With few keys nearly every claim in play waits behind its key's head, and a reap read every one (most of a
    busy consumer's time, growing with them). It reads the first REAP_CLAIMS from the floor: they hold every
    key's head and successors, so each key still goes on in order, past them too. The waiting claims are
    written here as consumers that register at once leave them (each may pass the window by a read)."""
    keys, per_key = "abcde", 500  # 2,500 claims in play: more than a reap reads, fewer than any scan's limit
    client.create_topic(T)
    client.create_subscription(T, "work", shared=True, ordering="key", ack_timeout_seconds=30, claim_size=100_000)
    batch = [Record(f"{k}:{n}".encode(), key=k.encode()) for n in range(per_key) for k in keys]
    for first in range(0, len(batch), 100):
        client.publish(T, batch[first : first + 100])
    messages = list(client.fetch(T))
    assert len(messages) == len(batch) > REAP_CLAIMS
    with client.shared_consumer(T, "work") as consumer:
        store, state = consumer._store, consumer._keys
        store.hand_out(state)  # range 1 (100,000 positions: every message) handed out, read to its end
        assert store.swap_range(state, 1, None, RangeCell(None, 0, messages[-1].id, True)) is not None
        waiting = [(m.id, Claim(ClaimState.FREE, None, 0, 0, m.publish_time, key=key_of(m.key))) for m in messages]
        assert all(store.create_claims(state, waiting))
        read: list[int] = []  # rows each scan of the claims in play read (the storage layer's answer)
        scan = store.table.scan

        def counted(*args: object, **kwargs: object) -> list:
            rows = scan(*args, **kwargs)  # type: ignore[arg-type]
            if kwargs.get("filter") == UNSETTLED:
                read.append(len(rows))
            return rows

        monkeypatch.setattr(store.table, "scan", counted)
        order: dict[str, list[int]] = {k: [] for k in keys}
        end = time.monotonic() + 300
        while sum(map(len, order.values())) < len(batch):
            assert time.monotonic() < end, f"{ {k: len(v) for k, v in order.items()} } done"
            got = consumer.receive(10, 1.0)
            for d in got:
                k, n = d.payload.decode().split(":")
                order[k].append(int(n))
            if got:
                consumer.ack(*got)
    assert order == {k: list(range(per_key)) for k in keys}
    assert read and max(read) <= REAP_CLAIMS, f"a reap read {max(read)} claims"
