"""The gateway's pure parts: settings resolution, the token guard and its rules, and the REST body codecs."""

from __future__ import annotations

import base64
import binascii
import dataclasses

import pytest

from tms_hbase import TopicId
from tms_hbase.errors import InvalidArgument, NotAuthenticated, NotAuthorized
from tms_hbase.gateway_client.calls import Calls, Reply
from tms_hbase.gateway_client.sessions import ConsumerSession
from tms_hbase.model.message import Message
from tms_hbase.model.requests import ConsumeRequest, PublishRequest
from tms_hbase.rest import codec as rest
from tms_hbase_gateway.auth import Guard, hash_token
from tms_hbase_gateway.config import Settings, resolve

ALICE, BOB = "alice-secret-token", "bob-secret-token"


def guarded(*rules: dict) -> Guard:
    tokens = [{"name": "alice", "sha256": hash_token(ALICE)}, {"name": "bob", "sha256": hash_token(BOB)}]
    return Guard(resolve({"tokens": tokens, "rules": list(rules)}, {}))


def test_settings_precedence_and_round_trip() -> None:
    settings = resolve({"port": 9000, "workers": 3, "timeout": 5}, {"port": 9100, "workers": None})
    assert (settings.port, settings.workers, settings.timeout) == (9100, 3, 5.0)
    assert Settings.from_json(guarded_settings().to_json()) == guarded_settings()
    for bad in ({"port": 0}, {"threads": -1}, {"json_logs": "yes"}, {"prefix": "no spaces"}):
        with pytest.raises(InvalidArgument):
            resolve(bad, {})


def guarded_settings() -> Settings:
    tokens = [{"name": "alice", "sha256": hash_token(ALICE)}]
    rule = {"principal": "alice", "namespace": "a*", "topics": "t-?", "actions": ["consume", "publish"]}
    return resolve({"tokens": tokens, "rules": [rule]}, {})


def test_an_open_gateway_lets_anyone_do_anything() -> None:
    guard = Guard(Settings())
    assert guard.open and guard.principal(None) == "anonymous"
    assert guard.allows("anonymous", "any", "topic", "admin")


def test_tokens_are_checked_by_their_hash() -> None:
    guard = guarded()
    assert guard.principal(f"Bearer {ALICE}") == "alice" and guard.principal(f"bearer  {BOB} ") == "bob"
    for header in (None, "", "Bearer", f"Basic {ALICE}", "Bearer wrong", hash_token(ALICE)):
        with pytest.raises(NotAuthenticated):
            guard.principal(header)
    assert guard.allows("bob", "x", "y", "admin")  # tokens without rules: any known caller may do anything


def test_rules_deny_by_default_and_match_globs_and_actions() -> None:
    guard = guarded(
        {"principal": "alice", "namespace": "shop*", "topics": "orders-*", "actions": ["publish", "consume"]},
        {"principal": "*", "namespace": "public", "topics": "*", "actions": ["consume"]},
    )
    assert guard.allows("alice", "shop-eu", "orders-1", "publish")
    assert not guard.allows("alice", "shop-eu", "orders-1", "admin")
    assert not guard.allows("alice", "shop-eu", "invoices", "publish")
    assert not guard.allows("alice", "Shop", "orders-1", "publish")  # case-sensitive
    assert not guard.allows("bob", "shop", "orders-1", "consume")
    assert guard.allows("bob", "public", "news", "consume") and not guard.allows("bob", "public", "news", "publish")
    assert guard.allows("bob", "public", "news", None)  # reading metadata: any action will do
    with pytest.raises(NotAuthorized, match="bob may not publish on topic shop:orders-1"):
        guard.check("bob", "shop", "orders-1", "publish")
    guard.check_namespace("alice", "shop")
    with pytest.raises(NotAuthorized):
        guard.check_namespace("bob", "shop")


def test_json_bodies_are_strict() -> None:
    publish = rest.decode_publish(b'{"messages": ["aGk=", ""], "transactionWritePointer": 7}', rest.JSON)
    assert (publish.transaction_write_pointer, list(publish.messages)) == (7, [b"hi", b""])
    consume = rest.decode_consume(b'{"startFrom": 1700000000000, "inclusive": false}', rest.JSON)
    assert consume == ConsumeRequest(1_700_000_000_000, False, None, None)
    assert rest.decode_consume(b"", rest.JSON) == ConsumeRequest()
    for body in (
        b'{"messages": ["aGk"]}',  # no padding
        b'{"messages": ["a-_="]}',  # URL-safe alphabet
        b'{"messages": "aGk="}',
        b'{"messages": [], "transactionWritePointer": true}',
        b'{"messages": [], "typo": 1}',
        b"[]",
    ):
        with pytest.raises(InvalidArgument):
            rest.decode_publish(body, rest.JSON)


@pytest.mark.parametrize("media", [rest.AVRO, rest.JSON])
def test_codecs_round_trip(media: str) -> None:
    request = PublishRequest(None, [b"\x00\xff", b""])
    assert rest.decode_publish(rest.encode_publish(request, media), media) == request
    for consume in (ConsumeRequest(b"\x01" * 20, False, 10, b"tx"), ConsumeRequest(5, True, None, None)):
        assert rest.decode_consume(rest.encode_consume(consume, media), media) == consume
    messages = [Message(b"\x02" * 20, b"payload", 123)]
    timed = rest.encode_messages(messages, media, publish_time=True)
    assert rest.decode_messages(timed, media, publish_time=True) == messages
    plain = rest.decode_messages(rest.encode_messages(messages, media, publish_time=False), media, publish_time=False)
    assert [(m.id, m.payload) for m in plain] == [(b"\x02" * 20, b"payload")]


@pytest.mark.parametrize("media", [rest.AVRO, rest.JSON])
@pytest.mark.parametrize("count", [0, 1, 3, 1000])
def test_pages_round_trip_every_field_exactly(media: str, count: int) -> None:
    """Ids, payloads (empty, binary, non-ASCII text, 100 KiB) and publish times (batches sharing one, the
    extremes of a long) come back exact in both encodings; the JSON page is what json.dumps writes."""
    payloads = [b"", bytes(range(256)), "é ✓ 𝄞".encode(), b"\x00" * 100 * 1024]
    times = [1_700_000_000_000, 0, -(2**63), 2**63 - 1]  # runs of 100 messages share one
    messages = [Message(i.to_bytes(20, "big"), payloads[i % 4], times[(i // 100) % 4]) for i in range(count)]
    body = rest.encode_messages(messages, media, publish_time=True)
    assert rest.decode_messages(body, media, publish_time=True) == messages
    if media == rest.JSON:
        fields = [
            {"id": rest._b64(m.id), "payload": rest._b64(m.payload), "publishTime": m.publish_time} for m in messages
        ]
        assert body == rest._dumps(fields)


@pytest.mark.parametrize("media", [rest.AVRO, rest.JSON])
def test_a_truncated_or_corrupt_page_is_refused(media: str) -> None:
    body = rest.encode_messages([Message(b"\x02" * 20, b"p" * 300, 5)] * 3, media, publish_time=True)
    for bad in (body[:-1], body[: len(body) // 2], body + b"\x00", b"\xff" + body[1:]):
        with pytest.raises(InvalidArgument):
            rest.decode_messages(bad, media, publish_time=True)


@pytest.mark.parametrize(
    "text", ["", "QQ==", "QUI=", "QUJD", "QQ", "QQ=", "Q===", "=QUJD", "QU=JD", "QUJD\n", "QU JD", "QUJD-_", "é"]
)
def test_base64_fields_are_strict(text: str) -> None:
    """Only the standard alphabet with its padding decodes, as ``base64.b64decode(validate=True)`` has it."""
    try:
        expected = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        with pytest.raises(InvalidArgument, match="is not base64"):
            rest._unb64(text, "payload")
    else:
        assert rest._unb64(text, "payload") == expected


def test_media_types_and_the_status_table() -> None:
    assert rest.media_type(None) == rest.JSON and rest.media_type("avro/binary; charset=x") == rest.AVRO
    assert rest.media_type("application/vnd.api+json") == rest.JSON
    with pytest.raises(rest.UnsupportedMediaType):
        rest.media_type("text/plain")
    assert rest.status_of(rest.UnsupportedMediaType("x")) == 415 and rest.status_of(InvalidArgument("x")) == 400


def test_a_decoded_message_is_the_message_its_constructor_makes() -> None:
    """The client makes the messages of a page without ``Message.__init__``: the same value, hash, text and
    frozenness."""
    [decoded] = rest.decode_messages(
        rest.encode_messages([Message(b"\x02" * 20, b"p", 7)], rest.AVRO, publish_time=True),
        rest.AVRO,
        publish_time=True,
    )
    made = Message(b"\x02" * 20, b"p", 7)
    assert (decoded, hash(decoded), repr(decoded), decoded.publish_time_ms) == (made, hash(made), repr(made), 7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decoded.payload = b"q"  # type: ignore[misc]


def test_a_page_asked_for_with_commit_counts_only_with_the_gateways_word_that_it_stored_it() -> None:
    """``poll(commit=True)``: the client takes the commit as stored only from the answer's ``TMS-Committed``
    header; an answer without it (a gateway that ignores ``?commit=true``) is refused and changes nothing in
    the session, so the page it carried comes again with the next call."""
    session = ConsumerSession(Calls(rest.AVRO), TopicId("ns", "t"), "svc")
    assert "commit" not in session.poll(10, 1.0, commit=True).path  # nothing delivered: nothing to commit
    mark, later = b"\x02" * 20, b"\x03" * 20
    session.delivered, session.token = mark, "secret~" + mark.hex()
    request = session.poll(10, 1.0, commit=True)
    assert "commit=true" in request.path
    page = rest.encode_messages([Message(later, b"p", 7)], rest.AVRO, publish_time=True)
    for header in (None, "", "not hex"):
        with pytest.raises(InvalidArgument, match=rest.COMMITTED_HEADER):
            request.decode(Reply(200, page, consumer="secret~" + later.hex(), committed=header))
        assert (session.token, session.delivered, session.committed) == ("secret~" + mark.hex(), mark, None)
    got = request.decode(Reply(200, page, consumer="secret~" + later.hex(), committed=mark.hex()))
    assert got == [Message(later, b"p", 7)]
    assert (session.token, session.delivered, session.committed) == ("secret~" + later.hex(), later, mark)
