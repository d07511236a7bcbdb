"""One interface, two clients: the same scenarios run, parametrized, through ``MessagingClient`` on the real
HBase and through ``GatewayClient`` over a real ``tms-gateway`` process on the same installation.

Every scenario is written once against :class:`tms_hbase.api.MessagingService` and asserts what a user
relies on, so a difference between the clients fails the scenario on one side. The bad-input cases call
both clients with the same arguments and compare the errors: the same class from the TmsError tree (and,
for what the clients check themselves, the same message), with nothing changed.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tms_hbase import MessagingClient, RollbackDetail, TopicId
from tms_hbase.api import MessagingService
from tms_hbase.errors import (
    InvalidArgument,
    SubscriptionAlreadyExists,
    SubscriptionBusy,
    SubscriptionNotFound,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
)
from tms_hbase.gateway_client.http import GatewayClient
from tms_hbase.model.message_id import MessageId
from tms_hbase.tx import Transaction, write_pointer_now

from ..gateway_server import GatewayProcess, module_gateway

CLIENTS = ["direct", "gateway"]


gateway = module_gateway("workers = 1\n")


@pytest.fixture(scope="module")
def via_gateway(gateway: GatewayProcess) -> Iterator[GatewayClient]:
    with GatewayClient(gateway.url, timeout_seconds=60) as client:
        yield client


@pytest.fixture(params=CLIENTS)
def service(request: pytest.FixtureRequest, direct: MessagingClient, via_gateway: GatewayClient) -> MessagingService:
    """The client under test: direct access or the gateway's client, on the same installation."""
    return direct if request.param == "direct" else via_gateway


@pytest.fixture
def ns() -> str:
    return f"p{uuid.uuid4().hex[:10]}"


def payloads(messages: Iterator[Any] | list[Any]) -> list[bytes]:
    return [m.payload for m in messages]


def test_both_clients_declare_the_interface() -> None:
    """Declared as their base, the type checker (``make lint``) holds both to its signatures."""
    assert MessagingService in MessagingClient.__mro__ and MessagingService in GatewayClient.__mro__


# -- topics -----------------------------------------------------------------------------------------


def test_topic_lifecycle(service: MessagingService, ns: str) -> None:
    t = TopicId(ns, "orders")
    created = service.create_topic(t, {"ttl": "3600", "owner": "me"})
    assert (created.topic, created.ttl, created.properties["owner"]) == (t, 3600, "me")
    with pytest.raises(TopicAlreadyExists):
        service.create_topic(t)
    assert service.create_topic(t, {"ttl": "60"}, exist_ok=True) == created  # as it is, properties unchanged
    assert service.get_topic(t) == created
    updated = service.update_topic(t, {"ttl": "600"})
    assert (updated.ttl, updated.generation) == (600, created.generation)
    service.create_topic(f"{ns}:audit")
    assert service.list_topics(ns) == [TopicId(ns, "audit"), t]
    assert [m.ttl for m in service.list_topic_metadata(ns)][1] == 600
    service.delete_topic(t)
    with pytest.raises(TopicNotFound):
        service.get_topic(t)
    with pytest.raises(TopicNotFound):
        service.delete_topic(t)
    with pytest.raises(TopicNotFound):
        service.update_topic(t, {"ttl": "60"})
    assert service.list_topics(ns) == [TopicId(ns, "audit")]


# -- publishing and fetching --------------------------------------------------------------------------


def test_publish_and_fetch_from_an_id_a_time_and_with_a_limit(service: MessagingService, ns: str) -> None:
    t = TopicId(ns, "events")
    service.create_topic(t)
    first = service.publish(t, [b"a", b"b"])
    before_c = int(time.time() * 1000) - 1
    service.publish(t, [b"c"])
    last = service.publish(t, [b"d", b"e"], ttl_seconds=3600)
    everything = list(service.fetch(t))
    assert payloads(everything) == [b"a", b"b", b"c", b"d", b"e"]
    # what a publish returns names the ids a reader sees
    assert (first.topic, first.count, first.rollback) == (t, 2, None)
    assert first.message_ids == [m.id for m in everything[:2]] and last.last_id == everything[-1].id
    assert [m.id for m in everything] == sorted(m.id for m in everything)
    assert all(m.publish_time > 0 for m in everything)
    second = everything[1].id
    assert payloads(service.fetch(t, start_message=second)) == [b"b", b"c", b"d", b"e"]
    assert payloads(service.fetch(t, start_message=second, inclusive=False, limit=2)) == [b"c", b"d"]
    since = payloads(service.fetch(t, start_time_ms=before_c))
    assert since[-3:] == [b"c", b"d", b"e"] and set(since) <= {b"a", b"b", b"c", b"d", b"e"}
    assert payloads(service.fetch(t, start_time_ms=int(time.time() * 1000) + 3_600_000)) == []
    assert payloads(service.fetch(t, limit=1)) == [b"a"]


def test_a_fetch_through_one_client_sees_what_the_other_published(
    direct: MessagingClient, via_gateway: GatewayClient, ns: str
) -> None:
    t = TopicId(ns, "both")
    direct.create_topic(t)
    direct.publish(t, [b"direct"])
    via_gateway.publish(t, [b"gateway"])
    seen_direct = [(m.id, m.payload, m.publish_time) for m in direct.fetch(t)]
    seen_gateway = [(m.id, m.payload, m.publish_time) for m in via_gateway.fetch(t)]
    assert seen_direct == seen_gateway and [p for _, p, _ in seen_direct] == [b"direct", b"gateway"]


def test_transactional_publish_store_and_rollback(service: MessagingService, ns: str) -> None:
    t = TopicId(ns, "tx")
    service.create_topic(t)
    pointer = write_pointer_now()
    handle = service.publish(t, [b"in tx"], tx_write_pointer=pointer)
    assert isinstance(handle.rollback, RollbackDetail) and handle.rollback.transaction_write_pointer == pointer
    assert (handle.count, handle.rollback.start_position) == (1, handle.position)
    service.store(t, [b"s1", b"s2"], tx_write_pointer=pointer + 1)
    pointer_row = service.publish(t, [], tx_write_pointer=pointer + 1)
    assert (pointer_row.count, pointer_row.message_ids, pointer_row.first_id) == (0, [], None)
    fetched = list(service.fetch(t))
    assert payloads(fetched) == [b"in tx", b"s1", b"s2"]  # without a transaction: everything
    assert [m.id for m in fetched][:1] == handle.message_ids
    assert {MessageId.decode(m.id).position for m in fetched[1:]} == {pointer_row.position}
    service.rollback(t, handle)
    reader = Transaction(
        read_pointer=pointer + 10, tx_id=pointer + 11, invalids=[], in_progress=[], first_short_in_progress=2**63 - 1
    )
    assert payloads(service.fetch(t, transaction=reader)) == [b"s1", b"s2"]  # the rolled-back batch is skipped
    in_progress = Transaction(
        read_pointer=pointer + 10,
        tx_id=pointer + 11,
        invalids=[],
        in_progress=[pointer + 1],
        first_short_in_progress=pointer + 1,
    )
    assert payloads(service.fetch(t, transaction=in_progress)) == []  # stops at a transaction not committed yet


# -- subscriptions, consumers, lag and statistics ------------------------------------------------------


def test_subscription_consumer_commit_lag_and_stats(service: MessagingService, ns: str) -> None:
    t = TopicId(ns, "work")
    service.create_topic(t)
    service.publish(t, [b"1", b"2", b"3"])
    created = service.create_subscription(t, "svc")
    assert (created.name, created.position) == ("svc", None)
    with pytest.raises(SubscriptionAlreadyExists):
        service.create_subscription(t, "svc")
    assert service.create_subscription(t, "svc", "latest", exist_ok=True).position is None
    assert service.lag(t, "svc").messages == 3
    with service.consumer(t, "svc", max_wait_seconds=0.5) as consumer:
        with pytest.raises(SubscriptionBusy):
            service.consumer(t, "svc", max_wait_seconds=0.5)
        assert payloads(consumer.poll(max_messages=2, timeout_seconds=5.0)) == [b"1", b"2"]
        consumer.commit()
        assert consumer.committed == consumer.delivered
    assert service.lag(t, "svc").messages == 1
    assert service.get_subscription(t, "svc").position == consumer.committed
    stats = service.topic_stats(t, windows=[60])
    assert (stats.messages, list(stats.rates)) == (3, [60])
    assert [(name, lag.messages) for name, _, lag in stats.subscriptions] == [("svc", 1)]
    with service.consumer(t, "svc", max_wait_seconds=0.5) as consumer:  # the uncommitted one again
        assert payloads(consumer.poll(max_messages=10, timeout_seconds=5.0)) == [b"3"]
        consumer.commit()
    assert service.lag(t, "svc").messages == 0
    assert service.reset_subscription(t, "svc", "earliest").position is None
    assert service.lag(t, "svc").messages == 3
    service.reset_subscription(t, "svc", start_time_ms=int(time.time() * 1000) + 60_000)
    assert service.lag(t, "svc").messages == 0
    assert [s.name for s in service.list_subscriptions(t)] == ["svc"]
    service.delete_subscription(t, "svc")
    with pytest.raises(SubscriptionNotFound):
        service.get_subscription(t, "svc")
    with pytest.raises(SubscriptionNotFound):
        service.delete_subscription(t, "svc")


def test_release_takes_the_lease_from_whoever_holds_it(service: MessagingService, ns: str) -> None:
    t = TopicId(ns, "leased")
    service.create_topic(t)
    service.publish(t, [b"x"])
    service.create_subscription(t, "svc")
    holder = service.consumer(t, "svc", max_wait_seconds=0.5)
    assert payloads(holder.poll(timeout_seconds=5.0)) == [b"x"]
    assert service.get_subscription(t, "svc").owner is not None
    released = service.release_subscription(t, "svc")
    assert released.owner is None and released.position is None  # the mark stays
    with service.consumer(t, "svc", max_wait_seconds=0.5) as successor:  # not busy any more
        assert payloads(successor.poll(timeout_seconds=5.0)) == [b"x"]
    holder.close()


def test_shared_subscription(service: MessagingService, ns: str) -> None:
    t = TopicId(ns, "queue")
    service.create_topic(t)
    service.publish(t, [b"j1", b"j2", b"j3"])
    service.create_subscription(t, "workers", shared=True, ack_timeout_seconds=30, max_deliveries=3)
    assert service.get_subscription(t, "workers").shared is not None
    with service.shared_consumer(t, "workers", max_wait_seconds=0.5) as worker:
        got: list[Any] = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            got += worker.receive(max_messages=3, timeout_seconds=2.0)
        assert sorted(d.payload for d in got) == [b"j1", b"j2", b"j3"]
        assert sorted(m.id for m in service.pending(t, "workers")) == sorted(d.id for d in got)
        worker.ack(got[0])
        worker.nack(got[1])
        left = service.pending(t, "workers", limit=5)  # the acked one is done; the nacked one waits to come again
        assert {m.id for m in left} == {got[1].id, got[2].id}
        assert {m.id: m.owner for m in left}[got[1].id] is None
        assert service.lag(t, "workers").messages == 2
    with pytest.raises(InvalidArgument):
        service.consumer(t, "workers")  # a shared subscription has no exclusive consumer


# -- bad input: the same error from both --------------------------------------------------------------

# A time in seconds where ms were meant; one value for every client, so that their error texts compare.
SECONDS_NOW = int(time.time())

BAD_INPUT: dict[str, Callable[[MessagingService, TopicId], object]] = {
    "bad topic name": lambda s, t: s.create_topic("no colon"),
    "bad namespace": lambda s, t: s.list_topics("bad ns"),
    "bad ttl property": lambda s, t: s.create_topic(TopicId(t.namespace, "x"), {"ttl": "soon"}),
    "publish nothing": lambda s, t: s.publish(t, []),
    "publish not bytes": lambda s, t: s.publish(t, ["text"]),  # type: ignore[list-item]
    "negative ttl_seconds": lambda s, t: s.publish(t, [b"x"], ttl_seconds=-1),
    "ttl_seconds over the topic's": lambda s, t: s.publish(t, [b"x"], ttl_seconds=10**9),
    "fetch limit 0": lambda s, t: s.fetch(t, limit=0),
    "fetch id and time": lambda s, t: s.fetch(t, start_message=b"\0" * 20, start_time_ms=5),
    "fetch seconds for ms": lambda s, t: s.fetch(t, start_time_ms=SECONDS_NOW),
    "fetch corrupt id": lambda s, t: s.fetch(t, start_message=b"bad"),
    "fetch bytes for a transaction": lambda s, t: s.fetch(t, transaction=b"tx"),  # type: ignore[arg-type]
    "rollback garbage": lambda s, t: s.rollback(t, b"garbage"),
    "options of a shared subscription": lambda s, t: s.create_subscription(t, "x", ack_timeout_seconds=5),
    "bad subscription name": lambda s, t: s.create_subscription(t, "no spaces"),
    "bad subscription start": lambda s, t: s.create_subscription(t, "x", start="soon"),
    "reset to nothing": lambda s, t: s.reset_subscription(t, "svc"),
    "reset to an id and a time": lambda s, t: s.reset_subscription(t, "svc", b"x", 5),
    "stats window 0": lambda s, t: s.topic_stats(t, windows=[0]),
    "pending limit 0": lambda s, t: s.pending(t, "svc", limit=0),
    "consumer max_wait_seconds -1": lambda s, t: s.consumer(t, "svc", max_wait_seconds=-1),
    "missing topic": lambda s, t: s.publish(TopicId(t.namespace, "missing"), [b"x"]),
    "missing subscription": lambda s, t: s.get_subscription(t, "missing"),
}
# What the clients check themselves, before any call: the message is the same too.
CHECKED_BY_THE_CLIENT = {
    "bad topic name",
    "bad namespace",
    "negative ttl_seconds",
    "fetch limit 0",
    "fetch id and time",
    "fetch seconds for ms",
    "fetch corrupt id",
    "fetch bytes for a transaction",
    "options of a shared subscription",
    "reset to nothing",
    "reset to an id and a time",
    "stats window 0",
    "pending limit 0",
    "consumer max_wait_seconds -1",
}


def _error(call: Callable[[], object]) -> TmsError:
    with pytest.raises(TmsError) as caught:
        result = call()
        if isinstance(result, Iterator):
            next(result, None)
    return caught.value


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_input_gives_the_same_error_from_both_and_changes_nothing(
    direct: MessagingClient, via_gateway: GatewayClient, ns: str, case: str
) -> None:
    t = TopicId(ns, "t")
    direct.create_topic(t, {"ttl": "3600"})
    direct.publish(t, [b"kept"])
    direct.create_subscription(t, "svc")
    clients: dict[str, MessagingService] = {"direct": direct, "gateway": via_gateway}
    errors = {name: _error(lambda c=c: BAD_INPUT[case](c, t)) for name, c in clients.items()}
    assert type(errors["direct"]) is type(errors["gateway"]), errors
    if case in CHECKED_BY_THE_CLIENT:
        assert str(errors["direct"]) == str(errors["gateway"])
        assert isinstance(errors["direct"], InvalidArgument)
    assert payloads(direct.fetch(t)) == [b"kept"]
    assert direct.list_topics(ns) == [t] and [s.name for s in direct.list_subscriptions(t)] == ["svc"]
