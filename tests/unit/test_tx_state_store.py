"""The transaction server's edit log (txserver/state_store.py) when an append fails but HBase writes it later, as the
gateway's own client does while a region server crashes under it: that row is this server's, not a newer
server's, so it is read back instead of the server stopping as fenced; a row of another server still fences."""

from __future__ import annotations

import pytest

from tms_hbase.errors import Fenced, HBaseUnavailable
from tms_hbase.txserver.state_store import StateStore

from ..memory_storage import MemoryInstallation

NOW = 1_800_000_000_000


def _late(writes: list[tuple[bytes, bytes, bytes]]):
    """A fault for compare_and_set: no answer now, the write kept for the test to land later."""

    def fault(key: bytes, column: bytes, expected: bytes | None, value: bytes) -> None:
        writes.append((key, column, value))
        raise HBaseUnavailable("no answer within the timeout")

    return fault


def test_an_append_that_landed_after_the_log_was_read_again_is_read_back_not_fenced() -> None:
    inst = MemoryInstallation()
    store = StateStore(inst.txstate)
    manager = store.recover()
    manager.initialize(NOW)
    store.append(manager.drain_edits())
    writes: list[tuple[bytes, bytes, bytes]] = []
    inst.txstate.inject("compare_and_set", _late(writes))
    unsure = manager.start_long(NOW)
    with pytest.raises(HBaseUnavailable):
        store.append(manager.drain_edits())
    manager = store.recover()  # the server reads the log again before its next operation: the row is not there
    inst.txstate.put_if_absent(*writes[0])  # ... and then the gateway's retry writes it
    manager.start_long(NOW)
    with pytest.raises(HBaseUnavailable):  # not Fenced: the server goes on
        store.append(manager.drain_edits())
    manager = store.recover()
    assert unsure.tx_id in manager.snapshot(NOW).in_progress  # the late row is part of the state now
    after = manager.start_long(NOW)
    store.append(manager.drain_edits())
    assert after.tx_id in store.recover().snapshot(NOW).in_progress


def test_a_row_another_server_wrote_fences_even_after_a_failed_append() -> None:
    inst = MemoryInstallation()
    old, new = StateStore(inst.txstate), StateStore(inst.txstate)
    manager = old.recover()
    manager.initialize(NOW)
    old.append(manager.drain_edits())
    newer = new.recover()  # a second server starts on the same tables
    inst.txstate.inject("compare_and_set", lambda *args: (_ for _ in ()).throw(HBaseUnavailable("no answer")))
    manager.start_long(NOW)
    with pytest.raises(HBaseUnavailable):  # never written
        old.append(manager.drain_edits())
    manager = old.recover()  # the row is not there: the old server aims at it again
    newer.start_long(NOW + 5)
    new.append(newer.drain_edits())  # the newer server writes that row first
    manager.start_long(NOW + 10)
    with pytest.raises(Fenced):
        old.append(manager.drain_edits())
