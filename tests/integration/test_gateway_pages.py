"""Gateway consumer pages written straight from the stored rows (``Consumer.poll_rows``, ``rest.encode_rows``)
on the real HBase: page after page, the same messages and the same bytes, in Avro and JSON, with and without
publish times, as the library's consumer of messages delivers and ``rest.encode_messages`` writes (and as
fastavro and ``json.dumps`` write), over inline rows, pointer rows of stored payloads (with a gap in their
sequences), transactional rows and batches of all of them, in pages cut by a message count and by bytes."""

from __future__ import annotations

import base64
import json

import pytest

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import InvalidArgument
from tms_hbase.model import wire
from tms_hbase.rest import codec as rest
from tms_hbase.tx import NO_TX_IN_PROGRESS, Transaction, write_pointer_now

T = TopicId("pages", "mixed")
PAGES = [(1, None), (7, 100), (50, 5000), (3, None), (400, 1_000_000), (2, 1)]  # (messages, bytes) of a page


def _publish_mixed(client: MessagingClient) -> tuple[int, list[bytes], list[bytes]]:
    """Every kind of row; (the read pointer of a transaction, what it sees, what a reader without one sees)."""
    wp = write_pointer_now()
    inline = [b"inline %d " % i * (i % 5) for i in range(40)]
    tx_inline = [b"tx inline %d" % i for i in range(30)]
    stored = [b"stored %d " % i * 20 for i in range(25)]
    later = [b"stored later %d" % i for i in range(10)]
    binary = [b"", bytes(range(256)) * 4, bytes(range(256)) * 4]
    large = [b"x" * 70_000, b"y"]
    client.publish(T, inline)
    client.publish(T, tx_inline, tx_write_pointer=wp - 3)
    client.publish(T, [b"invalid"], tx_write_pointer=wp - 2)  # the transaction below has it as invalid
    client.store(T, stored, wp - 1)
    client.store(T, later, wp - 1, sequence=2**40)  # a gap in the stored payloads' sequences
    client.publish(T, [], tx_write_pointer=wp - 1)  # a pointer row of the stored payloads
    client.publish(T, binary)
    client.publish(T, large)
    client.publish(T, [b"not yet"], tx_write_pointer=wp + 10**6)  # above the read pointer: a tx read stops here
    client.publish(T, [b"after"])
    seen = inline + tx_inline + stored + later + binary + large
    return wp, seen, [*inline, *tx_inline, b"invalid", *stored, *later, *binary, *large, b"not yet", b"after"]


def _reference(messages: list[tuple[bytes, bytes, int]], media: str, publish_time: bool) -> bytes:
    """The page as fastavro or ``json.dumps`` writes it."""
    if media == rest.AVRO:
        if publish_time:
            return wire.encode(
                "TimedConsumeResponse", [{"id": i, "payload": p, "publishTime": t} for i, p, t in messages]
            )
        return wire.encode("ConsumeResponse", [{"id": i, "payload": p} for i, p, _ in messages])
    b64 = base64.b64encode
    page = [{"id": b64(i).decode(), "payload": b64(p).decode(), "publishTime": t} for i, p, t in messages]
    return json.dumps(page, separators=(",", ":")).encode()


@pytest.mark.parametrize("transactional", [False, True])
def test_pages_from_stored_rows_are_the_bytes_of_pages_of_messages(
    client: MessagingClient, transactional: bool
) -> None:
    client.create_topic(T)
    client.create_subscription(T, "rows")
    client.create_subscription(T, "messages")
    wp, seen, everything = _publish_mixed(client)
    tx = Transaction(wp, wp + 1, (wp - 2,), (), NO_TX_IN_PROGRESS) if transactional else None
    options = {"max_wait_seconds": 0.0, "batch": 13, "transaction": tx}
    got: list[bytes] = []
    with (
        client.consumer(T, "rows", rows=True, **options) as rows,
        client.consumer(T, "messages", **options) as messages,
    ):
        for turn in range(200):
            count, limit = PAGES[turn % len(PAGES)]
            slices = rows.poll_rows(count, 0.0, max_bytes=limit)
            page = messages.poll(count, 0.0, max_bytes=limit)
            triples = [(m.id, m.payload, m.publish_time) for m in page]
            assert [
                (i, bytes(p), s.publish_time) for s in slices for i, p in zip(s.ids(), s.payloads, strict=True)
            ] == triples
            assert rows.delivered == messages.delivered
            for media in (rest.AVRO, rest.JSON):
                for publish_time in (False, True):
                    data = rest.encode_rows(slices, media, publish_time=publish_time)
                    assert data == rest.encode_messages(page, media, publish_time=publish_time)
                    assert data == _reference(triples, media, publish_time)
            if not page:
                break
            got += [m.payload for m in page]
    assert got == (seen if transactional else everything)


def test_a_consumer_of_rows_delivers_only_rows_and_one_of_messages_only_messages(client: MessagingClient) -> None:
    client.create_topic(T)
    client.create_subscription(T, "s")
    client.publish(T, [b"a", b"b"])
    with client.consumer(T, "s", rows=True, max_wait_seconds=0.0) as rows:
        with pytest.raises(InvalidArgument, match="consumer of rows: use poll_rows"):
            rows.poll(1, 0.0)
        with pytest.raises(InvalidArgument, match="consumer of rows: use poll_rows"):
            next(iter(rows))
        [part] = rows.poll_rows(5, 0.0)
        assert [bytes(p) for p in part.payloads] == [b"a", b"b"]
        assert rows.delivered == part.last_id
        rows.commit()
    with client.consumer(T, "s", max_wait_seconds=0.0) as messages:
        with pytest.raises(InvalidArgument, match="poll_rows needs a consumer made with rows=True"):
            messages.poll_rows(1, 0.0)
        assert messages.poll(5, 0.0) == []  # the commit of the consumer of rows holds
