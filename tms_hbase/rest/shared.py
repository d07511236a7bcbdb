"""The REST API of shared subscriptions (docs/gateway.md, "Shared subscriptions"), as both ends speak it:
the bodies of fetching deliveries and settling them, in Avro binary and JSON, and the JSON of a shared
subscription's settings, numbers and in-flight messages.

Used by the gateway (``gateway/shared.py``) and its Python client (:mod:`tms_hbase.gateway_client.http_shared`), so the
two cannot drift apart. JSON follows :mod:`tms_hbase.rest.codec`: the Avro schemas' field names, ``bytes`` as
base64 strings, unknown fields refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tms_hbase.errors import InvalidArgument
from tms_hbase.model import wire
from tms_hbase.model.message import Delivery, DeliveryRef
from tms_hbase.model.subscription import PendingMessage
from tms_hbase.model.topic import as_topic
from tms_hbase.rest.codec import (
    AVRO,
    AVRO_RECORDS,
    AVROS,
    _b64,
    _dumps,
    _extra_of,
    _json_extra,
    _object,
    _unb64,
    decode_start,
    load_json,
)

CREATE_OPTIONS = {  # JSON field of a create body -> MessagingClient.create_subscription keyword
    "ackTimeout": "ack_timeout_seconds",
    "maxDeliveries": "max_deliveries",
    "deadLetter": "dead_letter",
    "claimSize": "claim_size",
    "ordering": "ordering",
}


# -- creating --------------------------------------------------------------------------------------


def encode_create(start: str | int, shared: bool, options: dict[str, Any]) -> bytes:
    """The body of ``PUT .../subscriptions/<s>``: ``{"start": ..., "shared": true, "ackTimeout": ...}``
    (``options`` by their library names; a dead-letter topic as ``"ns:topic"``)."""
    data: dict[str, Any] = {"start": start}
    if shared:
        data["shared"] = True
    by_name = {library: field for field, library in CREATE_OPTIONS.items()}
    for name, value in options.items():
        if value is not None:
            data[by_name[name]] = str(value) if name == "dead_letter" else value
    return _dumps(data)


@dataclass(frozen=True)
class CreateRequest:
    """A create body: where to start, whether shared, and the shared options by their library names."""

    start: str | int
    shared: bool
    options: dict[str, Any]


def decode_create(body: bytes) -> CreateRequest:
    """Inverse of :func:`encode_create` (an empty body: an exclusive subscription from the earliest
    message). The options' values are checked by the library (InvalidArgument)."""
    if not body.strip():
        return CreateRequest("earliest", False, {})
    data = _object(body, "subscription", optional=frozenset({"start", "shared", *CREATE_OPTIONS}))
    start = decode_start(_dumps({"start": data.get("start", "earliest")}), ids=False)
    shared = data.get("shared", False)
    if not isinstance(shared, bool):
        raise InvalidArgument(f"field 'shared' must be true or false, not {shared!r}")
    options = {library: data[field] for field, library in CREATE_OPTIONS.items() if field in data}
    if options and not shared:
        raise InvalidArgument(f'fields {sorted(k for k in CREATE_OPTIONS if k in data)} need "shared": true')
    if "dead_letter" in options:
        target = options["dead_letter"]
        if not isinstance(target, str):
            raise InvalidArgument(f"field 'deadLetter' must be a topic as \"namespace:topic\", not {target!r}")
        options["dead_letter"] = as_topic(target)
    return CreateRequest(start, shared, options)


# -- deliveries ----------------------------------------------------------------------------------


def encode_deliveries(deliveries: Sequence[Delivery], media: str) -> bytes:
    """A batch of deliveries: ``[{"id", "payload", "publishTime", "deliveries", "deadline"}]``, plus ``"key"``
    and ``"headers"`` in JSON for a message that has any, and always in :data:`AVRO_RECORDS`."""
    if media == AVRO:
        return wire.encode("Deliveries", [_delivery(d) for d in deliveries])
    if media == AVRO_RECORDS:
        return wire.encode(
            "RecordsDeliveries",
            [
                {
                    **_delivery(d),
                    "key": d.key,
                    "headers": [{"name": n, "value": v} for n, v in d.headers],
                }
                for d in deliveries
            ],
        )
    return _dumps([_json_delivery(d) for d in deliveries])


def _json_delivery(d: Delivery) -> dict[str, Any]:
    json = {**_delivery(d), "id": _b64(d.id), "payload": _b64(d.payload)}
    return json if d.key is None and not d.headers else {**json, **_json_extra(d.key, d.headers)}


def decode_deliveries(body: bytes, media: str) -> list[Delivery]:
    if media == AVRO:
        records = wire.decode("Deliveries", body)
    elif media == AVRO_RECORDS:
        records = [
            {**r, "headers": tuple((h["name"], h["value"]) for h in r["headers"])}
            for r in wire.decode("RecordsDeliveries", body)
        ]
    else:
        records = load_json(body, "delivery array")
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise InvalidArgument("expected a JSON array of deliveries")
        records = [
            {
                **r,
                "id": _unb64(r.get("id"), "id"),
                "payload": _unb64(r.get("payload"), "payload"),
                **dict(zip(("key", "headers"), _extra_of(r, "delivery"), strict=True)),
            }
            for r in records
        ]
    try:
        return [
            Delivery(
                r["id"],
                r["payload"],
                r["publishTime"],
                r["deliveries"],
                r["deadline"],
                r.get("key"),
                r.get("headers", ()),
                r.get("incarnation", 0),
            )
            for r in records
        ]
    except (KeyError, TypeError) as exc:
        raise InvalidArgument(f"bad delivery from the gateway: {exc!r}") from None


def _delivery(d: Delivery) -> dict[str, Any]:
    return {
        "id": d.id,
        "payload": d.payload,
        "publishTime": d.publish_time,
        "deliveries": d.deliveries,
        "deadline": d.deadline,
        "incarnation": d.incarnation,
    }


# -- settling ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SettleRequest:
    """The body of ack, nack, release and extend: the deliveries (message ids and, where known, the
    deliveries' incarnations; 0: not known) and, for a nack its delay and for an extension its hold time,
    ``seconds`` (None: none, or the subscription's ack timeout)."""

    refs: list[DeliveryRef]
    seconds: float | None = None


def encode_settle(request: SettleRequest, media: str) -> bytes:
    """``incarnations`` is left out when none is known (a body as written before deliveries were named)."""
    ids, incarnations = [r.id for r in request.refs], [r.incarnation for r in request.refs]
    if not any(incarnations):
        incarnations = []
    if media in AVROS:
        return wire.encode("SettleRequest", {"ids": ids, "seconds": request.seconds, "incarnations": incarnations})
    data: dict[str, Any] = {"ids": [_b64(i) for i in ids], "seconds": request.seconds}
    return _dumps({**data, "incarnations": incarnations} if incarnations else data)


def decode_settle(body: bytes, media: str) -> SettleRequest:
    """A settle body; InvalidArgument for no ids or seconds that are not a finite number >= 0."""
    if media in AVROS:
        try:
            record = wire.decode("SettleRequest", body)
        except InvalidArgument:  # one without incarnations (the two never both decode completely)
            record = {**wire.decode("UnfencedSettleRequest", body), "incarnations": []}
        ids, seconds, incarnations = record["ids"], record["seconds"], record["incarnations"]
    else:
        data = _object(
            body, "settle request", required=frozenset({"ids"}), optional=frozenset({"seconds", "incarnations"})
        )
        if not isinstance(data["ids"], list):
            raise InvalidArgument("field 'ids' must be an array of base64 message ids")
        ids = [_unb64(v, f"ids[{i}]") for i, v in enumerate(data["ids"])]
        seconds = data.get("seconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))):
            raise InvalidArgument(f"field 'seconds' must be a number or null, not {seconds!r}")
        incarnations = data.get("incarnations") or []
        if not isinstance(incarnations, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in incarnations
        ):
            raise InvalidArgument("field 'incarnations' must be an array of the deliveries' incarnations (integers)")
    if not ids:
        raise InvalidArgument("nothing to settle: give one or more message ids")
    if incarnations and len(incarnations) != len(ids):
        raise InvalidArgument(
            f"{len(incarnations)} incarnations for {len(ids)} ids: give one per id (0: not known), or none"
        )
    if seconds is not None and not (math.isfinite(seconds) and seconds >= 0):
        raise InvalidArgument(f"bad seconds {seconds!r}: expected a finite number >= 0")
    refs = [DeliveryRef(i, n) for i, n in zip(ids, incarnations or [0] * len(ids), strict=True)]
    return SettleRequest(refs, None if seconds is None else float(seconds))


def encode_deadlines(deadlines: Sequence[int], media: str) -> bytes:
    """The answer of an extension: each message's new deadline (HBase ms), in the order asked."""
    return wire.encode("Deadlines", list(deadlines)) if media in AVROS else _dumps(list(deadlines))


def decode_deadlines(body: bytes, media: str) -> list[int]:
    data = wire.decode("Deadlines", body) if media in AVROS else load_json(body, "deadlines")
    if not isinstance(data, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in data):
        raise InvalidArgument("expected an array of deadlines (ms)")
    return data


# -- in-flight messages (JSON) --------------------------------------------------------------------


def encode_pending(pending: Sequence[PendingMessage]) -> bytes:
    """``GET .../pending``: ``[{"id", "owner", "deadline", "deliveries", "publishTime", "state"}]``."""
    return _dumps(
        [
            {
                "id": _b64(p.id),
                "owner": p.owner,
                "deadline": p.deadline,
                "deliveries": p.deliveries,
                "publishTime": p.publish_time,
                "state": p.state,
            }
            for p in pending
        ]
    )


def decode_pending(body: bytes) -> list[PendingMessage]:
    data = load_json(body, "pending list")
    try:
        return [
            PendingMessage(
                _unb64(p["id"], "id"), p["owner"], p["deadline"], p["deliveries"], p["publishTime"], p["state"]
            )
            for p in data
        ]
    except (KeyError, TypeError) as exc:
        raise InvalidArgument(f"bad pending JSON from the gateway: {exc!r}") from None
