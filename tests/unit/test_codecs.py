"""Byte layouts of batch rows, message ids and the Avro wire formats: pure code, no HBase."""

from __future__ import annotations

import pytest

from tms_hbase import CorruptData, InvalidArgument, MessageId, RollbackDetail, TopicId
from tms_hbase.model.rows import (
    TX_OFFSET,
    BatchRow,
    generation_prefix,
    message_key,
    payload_key,
    peek,
    pointer_prefix,
    position_of,
    sequence_of,
    with_tx_pointer,
)
from tms_hbase.model.wire import (
    HANDLE_MAGIC,
    SCHEMAS,
    decode,
    decode_consume_response,
    encode,
    encode_consume_response,
    encode_publish_request,
)

T = TopicId("ns", "t")
WRITER = bytes(range(16))


@pytest.mark.parametrize(
    "row",
    [
        BatchRow(1, WRITER, 7, (b"a", b"", b"\x00" * 300)),
        BatchRow(2**40, WRITER, 1, (b"x",), tx_pointer=99),
        BatchRow(5, WRITER, 2, (), tx_pointer=-99, pointer=True),
        BatchRow(5, WRITER, 3, (b"y",), expires_at=10_000),
        BatchRow(5, WRITER, 4, (), tx_pointer=12, expires_at=9, pointer=True),
    ],
)
def test_batch_rows_round_trip(row: BatchRow) -> None:
    assert BatchRow.decode(row.encode()) == row


def test_write_pointer_sign_flips_in_place() -> None:
    data = BatchRow(5, WRITER, 1, (b"p",), tx_pointer=42, expires_at=77).encode()
    flipped = with_tx_pointer(data, -42)
    assert len(flipped) == len(data) and flipped[:TX_OFFSET] == data[:TX_OFFSET]
    assert BatchRow.decode(flipped) == BatchRow(5, WRITER, 1, (b"p",), tx_pointer=-42, expires_at=77)
    with pytest.raises(CorruptData):
        with_tx_pointer(BatchRow(5, WRITER, 1, (b"p",)).encode(), -1)


@pytest.mark.parametrize(
    "data", [b"", b"\x01", b"\x09" + b"\x00" * 40, b"\x01\x00" + b"\x00" * 32 + b"\x00\x00\x00\x02"]
)
def test_corrupt_rows_are_clear_errors(data: bytes) -> None:
    with pytest.raises(CorruptData):
        BatchRow.decode(data)


def test_keys_sort_by_generation_position_and_sequence() -> None:
    keys = [message_key(T, g, p) for g in (1, 2, 300) for p in (1, 2, 255, 256, 2**40)]
    assert keys == sorted(keys)
    assert all(k.startswith(generation_prefix(T, 1)) for k in keys[:5])
    assert [position_of(k) for k in keys[:5]] == [1, 2, 255, 256, 2**40]
    stored = [payload_key(T, 1, 500, s) for s in (1, 2, 256, 70_000)]
    assert stored == sorted(stored) and all(k.startswith(pointer_prefix(T, 1, 500)) for k in stored)
    assert sequence_of(stored[3]) == 70_000
    assert pointer_prefix(T, 1, 500) < stored[0]  # the counter row sorts before its payloads


def test_message_ids_are_20_bytes_and_sort_in_consumption_order() -> None:
    ids = [MessageId(g, p, i) for g in (1, 2) for p in (1, 2, 300) for i in (0, 1, 1000)]
    raw = [bytes(i) for i in ids]
    assert all(len(r) == 20 for r in raw)
    assert raw == sorted(raw) and [MessageId.decode(r) for r in raw] == ids


@pytest.mark.parametrize("data", [b"", b"x" * 19, b"x" * 21, "text", None, bytes(20)])
def test_corrupt_message_ids_are_invalid_argument(data: object) -> None:
    with pytest.raises(InvalidArgument, match="corrupt message id"):
        MessageId.decode(data)


def test_rollback_handle_round_trip_and_corruption() -> None:
    detail = RollbackDetail("ns:t", 123456789, 3, 10, 10)
    assert RollbackDetail.from_bytes(bytes(detail)) == detail
    handle = bytes(detail)
    for bad in [b"", b"TMRB", handle[:-1], handle + b"\x00", b"XXXX" + handle[4:], "str"]:
        with pytest.raises(InvalidArgument, match="corrupt rollback handle"):
            RollbackDetail.from_bytes(bad)
    for fields in [("ns:t", 0, 1, 1, 1), ("ns:t", 5, 0, 1, 1), ("ns:t", 5, 1, 3, 2)]:
        with pytest.raises(InvalidArgument):
            RollbackDetail.from_bytes(bytes(RollbackDetail(*fields)))


@pytest.mark.parametrize(
    "fields, message",
    [
        (("ns:t", 5, 1, 1, 10**12), "exactly one position"),  # a forged range
        (("ns:t", 5, 1, 2, 1), "exactly one position"),
        (("ns:t", 5, 1, 0, 0), "start position 0"),
        (("ns:t", 5, 1, -4, -4), "start position -4"),
        (("ns:t", 0, 1, 1, 1), "transaction write pointer 0"),
        (("ns:t", -5, 1, 1, 1), "transaction write pointer -5"),
        (("ns:t", 5, 0, 1, 1), "generation 0"),
        (("ns:t", 5, -2, 1, 1), "generation -2"),
    ],
)
def test_forged_rollback_handles_are_refused(fields: tuple, message: str) -> None:
    """Decoded from forged bytes or made directly, a detail no publish returns is InvalidArgument."""
    topic, pointer, generation, start, end = fields
    forged = HANDLE_MAGIC + encode(
        "PublishResponse",
        {
            "topic": topic,
            "transactionWritePointer": pointer,
            "generation": generation,
            "startPosition": start,
            "endPosition": end,
        },
    )
    with pytest.raises(InvalidArgument, match=f"corrupt rollback handle: .*{message}"):
        RollbackDetail.from_bytes(forged)
    with pytest.raises(InvalidArgument, match=f"corrupt rollback handle: .*{message}"):
        RollbackDetail(*fields)


@pytest.mark.parametrize(
    "fields, message",
    [
        (("ns:t", 5, 2**31, 1, 1), "generation 2147483648"),
        (("ns:t", 5, 1, 2**63, 2**63), "start position"),
        (("ns:t", True, 1, 1, 1), "transaction write pointer True"),
        (("ns:t", 5, 1, 1.0, 1.0), "start position 1.0"),
        ((None, 5, 1, 1, 1), "topic None"),
    ],
)
def test_rollback_details_that_no_handle_can_hold_are_refused(fields: tuple, message: str) -> None:
    with pytest.raises(InvalidArgument, match=f"corrupt rollback handle: .*{message}"):
        RollbackDetail(*fields)


@pytest.mark.parametrize(
    "schema, record",
    [
        ("PublishRequest", {"transactionWritePointer": None, "messages": [b"a", b"b"]}),
        ("PublishRequest", {"transactionWritePointer": 77, "messages": []}),
        ("ConsumeRequest", {"startFrom": b"\x00" * 20, "inclusive": False, "limit": 10, "transaction": None}),
        ("ConsumeRequest", {"startFrom": 1_700_000_000_000, "inclusive": True, "limit": None, "transaction": b"t"}),
        ("ConsumeRequest", {"startFrom": None, "inclusive": True, "limit": None, "transaction": None}),
        ("Message", {"id": b"\x01" * 20, "payload": b"hello", "publishTime": 5}),
    ],
)
def test_cdap_schemas_round_trip(schema: str, record: dict) -> None:
    assert decode(schema, encode(schema, record)) == record


def test_schemas_are_cdaps_where_they_fit() -> None:
    assert [f["name"] for f in SCHEMAS["PublishRequest"]["fields"]] == ["transactionWritePointer", "messages"]
    assert [f["name"] for f in SCHEMAS["ConsumeRequest"]["fields"]] == [
        "startFrom",
        "inclusive",
        "limit",
        "transaction",
    ]
    with pytest.raises(InvalidArgument, match="cannot encode"):
        encode("PublishRequest", {"transactionWritePointer": "x", "messages": []})
    with pytest.raises(InvalidArgument, match="corrupt ConsumeRequest"):
        decode("ConsumeRequest", b"\xff\xff\xff")


@pytest.mark.parametrize("pointer", [None, 0, 1, -1, 63, 64, -64, -65, 2**31, 2**63 - 1, -(2**63)])
@pytest.mark.parametrize(
    "messages",
    [[], [b""], [b"x" * n for n in (1, 63, 64, 127, 128, 8191, 8192, 70_000)], [b"same"] * 300],
)
def test_the_hand_written_publish_request_is_the_cdap_schemas_avro(pointer: int | None, messages: list) -> None:
    """Byte for byte what fastavro writes under CDAP's schema, so it decodes the same everywhere."""
    record = {"transactionWritePointer": pointer, "messages": messages}
    data = encode_publish_request(pointer, messages)
    assert data == encode("PublishRequest", record)
    assert decode("PublishRequest", data) == record


@pytest.mark.parametrize("publish_time", [False, True])
@pytest.mark.parametrize(
    "messages",
    [
        [],
        [(b"", b"", 0)],
        [(bytes(20), b"x" * n, t) for n, t in ((1, 1), (63, -1), (64, 2**31), (8192, 2**63 - 1), (70_000, -(2**63)))],
        [(i.to_bytes(20, "big"), b"same", 1_700_000_000_000 + i) for i in range(300)],
        # batches: runs of one publish time, and a time seen before coming back after another
        [(i.to_bytes(20, "big"), b"b", 1_700_000_000_000 + (i // 100) % 2) for i in range(300)],
    ],
)
def test_the_hand_written_consume_response_is_the_cdap_schemas_avro(publish_time: bool, messages: list) -> None:
    """Byte for byte what fastavro writes for a page of messages, with and without publish times."""
    if publish_time:
        schema, records = "TimedConsumeResponse", [{"id": i, "payload": p, "publishTime": t} for i, p, t in messages]
    else:
        schema, records = "ConsumeResponse", [{"id": i, "payload": p} for i, p, _ in messages]
    data = encode_consume_response(_runs(messages), publish_time)
    assert data == encode(schema, records)
    assert decode(schema, data) == records
    expected = messages if publish_time else [(i, p, 0) for i, p, _ in messages]
    assert decode_consume_response(data, publish_time, _triple) == expected


def _triple(message_id: bytes, payload: bytes, time: int) -> tuple[bytes, bytes, int]:
    return message_id, payload, time


def _runs(messages: list) -> list:
    """Each message a run of its own: (ids, payloads, time)."""
    return [((i,), (p,), t) for i, p, t in messages]


@pytest.mark.parametrize("publish_time", [False, True])
def test_a_consume_response_of_runs_with_memoryview_payloads_is_the_same_bytes(publish_time: bool) -> None:
    """Runs of several messages (the slices of stored rows), payloads as views of one stored cell: the same
    bytes as the messages one by one, and what fastavro writes."""
    cell = b"".join(b"payload %d " % i * (i % 4) for i in range(250))
    view, at, messages, runs = memoryview(cell), 0, [], []
    for run in range(5):  # 50 messages a run, each run its own publish time (two runs share one)
        ids, payloads, time = [], [], 1_700_000_000_000 + min(run, 3)
        for i in range(50 * run, 50 * run + 50):
            size = len(b"payload %d " % i * (i % 4))
            ids.append(i.to_bytes(20, "big"))
            payloads.append(view[at : at + size])
            messages.append((ids[-1], cell[at : at + size], time))
            at += size
        runs.append((ids, payloads, time))
    data = encode_consume_response(runs, publish_time)
    assert data == encode_consume_response(_runs(messages), publish_time)
    schema = "TimedConsumeResponse" if publish_time else "ConsumeResponse"
    records = [
        {"id": i, "payload": p, "publishTime": t} if publish_time else {"id": i, "payload": p} for i, p, t in messages
    ]
    assert data == encode(schema, records)


def _long(value: int) -> bytes:
    """An Avro long: a zigzag varint."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(out + bytes([value]))


def _record(message_id: bytes, payload: bytes, time: int | None) -> bytes:
    timed = b"" if time is None else _long(time)
    return _long(len(message_id)) + message_id + _long(len(payload)) + payload + timed


@pytest.mark.parametrize("publish_time", [False, True])
def test_the_consume_response_decoder_reads_arrays_in_blocks_as_any_avro_writer_may_send(publish_time: bool) -> None:
    """Avro lets a writer split an array into blocks, a negative count followed by the block's byte size:
    the hand-written decoder gives what fastavro gives for them, with ids, payloads and times exact."""
    messages = [(b"id-%d" % i, "héllo ✓ %d".encode() * (i % 3), 1_700_000_000_000 + i // 2) for i in range(5)]
    records = [_record(i, p, t if publish_time else None) for i, p, t in messages]
    first = b"".join(records[:2])
    data = _long(-2) + _long(len(first)) + first + _long(3) + b"".join(records[2:]) + b"\x00"
    schema = "TimedConsumeResponse" if publish_time else "ConsumeResponse"
    got = decode_consume_response(data, publish_time, _triple)
    assert got == [(i, p, t if publish_time else 0) for i, p, t in messages]
    assert [(r["id"], r["payload"], r.get("publishTime", 0)) for r in decode(schema, data)] == got


@pytest.mark.parametrize("publish_time", [False, True])
def test_the_consume_response_decoder_refuses_every_truncation_and_trailing_bytes(publish_time: bool) -> None:
    messages = [(bytes(20), b"x" * 300, 2**40), (b"\x01" * 20, b"", -5), (b"", b"y" * 70_000, 2**63 - 1)]
    data = encode_consume_response(_runs(messages), publish_time)
    for cut in [*range(400), *range(400, len(data), 97), len(data) - 70_001, len(data) - 1]:
        with pytest.raises(InvalidArgument, match=r"corrupt .*ConsumeResponse: the data ends inside a value"):
            decode_consume_response(data[:cut], publish_time, _triple)
    with pytest.raises(InvalidArgument, match="1 trailing bytes"):
        decode_consume_response(data + b"\x00", publish_time, _triple)


@pytest.mark.parametrize(
    "data",
    [
        _long(1) + _long(-1) + b"\x00",  # an id of negative length
        _long(1) + _long(1) + b"i" + _long(-3) + b"\x00",  # a payload of negative length
        _long(1) + b"\xff" * 11 + b"\x00",  # a length of more than ten bytes
        _long(2**62) + _record(b"i", b"p", 1),  # a count far past the data
        b"\xff\xff",
    ],
)
def test_the_consume_response_decoder_refuses_corrupt_data_with_invalid_argument(data: bytes) -> None:
    for publish_time in (False, True):
        with pytest.raises(InvalidArgument, match="corrupt"):
            decode_consume_response(data, publish_time, _triple)


def test_the_consume_response_decoder_agrees_with_fastavro_on_corrupted_pages() -> None:
    """Pages with one byte changed: whatever fastavro decodes, the decoder decodes the same; whatever
    fastavro refuses, it refuses with InvalidArgument (never another exception)."""
    import random

    rng = random.Random(7)
    messages = [
        (rng.randbytes(12), rng.randbytes(rng.choice((0, 5, 200))), 1_700_000_000_000 + i // 3) for i in range(9)
    ]
    for publish_time in (False, True):
        schema = "TimedConsumeResponse" if publish_time else "ConsumeResponse"
        data = encode_consume_response(_runs(messages), publish_time)
        for _ in range(1500):
            spot = rng.randrange(len(data))
            changed = data[:spot] + bytes([rng.randrange(256)]) + data[spot + 1 :]
            try:
                expected = [(r["id"], r["payload"], r.get("publishTime", 0)) for r in decode(schema, changed)]
            except InvalidArgument:
                with pytest.raises(InvalidArgument):
                    decode_consume_response(changed, publish_time, _triple)
            else:
                assert decode_consume_response(changed, publish_time, _triple) == expected


@pytest.mark.parametrize("publish_time", [False, True])
def test_the_consume_response_decoder_reads_runs_of_one_stride_that_break_anywhere(publish_time: bool) -> None:
    """Messages that repeat the headers of the one before are cut out of the page by position: a run that
    breaks at any message (another id or payload length, another publish time, a block's end) decodes
    as fastavro decodes it, and so does any page of such runs with one byte changed."""
    import random

    schema = "TimedConsumeResponse" if publish_time else "ConsumeResponse"
    base = [(i.to_bytes(20, "big"), bytes([i]) * 100, 1_700_000_000_000) for i in range(30)]
    changes = [
        lambda m: (m[0][:19], m[1], m[2]),
        lambda m: (m[0], m[1] + b"+", m[2]),
        lambda m: (m[0], m[1][:-1], m[2]),
        lambda m: (m[0], m[1], m[2] + 1),
        lambda m: (m[0], b"x" * 300, m[2] - 2**40),
    ]
    pages = [encode_consume_response(_runs(base), publish_time)]
    for at in range(30):
        for change in changes:
            messages = [*base[:at], *(change(m) for m in base[at:])]
            pages.append(encode_consume_response(_runs(messages), publish_time))
    records = [_record(i, p, t if publish_time else None) for i, p, t in base]
    for split in (1, 2, 17, 29):  # two blocks, the first with its byte size
        first = b"".join(records[:split])
        pages.append(
            _long(-split) + _long(len(first)) + first + _long(30 - split) + b"".join(records[split:]) + b"\x00"
        )
    rng = random.Random(11)
    for page in pages[:: len(pages) // 6]:  # some of them, each with one byte changed in many ways
        for _ in range(400):
            spot = rng.randrange(len(page))
            pages.append(page[:spot] + bytes([rng.randrange(256)]) + page[spot + 1 :])
    for page in pages:
        try:
            expected = [(r["id"], r["payload"], r.get("publishTime", 0)) for r in decode(schema, page)]
        except InvalidArgument:
            with pytest.raises(InvalidArgument):
                decode_consume_response(page, publish_time, _triple)
        else:
            assert decode_consume_response(page, publish_time, _triple) == expected


def test_the_hand_written_publish_request_takes_bytes_like_and_refuses_the_rest() -> None:
    data = encode_publish_request(5, [bytearray(b"ab"), memoryview(b"cd"), b"ef"])
    assert decode("PublishRequest", data) == {"transactionWritePointer": 5, "messages": [b"ab", b"cd", b"ef"]}
    for pointer in ("x", True, 2**63, -(2**63) - 1, 1.0):
        with pytest.raises(InvalidArgument, match="cannot encode PublishRequest: transactionWritePointer"):
            encode_publish_request(pointer, [b"a"])  # type: ignore[arg-type]
    for message in ("text", 7, None):
        with pytest.raises(InvalidArgument, match="cannot encode PublishRequest: message 1 is not bytes"):
            encode_publish_request(None, [b"a", message])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "row",
    [
        BatchRow(7, WRITER, 1, (b"a",)),
        BatchRow(7, WRITER, 1, (), tx_pointer=-4, pointer=True),
        BatchRow(7, WRITER, 1, (), tx_pointer=9, expires_at=3),
        BatchRow(7, WRITER, 1, (b"", b"x"), expires_at=11),
    ],
)
def test_peek_reads_the_header_as_decode_does(row: BatchRow) -> None:
    header = peek(row.encode())
    assert (header.publish_time, header.tx_pointer, header.expires_at) == (7, row.tx_pointer, row.expires_at)
    assert header.has_payloads == bool(row.payloads)
