"""Where committed-only readers get the transaction state (isolation/committed.py), and what they decide when a
source is missing: the state stored in HBase when no server answers, "committed once published" when no
transaction system exists at all, and every transactional row held when the state cannot be known. (The
same with a real server and HBase: tests/integration/test_committed_reads.py.)"""

from __future__ import annotations

import pytest

from tms_hbase.errors import InvalidArgument
from tms_hbase.isolation import committed
from tms_hbase.isolation.committed import CommittedReads
from tms_hbase.model.clock import now_ms
from tms_hbase.model.isolation import check_isolation
from tms_hbase.txserver.state_store import StateStore

from ..memory_storage import MemoryInstallation
from ..tx_server import free_port

# also through the asyncio bridge, in debug mode (tests/unit/conftest.py)
pytestmark = pytest.mark.usefixtures("runner")

POINTER = (now_ms() + 86_400_000) * 1_000_000  # a write pointer no transaction server handed out (a day ahead)


def test_isolation_levels() -> None:
    assert check_isolation("committed") == "committed"
    assert check_isolation("uncommitted") == "uncommitted"
    for bad in ("read_committed", "", None, 1):
        with pytest.raises(InvalidArgument, match="isolation"):
            check_isolation(bad)


def test_without_any_transaction_system_a_published_pointer_counts_as_committed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TMS_TX_SERVER", raising=False)
    reads = CommittedReads(MemoryInstallation().txstate)
    assert reads.is_visible(POINTER) and not reads.is_invalid(POINTER)
    assert "no transaction system" in reads.source


def test_a_server_that_cannot_be_reached_and_no_stored_state_holds_every_transactional_row() -> None:
    reads = CommittedReads(MemoryInstallation().txstate, f"127.0.0.1:{free_port()}", timeout_seconds=1)
    assert not reads.is_visible(POINTER) and not reads.is_invalid(POINTER)  # in progress: held, never delivered
    assert reads.source == "nowhere"


def test_the_state_stored_in_hbase_decides_when_the_server_is_down(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(committed, "REFRESH_SECONDS", 0.0)  # read again at once when a pointer is in progress
    inst = MemoryInstallation()
    store = StateStore(inst.txstate)
    manager = store.recover()
    manager.initialize(now_ms())
    running = manager.start_short(now_ms())
    failed = manager.start_short(now_ms())
    manager.invalidate(failed.tx_id)
    store.append(manager.drain_edits())
    reads = CommittedReads(inst.txstate, f"127.0.0.1:{free_port()}", timeout_seconds=1)
    assert not reads.is_visible(running.write_pointer) and not reads.is_invalid(running.write_pointer)
    assert reads.is_invalid(failed.write_pointer)
    assert reads.source == f"table {inst.txstate.name}"
    manager.can_commit(running.tx_id, [])
    manager.commit(running.tx_id, running.write_pointer)
    store.append(manager.drain_edits())
    assert reads.is_visible(running.write_pointer)  # the committed transaction is delivered now
    assert not reads.is_visible(POINTER)  # above the read pointer: not committed
