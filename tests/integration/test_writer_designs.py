"""The sequencer prototype of bench/writer_designs.py against the real HBase: a writer that dies
between reserving a position and writing it blocks a reader only until the reader fills the hole,
and the fill and a slow writer race with checkAndPut-if-absent so exactly one of them wins."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import happybase
import pytest

from bench.common import RAW_FAMILY
from bench.writer_designs import Fill, SequencerWriter, check_density, read_dense

PREFIX = b"seq:t:"


@pytest.fixture
def table(hbase_address: str) -> Iterator[tuple[happybase.Connection, str]]:
    host, port = hbase_address.rsplit(":", 1)
    conn = happybase.Connection(host, int(port), timeout=60_000)
    name = f"t{uuid.uuid4().hex[:12]}_designs"
    conn.create_table(name, RAW_FAMILY)
    try:
        yield conn, name
    finally:
        conn.delete_table(name, disable=True)
        conn.close()


def test_a_hole_left_between_reserving_and_writing_is_filled_and_the_slow_writer_goes_elsewhere(
    table: tuple[happybase.Connection, str],
) -> None:
    conn, name = table
    slow, other = SequencerWriter(conn, name, PREFIX), SequencerWriter(conn, name, PREFIX)
    slow_cell = slow.encode([b"slow"])
    reserved = slow.reserve()  # ... and the writer stops here, as if SIGKILLed
    assert other.publish([b"other"]) == reserved + 1

    fill = Fill()
    rows = read_dense(conn, name, PREFIX, hole_wait=0.2, fill=fill)
    assert fill.filled == [reserved]  # the reader did not wait forever: it filled the hole
    assert check_density(rows, [(other.writer_id, 1)]).skips == 1

    assert not slow.write(reserved, slow_cell)  # the fill won the position: the late write is refused
    position = slow.publish([b"slow"])  # so the slow writer reserves again
    assert position == reserved + 2
    found = check_density(read_dense(conn, name, PREFIX), [(other.writer_id, 1), (slow.writer_id, slow.batch_no)])
    assert found.ok and (found.batches, found.skips) == (2, 1)


def test_a_reader_waiting_on_a_hole_reads_the_writer_that_fills_it_in_time(
    table: tuple[happybase.Connection, str],
) -> None:
    conn, name = table
    host, port = conn.host, conn.port
    slow, other = SequencerWriter(conn, name, PREFIX), SequencerWriter(conn, name, PREFIX)
    cell = slow.encode([b"slow"])
    reserved = slow.reserve()
    other.publish([b"other"])
    fill = Fill()

    def write_late() -> None:
        deadline = time.monotonic() + 60
        while not fill.met and time.monotonic() < deadline:  # until the reader waits on the hole
            time.sleep(0.01)
        own = happybase.Connection(host, port, timeout=60_000)  # happybase connections are not thread-safe
        try:
            assert SequencerWriter(own, name, PREFIX).write(reserved, cell)
        finally:
            own.close()

    writer = threading.Thread(target=write_late)
    writer.start()
    reader = happybase.Connection(host, port, timeout=60_000)
    try:
        rows = read_dense(reader, name, PREFIX, hole_wait=60, fill=fill)
    finally:
        writer.join(60)
        reader.close()
    assert fill.met == [reserved] and fill.filled == []  # it waited on the hole, then read the writer's batch
    found = check_density(rows, [(other.writer_id, 1), (slow.writer_id, 1)])
    assert found.ok and (found.batches, found.skips) == (2, 0)
