"""CDAP's messaging REST API (docs/design.md#the-rest-api) as both of its ends speak it: paths, media types,
the body codecs (Avro binary and JSON) and the one table between TmsError classes and HTTP status codes.

The gateway (``gateway/``, the server) and its Python client (:mod:`tms_hbase.gateway_client.http`) both use this
module, so the two cannot drift apart; it lives in the library because the library never imports the
gateway.

Keys and headers (docs/gateway.md) extend both: a JSON message may be an object with ``payload``, ``key`` and
``headers``, and a message read carries ``key`` and ``headers`` when it has any; Avro carries them under the
media type :data:`AVRO_RECORDS` with schemas of their own, so CDAP's Avro schemas keep their bytes.

JSON bodies use the Avro schemas' field names; ``bytes`` fields are base64 strings (RFC 4648 section 4:
standard alphabet, with padding; anything else is rejected), ``long``/``int`` fields are JSON integers
and ``null`` fields may be left out.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, overload

from tms_hbase.errors import (
    BatchTooLarge,
    ConcurrentModification,
    HBaseError,
    InstallationNotFound,
    InvalidArgument,
    NotAuthenticated,
    NotAuthorized,
    SubscriptionAlreadyExists,
    SubscriptionNotFound,
    TmsError,
    TopicAlreadyExists,
    TopicNotFound,
)
from tms_hbase.model import wire
from tms_hbase.model.message import Message
from tms_hbase.model.record import NONE, Extra, Record
from tms_hbase.model.requests import ConsumeRequest, PublishRequest
from tms_hbase.model.rows import RowSlice
from tms_hbase.model.stats import Lag, SharedStats, TopicStats
from tms_hbase.model.subscription import Pending, Subscription
from tms_hbase.model.topic import GENERATION_KEY, ORDERING_KEY, TopicId, TopicMetadata, as_topic

AVRO = "avro/binary"
AVRO_RECORDS = "application/vnd.tms-hbase.records+avro"  # Avro whose messages carry keys and headers
AVROS = (AVRO, AVRO_RECORDS)
JSON = "application/json"
OCTETS = "application/octet-stream"  # the publish response: the opaque rollback handle
TEXT = "text/plain; charset=utf-8"  # error bodies: one line
ERROR_HEADER = "TMS-Error"  # the TmsError class name of an error response
CONSUMER_HEADER = "TMS-Consumer"  # the consumer session a subscription's messages/commit calls go on with
PUBLISHED_HEADER = "TMS-Published"  # where a publish stored its batch: "<generation>:<position>"
COMMITTED_HEADER = "TMS-Committed"  # the mark a page's call committed first (?commit=true): the id in hex
BASE = "/v1/namespaces/{namespace}"


class UnsupportedMediaType(InvalidArgument):
    """A body in a media type the endpoint does not take (HTTP 415)."""


# The one table between errors and status codes: the first class an error is an instance of wins.
STATUS: list[tuple[type[TmsError], int]] = [
    (BatchTooLarge, 413),
    (UnsupportedMediaType, 415),
    (InvalidArgument, 400),
    (NotAuthenticated, 401),
    (NotAuthorized, 403),
    (TopicNotFound, 404),
    (SubscriptionNotFound, 404),
    (TopicAlreadyExists, 409),
    (SubscriptionAlreadyExists, 409),
    (ConcurrentModification, 409),
    (InstallationNotFound, 503),  # the gateway's prefix has no installation: `tms-admin init` it
    (HBaseError, 503),  # HBaseUnavailable and PublishOutcomeUnknown included: HBase did not do it
    (TmsError, 500),
]


def status_of(error: TmsError) -> int:
    """The HTTP status code that reports ``error``."""
    return next(status for kind, status in STATUS if isinstance(error, kind))


def accepted_media(accept: str | None, content_type: str | None) -> str:
    """The media type of a response to a request without a body: the first of :data:`AVRO` or
    :data:`JSON` that ``Accept`` names, else as ``Content-Type`` says, else JSON."""
    for item in (accept or "").split(","):
        media = item.split(";", 1)[0].strip().lower()
        if media in (AVRO, AVRO_RECORDS, JSON):
            return media
    return media_type(content_type)


def topic_path(topic: TopicId, action: str = "") -> str:
    """``/v1/namespaces/<ns>/topics/<topic>[/<action>]`` (names are ``[A-Za-z0-9_-]+``: nothing to escape)."""
    path = f"{BASE.format(namespace=topic.namespace)}/topics/{topic.topic}"
    return f"{path}/{action}" if action else path


def media_type(content_type: str | None, *, default: str = JSON) -> str:
    """:data:`AVRO`, :data:`AVRO_RECORDS` or :data:`JSON` from a ``Content-Type`` header (none: ``default``); else
    UnsupportedMediaType."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if not media:
        return default
    if media in AVROS:
        return media
    if media == JSON or (media.startswith("application/") and media.endswith("+json")):
        return JSON
    raise UnsupportedMediaType(f"unsupported Content-Type {media!r}: use {AVRO}, {AVRO_RECORDS} or {JSON}")


# -- bodies --------------------------------------------------------------------------------------


def encode_publish(request: PublishRequest, media: str) -> bytes:
    """A PublishRequest body; Records need JSON or :data:`AVRO_RECORDS` (CDAP's Avro schema has no room)."""
    pointer, messages = request.transaction_write_pointer, request.messages
    if media == AVRO_RECORDS:
        return wire.encode(
            "RecordsPublishRequest",
            {"transactionWritePointer": pointer, "messages": [_avro_record(m) for m in messages]},
        )
    if media == AVRO:
        if Record in set(map(type, messages)):
            raise InvalidArgument(f"messages with a key or headers need media {AVRO_RECORDS!r} or {JSON!r}")
        return wire.encode_publish_request(pointer, messages)  # type: ignore[arg-type]
    return _dumps({"transactionWritePointer": pointer, "messages": [_json_record(m) for m in messages]})


def _avro_record(message: bytes | Record) -> bytes | dict[str, Any]:
    if type(message) is not Record:
        return message  # type: ignore[return-value]
    headers = [{"name": n, "value": v} for n, v in message.headers]
    return {"payload": message.payload, "key": message.key, "headers": headers}


def _json_record(message: bytes | Record) -> str | dict[str, Any]:
    if type(message) is not Record:
        return _b64(message)  # type: ignore[arg-type]
    return {"payload": _b64(message.payload), **_json_extra(message.key, tuple(message.headers))}


def _json_extra(key: bytes | None, headers: Sequence[tuple[str, bytes]]) -> dict[str, Any]:
    return {"key": None if key is None else _b64(key), "headers": [[n, _b64(v)] for n, v in headers]}


def _record_of(value: object, field: str) -> bytes | Record:
    """A JSON message: a base64 payload, or ``{"payload", "key", "headers": [[name, base64], ...]}``."""
    if not isinstance(value, dict):
        return _unb64(value, field)
    unknown = set(value) - {"payload", "key", "headers"}
    if unknown or "payload" not in value:
        raise InvalidArgument(f"{field} must have 'payload' and may have 'key' and 'headers', not {sorted(value)}")
    key = value.get("key")
    return Record(
        _unb64(value["payload"], f"{field}.payload"),
        None if key is None else _unb64(key, f"{field}.key"),
        _json_headers(value.get("headers", []), field),
    )


def _json_headers(headers: object, field: str) -> tuple[tuple[str, bytes], ...]:
    if not isinstance(headers, list) or not all(isinstance(h, list) and len(h) == 2 for h in headers):
        raise InvalidArgument(f"{field}.headers must be an array of [name, base64 value] pairs")
    return tuple((h[0], _unb64(h[1], f"{field}.headers")) for h in headers)


def _extra_of(r: Mapping[str, Any], field: str) -> Extra:
    """The key and headers of a JSON message read (none: a message without them, or a seed gateway's)."""
    key = r.get("key")
    return None if key is None else _unb64(key, f"{field}.key"), _json_headers(r.get("headers", []), field)


def decode_publish(body: bytes, media: str) -> PublishRequest:
    """Parse a PublishRequest body; InvalidArgument names what is wrong."""
    if media == AVRO:
        record = wire.decode("PublishRequest", body)
        return PublishRequest(record["transactionWritePointer"], record["messages"])
    if media == AVRO_RECORDS:
        record = wire.decode("RecordsPublishRequest", body)
        messages = [
            m
            if isinstance(m, bytes)
            else Record(m["payload"], m["key"], tuple((h["name"], h["value"]) for h in m["headers"]))
            for m in record["messages"]
        ]
        return PublishRequest(record["transactionWritePointer"], messages)
    data = _object(body, "PublishRequest", required=_PUBLISH_REQUIRED, optional=_PUBLISH_OPTIONAL)
    pointer = _optional_int(data, "transactionWritePointer")
    messages = data["messages"]
    if not isinstance(messages, list):
        raise InvalidArgument("PublishRequest field 'messages' must be an array of base64 strings or objects")
    return PublishRequest(pointer, [_record_of(m, f"messages[{i}]") for i, m in enumerate(messages)])


def encode_consume(request: ConsumeRequest, media: str) -> bytes:
    if media in AVROS:
        return wire.encode(
            "ConsumeRequest",
            {
                "startFrom": request.start_from,
                "inclusive": request.inclusive,
                "limit": request.limit,
                "transaction": request.transaction,
            },
        )
    start = _b64(request.start_from) if isinstance(request.start_from, bytes) else request.start_from
    return _dumps(
        {
            "startFrom": start,
            "inclusive": request.inclusive,
            "limit": request.limit,
            "transaction": None if request.transaction is None else _b64(request.transaction),
        }
    )


def decode_consume(body: bytes, media: str) -> ConsumeRequest:
    """Parse a ConsumeRequest body; an empty JSON body means "everything, from the start"."""
    if media in AVROS:
        r = wire.decode("ConsumeRequest", body)
        return ConsumeRequest(r["startFrom"], r["inclusive"], r["limit"], r["transaction"])
    if not body.strip():
        return ConsumeRequest()
    data = _object(body, "ConsumeRequest", optional=_CONSUME_FIELDS)
    start = data.get("startFrom")
    if isinstance(start, str):
        start = _unb64(start, "startFrom")
    elif start is not None:
        start = _optional_int(data, "startFrom")
    inclusive = data.get("inclusive", True)
    if not isinstance(inclusive, bool):
        raise InvalidArgument(f"ConsumeRequest field 'inclusive' must be true or false, not {inclusive!r}")
    tx = data.get("transaction")
    return ConsumeRequest(
        start, inclusive, _optional_int(data, "limit", INT), None if tx is None else _unb64(tx, "transaction")
    )


def encode_messages(messages: Sequence[Message], media: str, *, publish_time: bool) -> bytes:
    """A poll response. Avro: CDAP's ConsumeResponse, or TimedConsumeResponse with ``publish_time``.
    JSON: always ``[{"id", "payload", "publishTime"}]`` (a JSON reader skips a field it does not know), plus
    ``"key"`` and ``"headers"`` for a message that has any. :data:`AVRO_RECORDS`: RecordsConsumeResponse."""
    page = [
        ((m.id,), (m.payload,), m.publish_time, None if m.key is None and not m.headers else ((m.key, m.headers),))
        for m in messages
    ]
    return _encode_page(page, media, publish_time)


def encode_rows(rows: Sequence[RowSlice], media: str, *, publish_time: bool) -> bytes:
    """The bytes :func:`encode_messages` gives for the messages of ``rows`` (a consumer's page, written
    straight from the stored rows' slices: no message object, no payload copy each)."""
    return _encode_page([(row.ids(), row.payloads, row.publish_time, row.extras) for row in rows], media, publish_time)


Page = Sequence[tuple[Sequence[bytes], Sequence["bytes | memoryview"], int, "Sequence[Extra] | None"]]
"""Runs of messages that share a publish time: (ids, payloads, time in ms, keys and headers or None)."""


def _encode_page(runs: Page, media: str, publish_time: bool) -> bytes:
    if media == AVRO:
        return wire.encode_consume_response([(ids, payloads, t) for ids, payloads, t, _ in runs], publish_time)
    if media == AVRO_RECORDS:
        records = [
            {
                "id": message_id,
                "payload": bytes(payload),
                "publishTime": time_ms,
                "key": key,
                "headers": [{"name": n, "value": v} for n, v in headers],
            }
            for ids, payloads, time_ms, extras in runs
            for message_id, payload, (key, headers) in zip(ids, payloads, extras or [NONE] * len(ids), strict=True)
        ]
        return wire.encode("RecordsConsumeResponse", records)
    # written as json.dumps would, without it scanning every base64 string for characters to escape (none)
    b64 = binascii.b2a_base64
    parts: list[bytes | memoryview] = [b'[{"id":"']
    extend = parts.extend
    for ids, payloads, time_ms, extras in runs:
        tail = b'","publishTime":%d},{"id":"' % time_ms
        if extras is None:
            for message_id, payload in zip(ids, payloads, strict=True):
                extend((b64(message_id, newline=False), b'","payload":"', b64(payload, newline=False), tail))
            continue
        for message_id, payload, extra in zip(ids, payloads, extras, strict=True):
            extend((b64(message_id, newline=False), b'","payload":"', b64(payload, newline=False)))
            if extra != NONE:
                extend((b'",', _dumps(_json_extra(*extra))[1:-1], b",", tail[2:]))
            else:
                extend((tail,))
    if len(parts) == 1:
        return b"[]"
    parts[-1] = bytes(parts[-1])[: -len(b',{"id":"')] + b"]"
    return b"".join(parts)


def decode_messages(body: bytes, media: str, *, publish_time: bool) -> list[Message]:
    """Inverse of :func:`encode_messages` (publish time 0 when the response has none)."""
    if media == AVRO:
        return wire.decode_consume_response(body, publish_time, _message)
    if media == AVRO_RECORDS:
        return [
            Message(
                r["id"], r["payload"], r["publishTime"], r["key"], tuple((h["name"], h["value"]) for h in r["headers"])
            )
            for r in wire.decode("RecordsConsumeResponse", body)
        ]
    data = load_json(body, "message array")
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InvalidArgument("expected a JSON array of messages")
    return [
        Message(
            _unb64(r.get("id"), "id"), _unb64(r.get("payload"), "payload"), r.get("publishTime", 0), *_extra_of(r, "")
        )
        if "key" in r or "headers" in r
        else Message(_unb64(r.get("id"), "id"), _unb64(r.get("payload"), "payload"), r.get("publishTime", 0))
        for r in data
    ]


def _message(message_id: bytes, payload: bytes, publish_time: int, _new: Any = object.__new__) -> Message:
    """``Message(message_id, payload, publish_time)``, the same object, made in about half the time: a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, and a client decodes a page of up
    to thousands (``tests/unit/test_gateway_rules.py`` checks the two are equal)."""
    message = _new(Message)
    message.__dict__.update(id=message_id, payload=payload, publish_time=publish_time)
    return message


# -- topics (JSON only, as in CDAP's API) ----------------------------------------------------------


def encode_topic(meta: TopicMetadata) -> bytes:
    """``{"name": ..., "properties": {...}, "generation": n, "ordering": ...}``: CDAP's shape plus the
    generation and its ordering, both managed by tms-hbase and kept out of ``properties`` so that
    ``properties`` are the ones a user set (and the TTL) and a client can PUT back what it got."""
    properties = {k: v for k, v in meta.properties.items() if k not in (GENERATION_KEY, ORDERING_KEY)}
    return _dumps(
        {"name": meta.topic.topic, "properties": properties, "generation": meta.generation, "ordering": meta.ordering}
    )


def decode_topic(namespace: str, body: bytes) -> TopicMetadata:
    data = load_json(body, "topic")
    try:
        properties = {**data["properties"], GENERATION_KEY: str(data["generation"])}
        if "ordering" in data:  # (a gateway older than the ordering leaves it out: a chain topic)
            properties[ORDERING_KEY] = data["ordering"]
        return TopicMetadata(TopicId(namespace, data["name"]), properties)
    except (KeyError, TypeError) as exc:
        raise InvalidArgument(f"bad topic JSON from the gateway: {exc}") from None


def decode_properties(body: bytes) -> dict[str, Any]:
    """The body of create (may be empty) and update: a JSON object of topic properties."""
    if not body.strip():
        return {}
    data = load_json(body, "topic properties")
    if not isinstance(data, dict):
        raise InvalidArgument('topic properties must be a JSON object, e.g. {"ttl": 3600}')
    return data


def encode_properties(properties: Mapping[str, str] | None) -> bytes:
    return _dumps(dict(properties or {}))


def encode_names(topics: Sequence[TopicId]) -> bytes:
    """The list-topics response: CDAP's JSON array of topic names."""
    return _dumps([t.topic for t in topics])


def decode_names(body: bytes) -> list[str]:
    names = load_json(body, "topic list")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise InvalidArgument("expected a JSON array of topic names")
    return names


# -- subscriptions and stats (JSON only) ---------------------------------------------------------


def subscription_path(topic: TopicId, name: str = "", action: str = "") -> str:
    """``.../topics/<t>/subscriptions[/<name>[/<action>]]`` (names are ``[A-Za-z0-9_-]+``)."""
    path = topic_path(topic, "subscriptions")
    return "/".join(part for part in (path, name, action) if part)


def encode_start(start: str | int | bytes) -> bytes:
    """The body of create and reset: ``{"start": "earliest" | "latest" | ms | "<base64 message id>"}``."""
    return _dumps({"start": _b64(start) if isinstance(start, bytes) else start})


@overload
def decode_start(body: bytes, *, ids: Literal[False]) -> str | int: ...
@overload
def decode_start(body: bytes, *, ids: bool) -> str | int | bytes: ...
def decode_start(body: bytes, *, ids: bool) -> str | int | bytes:
    """Inverse of :func:`encode_start` (an empty body: "earliest"); message ids only where ``ids``."""
    if not body.strip():
        return "earliest"
    data = _object(body, "subscription start", required=frozenset({"start"}), optional=frozenset())
    start = data["start"]
    if start in ("earliest", "latest"):
        return start
    if isinstance(start, int) and not isinstance(start, bool):
        _optional_int(data, "start")  # within an Avro long
        return start
    if ids and isinstance(start, str):
        return _unb64(start, "start")
    what = "'earliest', 'latest', a publish time in ms" + (" or a base64 message id" if ids else "")
    raise InvalidArgument(f"bad start {start!r}: expected {what}")


def encode_commit(message_id: bytes | None) -> bytes:
    """The body of a commit: ``{"id": "<base64>"}``, or empty for the last message delivered."""
    return b"" if message_id is None else _dumps({"id": _b64(message_id)})


def decode_commit(body: bytes) -> bytes | None:
    if not body.strip():
        return None
    return _unb64(_object(body, "commit", required=frozenset({"id"}), optional=frozenset())["id"], "id")


def encode_committed(token: str, committed: bytes | None) -> bytes:
    """The answer of opening a consumer session and of a commit: the session (also in the
    ``TMS-Consumer`` header) and the committed mark (base64; null: nothing consumed)."""
    return _dumps({"consumer": token, "committed": None if committed is None else _b64(committed)})


def decode_committed(body: bytes) -> bytes | None:
    data = load_json(body, "commit answer")
    if not isinstance(data, dict):
        raise InvalidArgument("expected a JSON object with the committed mark")
    return _optional_b64(data.get("committed"), "committed")


def encode_subscription(sub: Subscription, lag: Lag | None = None) -> bytes:
    """A subscription as JSON: ``position`` is the committed mark (base64 id; null: nothing consumed),
    ``owner``/``leaseExpires`` the active consumer; with ``lag``, how far it is behind."""
    return _dumps(subscription_fields(sub, lag))


def encode_subscriptions(subs: Sequence[Subscription]) -> bytes:
    """The list of a topic's subscriptions: an array of :func:`encode_subscription` objects."""
    return _dumps([subscription_fields(sub) for sub in subs])


def decode_subscription(topic: TopicId, body: bytes) -> Subscription:
    return _decode_subscription(topic, load_json(body, "subscription"))


def decode_subscriptions(topic: TopicId, body: bytes) -> list[Subscription]:
    data = load_json(body, "subscription list")
    if not isinstance(data, list):
        raise InvalidArgument("expected a JSON array of subscriptions")
    return [_decode_subscription(topic, item) for item in data]


def decode_lag(body: bytes) -> Lag:
    """The ``lag`` of a subscription as :func:`encode_subscription` gives it."""
    return _decode_lag(load_json(body, "subscription").get("lag"))


def subscription_fields(sub: Subscription, lag: Lag | None = None) -> dict[str, Any]:
    """The JSON object of :func:`encode_subscription` before it is encoded."""
    pending = sub.pending
    data = {
        "name": sub.name,
        "generation": sub.generation,
        "position": None if sub.position is None else _b64(sub.position),
        "createdAt": sub.created_at,
        "updatedAt": sub.updated_at,
        "owner": sub.owner,
        "leaseExpires": sub.lease_expires,
        "pending": None
        if pending is None
        else {"tx": pending.tx_id, "writePointer": pending.write_pointer, "position": _b64(pending.position)},
    }
    if sub.shared is not None:
        data["shared"] = _shared(sub.shared)
    return data if lag is None else {**data, "lag": _lag(lag)}


def _shared(s: SharedStats) -> dict[str, Any]:
    """A shared subscription's numbers and settings (docs/shared.md) in camelCase."""
    return {
        "waiting": s.waiting,
        "inFlight": s.in_flight,
        "due": s.due,
        "acknowledged": s.acknowledged,
        "deadLettered": s.dead_lettered,
        "redelivered": s.redelivered,
        "oldestUnackedSeconds": s.oldest_unacked_seconds,
        "consumers": s.consumers,
        "ackTimeout": s.ack_timeout_seconds,
        "maxDeliveries": s.max_deliveries,
        "deadLetter": None if s.dead_letter is None else str(s.dead_letter),
        "lateAcks": s.late_acks,
        "ordering": s.ordering,
        "scheduled": s.scheduled,
        "nextScheduledMs": s.next_scheduled_ms,
    }


def _decode_shared(s: Any) -> SharedStats | None:
    if s is None:
        return None
    return SharedStats(
        s["waiting"],
        s["inFlight"],
        s["due"],
        s["acknowledged"],
        s["deadLettered"],
        s["redelivered"],
        s["oldestUnackedSeconds"],
        s["consumers"],
        s["ackTimeout"],
        s["maxDeliveries"],
        None if s["deadLetter"] is None else as_topic(s["deadLetter"]),
        s.get("lateAcks", 0),
        s.get("ordering"),
        s.get("scheduled", 0),
        s.get("nextScheduledMs"),
    )


def _decode_subscription(topic: TopicId, data: Any) -> Subscription:
    try:
        pending = data["pending"]
        return Subscription(
            topic,
            data["name"],
            _optional_b64(data["position"], "position"),
            data["updatedAt"],
            data["createdAt"],
            data["generation"],
            data["owner"],
            data["leaseExpires"],
            None
            if pending is None
            else Pending(pending["tx"], pending["writePointer"], _unb64(pending["position"], "pending")),
            _decode_shared(data.get("shared")),
        )
    except (KeyError, TypeError, InvalidArgument) as exc:
        raise InvalidArgument(f"bad subscription JSON from the gateway: {exc!r}") from None


def _decode_lag(data: Any) -> Lag:
    try:
        return Lag(data["messages"], data["seconds"], data["exact"], data.get("held", 0))
    except (KeyError, TypeError) as exc:
        raise InvalidArgument(f"bad lag JSON from the gateway: {exc!r}") from None


def encode_stats(stats: TopicStats) -> bytes:
    """``GET .../stats``: the TopicStats fields in camelCase; ``rates`` by window seconds (as strings)."""
    return _dumps(
        {
            "name": stats.topic.topic,
            "generation": stats.generation,
            "ttl": stats.ttl,
            "firstPosition": stats.first_position,
            "firstPublishTime": stats.first_publish_time,
            "lastPosition": stats.last_position,
            "lastPublishTime": stats.last_publish_time,
            "messages": stats.messages,
            "bytes": stats.bytes,
            "rates": {str(window): rate for window, rate in stats.rates.items()},
            "subscriptions": [
                {"name": name, "position": None if mark is None else _b64(mark), "lag": _lag(lag)}
                for name, mark, lag in stats.subscriptions
            ],
            "exact": stats.exact,
            "published": stats.published,
            "bytesExact": stats.bytes_exact,
            "uncommitted": stats.uncommitted,
        }
    )


def decode_stats(topic: TopicId, body: bytes) -> TopicStats:
    data = load_json(body, "topic stats")
    try:
        return TopicStats(
            topic,
            data["generation"],
            data["ttl"],
            data["firstPosition"],
            data["firstPublishTime"],
            data["lastPosition"],
            data["lastPublishTime"],
            data["messages"],
            data["bytes"],
            {int(window): rate for window, rate in data["rates"].items()},
            [
                (s["name"], _optional_b64(s["position"], "position"), _decode_lag(s["lag"]))
                for s in data["subscriptions"]
            ],
            data["exact"],
            data["published"],
            data.get("bytesExact", True),
            data.get("uncommitted", 0),
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise InvalidArgument(f"bad topic stats JSON from the gateway: {exc!r}") from None


def _lag(lag: Lag) -> dict[str, Any]:
    return {"messages": lag.messages, "seconds": lag.seconds, "exact": lag.exact, "held": lag.held}


def _optional_b64(value: object, field: str) -> bytes | None:
    return None if value is None else _unb64(value, field)


# -- helpers -------------------------------------------------------------------------------------

_PUBLISH_REQUIRED = frozenset({"messages"})
_PUBLISH_OPTIONAL = frozenset({"transactionWritePointer"})
_CONSUME_FIELDS = frozenset({"startFrom", "inclusive", "limit", "transaction"})


def _dumps(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def load_json(body: bytes, what: str) -> Any:
    """The JSON document in a body; InvalidArgument (400) for anything that is not JSON, nested too deep included."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"bad JSON in the {what}: {exc}") from None
    except RecursionError:  # arrays or objects nested thousands deep: bad input, not a server error
        raise InvalidArgument(f"bad JSON in the {what}: nested too deeply") from None


def _object(body: bytes, what: str, *, required: frozenset[str] = frozenset(), optional: frozenset[str]) -> dict:
    data = load_json(body, what)
    if not isinstance(data, dict):
        raise InvalidArgument(f"a JSON {what} must be an object")
    problems = []
    if required - data.keys():
        problems.append(f"missing field(s) {sorted(required - data.keys())}")
    if data.keys() - required - optional:
        problems.append(f"unknown field(s) {sorted(data.keys() - required - optional)}")
    if problems:
        raise InvalidArgument(f"{what}: {'; '.join(problems)}")
    return data


LONG = (-(2**63), 2**63 - 1)
"""The range of an Avro ``long`` (the schemas' type for write pointers and times): a JSON integer outside it
is bad input, as it could not be sent as Avro."""
INT = (-(2**31), 2**31 - 1)


def _optional_int(data: dict, field: str, bounds: tuple[int, int] = LONG) -> int | None:
    value = data.get(field)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise InvalidArgument(f"field {field!r} must be an integer or null, not {value!r}")
    if value is not None and not bounds[0] <= value <= bounds[1]:
        raise InvalidArgument(f"field {field!r} is out of range: {value} is not in [{bounds[0]}, {bounds[1]}]")
    return value


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(value: object, field: str) -> bytes:
    if not isinstance(value, str):
        raise InvalidArgument(f"field {field!r} must be a base64 string, not {value!r}")
    try:  # strict: only the standard alphabet, with its padding (as b64decode(validate=True), without its regex)
        return binascii.a2b_base64(value, strict_mode=True)
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"field {field!r} is not base64 (standard alphabet, with padding)") from None


def decode_committed_header(value: str | None) -> bytes:
    """The mark of a ``TMS-Committed`` header (hex); a missing or garbled one is InvalidArgument: a page
    asked for with ``?commit=true`` whose answer does not say the commit was stored (a gateway that does
    not know the parameter ignores it) is not taken as committed."""
    try:
        mark = bytes.fromhex(value or "")
    except ValueError:
        mark = b""
    if not mark:
        raise InvalidArgument(
            f"the gateway's page has no valid {COMMITTED_HEADER} header ({value!r}): it did not say that it stored "
            "the commit asked for with the page (a gateway too old for ?commit=true? commit() works with any)"
        )
    return mark


def encode_published(generation: int, position: int) -> str:
    """The ``TMS-Published`` header of a publish response: the batch row's generation and position."""
    return f"{generation}:{position}"


def decode_published(value: str | None) -> tuple[int, int]:
    """(generation, position) from a ``TMS-Published`` header; a missing or garbled one is InvalidArgument,
    as any answer of the gateway that does not decode."""
    parts = (value or "").split(":")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise InvalidArgument(f"the gateway's publish response has no valid {PUBLISHED_HEADER} header: {value!r}")
    return int(parts[0]), int(parts[1])
