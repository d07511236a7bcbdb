"""The console's Produce form: one message, its payload typed as text, JSON or base64, with an optional key
and headers (text), published as is or in a transaction of its own.

The form's fields are checked here (bad input: InvalidArgument, nothing published); the message itself is
checked by the library as every publish is (key and header limits: :mod:`tms_hbase.model.record`).
"""

from __future__ import annotations

import base64
import binascii
import json

from tms_hbase import MessagingClient, Record, TopicId
from tms_hbase.errors import InvalidArgument
from tms_hbase.model.published import PublishResult
from tms_hbase.tx.client import TransactionClient

ENCODINGS = ("text", "json", "base64")


def record_of(body: dict) -> Record:
    """The message the form describes: ``payload`` (a string) read as ``encoding``, ``key`` (a string or
    null) and ``headers`` ([[name, value], ...], strings)."""
    payload, encoding = body.get("payload"), body.get("encoding", "text")
    if not isinstance(payload, str) or encoding not in ENCODINGS:
        raise InvalidArgument(f'expected "payload": a string, and "encoding": one of {", ".join(ENCODINGS)}')
    if encoding == "json":
        try:
            json.loads(payload)
        except ValueError as exc:
            raise InvalidArgument(f"the payload is not JSON: {exc}") from None
    if encoding == "base64":
        try:
            data = base64.b64decode(payload, validate=True)
        except binascii.Error as exc:
            raise InvalidArgument(f"the payload is not base64: {exc}") from None
    else:
        data = payload.encode()
    key, headers = body.get("key"), body.get("headers", [])
    if key is not None and not isinstance(key, str):
        raise InvalidArgument('expected "key": a string or null')
    if not isinstance(headers, list) or not all(
        isinstance(h, list) and len(h) == 2 and all(isinstance(x, str) for x in h) for h in headers
    ):
        raise InvalidArgument('expected "headers": [["name", "value"], ...] with string names and values')
    return Record(data, key.encode() if key else None, tuple((n, v.encode()) for n, v in headers))


def publish(client: MessagingClient, topic: TopicId, record: Record, *, transactional: bool) -> dict:
    """Publish ``record`` to ``topic``; ``transactional``: in a short transaction of the transaction server
    (``$TMS_TX_SERVER``) committed at once, made invalid if anything fails after it started (its message is
    then never seen by transactional readers)."""
    if not transactional:
        return _published(client.publish(topic, [record]), None)
    with TransactionClient() as tx_client:
        tx = tx_client.start_short()
        try:
            result = client.publish(topic, [record], tx_write_pointer=tx.write_pointer)
            tx_client.can_commit(tx, [])
            tx_client.commit(tx)
        except BaseException:
            tx_client.invalidate(tx.tx_id)
            raise
    return _published(result, tx.write_pointer)


def _published(result: PublishResult, write_pointer: int | None) -> dict:
    return {
        "id": result.message_ids[0].hex(),
        "generation": result.generation,
        "position": result.position,
        "transaction": None if write_pointer is None else str(write_pointer),
    }
