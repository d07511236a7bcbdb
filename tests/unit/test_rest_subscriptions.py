"""The subscription bodies both ends of the REST API share (tms_hbase.rest.codec): what the gateway encodes the
client decodes to the same objects, and bad bodies are InvalidArgument."""

from __future__ import annotations

import pytest

from tms_hbase import Lag, Subscription, TopicId, TopicStats
from tms_hbase.errors import InvalidArgument
from tms_hbase.model import wire
from tms_hbase.model.message import Delivery, DeliveryRef
from tms_hbase.model.subscription import Pending
from tms_hbase.rest import codec as rest
from tms_hbase.rest import shared as rest_shared

T = TopicId("ns", "t")
MARK = bytes(range(20))


def test_a_subscription_and_its_lag_round_trip() -> None:
    sub = Subscription(T, "svc", MARK, 2000, 1000, 3, "gateway:alice:ab", 5000, Pending(7, 70, MARK))
    assert rest.decode_subscription(T, rest.encode_subscription(sub)) == sub
    body = rest.encode_subscription(sub, Lag(4, 1.5, False))
    assert rest.decode_subscription(T, body) == sub
    assert rest.decode_lag(body) == Lag(4, 1.5, False)
    fresh = Subscription(T, "new", None, 1, 1, 1)
    assert rest.decode_subscriptions(T, rest.encode_subscriptions([fresh, sub])) == [fresh, sub]


def test_topic_stats_round_trip() -> None:
    stats = TopicStats(
        T, 2, 3600, 1, 100, 9, 900, 50, 51200, {60: 0.5, 300: 0.1}, [("a", None, Lag(50, 3.0)), ("b", MARK, Lag(0, 0))]
    )
    assert rest.decode_stats(T, rest.encode_stats(stats)) == stats


@pytest.mark.parametrize(
    ("body", "ids", "start"),
    [
        (b"", False, "earliest"),
        (b'{"start": "latest"}', False, "latest"),
        (b'{"start": 1700000000000}', False, 1700000000000),
        (rest.encode_start(MARK), True, MARK),
    ],
)
def test_start_bodies(body: bytes, ids: bool, start: object) -> None:
    assert rest.decode_start(body, ids=ids) == start


@pytest.mark.parametrize(
    ("body", "ids"),
    [
        (rest.encode_start(MARK), False),  # creating takes no message id
        (b'{"start": true}', True),
        (b'{"start": "yesterday"}', True),  # not base64 either
        (b'{"begin": "earliest"}', True),
        (b"[]", True),
    ],
)
def test_bad_start_bodies_are_refused(body: bytes, ids: bool) -> None:
    with pytest.raises(InvalidArgument):
        rest.decode_start(body, ids=ids)


def test_commit_bodies() -> None:
    assert rest.decode_commit(b"") is None
    assert rest.decode_commit(rest.encode_commit(MARK)) == MARK
    assert rest.decode_committed(rest.encode_committed("s~", MARK)) == MARK
    with pytest.raises(InvalidArgument):
        rest.decode_commit(b'{"id": 5}')


@pytest.mark.parametrize(
    ("accept", "content_type", "media"),
    [
        (None, None, rest.JSON),
        ("*/*", None, rest.JSON),
        ("avro/binary", None, rest.AVRO),
        ("text/html, avro/binary;q=0.9", None, rest.AVRO),
        ("*/*", "avro/binary", rest.AVRO),
        ("application/json", "avro/binary", rest.JSON),
    ],
)
def test_the_response_media_of_a_get(accept: str | None, content_type: str | None, media: str) -> None:
    assert rest.accepted_media(accept, content_type) == media


@pytest.mark.parametrize("media", [rest.AVRO, rest.AVRO_RECORDS, rest.JSON])
def test_deliveries_and_settlements_carry_the_deliveries_incarnations(media: str) -> None:
    """What fences a late settlement over HTTP: a delivery's incarnation goes out with it and comes back
    with the settlement; a body that names none (an older client's) is read with incarnations 0."""
    deliveries = [Delivery(MARK, b"p", 1, 2, 3, incarnation=2**52 - 1), Delivery(MARK[::-1], b"q", 4, 1, 6)]
    assert rest_shared.decode_deliveries(rest_shared.encode_deliveries(deliveries, media), media) == deliveries
    refs = [DeliveryRef(MARK, 7), DeliveryRef(MARK[::-1], 0)]
    request = rest_shared.SettleRequest(refs, 1.5)
    assert rest_shared.decode_settle(rest_shared.encode_settle(request, media), media) == request
    unnamed = rest_shared.SettleRequest([DeliveryRef(MARK, 0)], None)
    assert rest_shared.decode_settle(rest_shared.encode_settle(unnamed, media), media) == unnamed
    if media == rest.JSON:
        assert b"incarnations" not in rest_shared.encode_settle(unnamed, media)
    else:  # as an Avro client written before incarnations sends it
        old = wire.encode("UnfencedSettleRequest", {"ids": [MARK], "seconds": None})
        assert rest_shared.decode_settle(old, media) == unnamed


@pytest.mark.parametrize(
    "body",
    [
        b'{"ids": ["AAAA"], "incarnations": [1, 2]}',  # not one per id
        b'{"ids": ["AAAA"], "incarnations": [-1]}',
        b'{"ids": ["AAAA"], "incarnations": ["1"]}',
        b'{"ids": ["AAAA"], "incarnations": 1}',
        b'{"ids": ["AAAA"], "incarnations": [true]}',
    ],
)
def test_bad_incarnations_are_refused(body: bytes) -> None:
    with pytest.raises(InvalidArgument, match="incarnations"):
        rest_shared.decode_settle(body, rest.JSON)
