"""The transaction server as a real process on the real HBase: Tephra semantics over Thrift,
durable state (SIGKILL and restart), timeouts, fencing, and the state readable without it."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from tms_hbase.errors import InvalidTruncateTime, TmsError, TransactionConflict, TransactionNotInProgress
from tms_hbase.tx import Transaction, TransactionType
from tms_hbase.tx.client import TransactionClient, TransactionServiceUnavailable

from ..tcp_proxy import TcpProxy
from ..tx_server import TMS_ADMIN, TxServer, free_port


@pytest.fixture
def server(tms_env: dict[str, str]) -> Iterator[TxServer]:
    s = TxServer(tms_env, free_port()).start()
    yield s
    s.stop()


def test_commit_makes_writes_visible_to_later_transactions(server: TxServer) -> None:
    with TransactionClient(server.address) as tx:
        assert tx.status() == "OK"
        first = tx.start_short()
        assert first.type is TransactionType.SHORT and first.write_pointer >= time.time_ns() // 10**6 * 10**6 - 10**12
        running = tx.start_short()
        assert first.tx_id in running.in_progress and not running.is_visible(first.write_pointer)
        tx.can_commit(first, [b"row1"])
        tx.commit(first)
        later = tx.start_short()
        assert later.is_visible(first.write_pointer)
        assert not later.is_visible(running.write_pointer)
        assert later.write_pointer > running.write_pointer > first.write_pointer
        tx.abort(running)
        tx.abort(later)
        with pytest.raises(TransactionNotInProgress):
            tx.commit(first)


def test_conflicting_change_sets_one_commits_one_fails(server: TxServer) -> None:
    with TransactionClient(server.address) as tx:
        a, b, c = tx.start_short(), tx.start_short(), tx.start_short()
        tx.can_commit(a, [b"k1", b"\x00k2\xff"])
        tx.commit(a)
        with pytest.raises(TransactionConflict) as info:
            tx.can_commit(b, [b"\x00k2\xff"])
        assert info.value.tx_id == b.tx_id and info.value.conflicting_key == b"\x00k2\xff"
        assert info.value.conflicting_client == "unknown"  # as Tephra says for a committer without a client id
        tx.abort(b)
        tx.can_commit(c, [b"k3"])  # no overlap: fine
        tx.commit(c)
        named, late = tx.start_short(client_id="writer-1"), tx.start_short()
        tx.can_commit(named, [b"k4"])
        tx.commit(named)
        with pytest.raises(TransactionConflict) as info:
            tx.can_commit(late, [b"k4"])
        assert info.value.conflicting_client == "writer-1"  # the committer's client id, as Tephra reports it
        tx.abort(late)


def test_long_abort_and_timeout_become_invalid(server: TxServer) -> None:
    with TransactionClient(server.address) as tx:
        long_tx = tx.start_long()
        tx.abort(long_tx)
        short = tx.start_short(timeout_seconds=1)
        deadline = time.monotonic() + 20
        while short.tx_id not in tx.snapshot().invalid:
            assert time.monotonic() < deadline, "the timed-out transaction never became invalid"
            time.sleep(0.2)
        invalid = set(tx.snapshot().invalid)
        assert {long_tx.tx_id, short.tx_id} <= invalid
        assert not tx.start_short().is_visible(short.write_pointer)
        with pytest.raises(TransactionNotInProgress):
            tx.commit(short)
        blocker = tx.start_short()
        with pytest.raises(InvalidTruncateTime):
            tx.truncate_invalid_before(blocker.tx_id // 10**6 + 1000)
        assert tx.truncate_invalid({long_tx.tx_id})
        assert long_tx.tx_id not in tx.snapshot().invalid and tx.invalid_size() == len(invalid) - 1


@pytest.mark.slow
def test_sigkill_under_load_loses_nothing(tms_env: dict[str, str]) -> None:
    port = free_port()
    server = TxServer(tms_env, port).start()
    committed: list[int] = []
    stop = threading.Event()

    def load() -> None:
        with TransactionClient(server.address, timeout_seconds=2) as tx:
            while not stop.is_set():
                try:
                    t = tx.start_short()
                    tx.can_commit(t, [str(t.tx_id).encode()])
                    tx.commit(t)
                    committed.append(t.write_pointer)
                except (TransactionServiceUnavailable, TransactionNotInProgress):
                    time.sleep(0.05)

    worker = threading.Thread(target=load)
    worker.start()
    with TransactionClient(server.address) as tx:
        open_tx = tx.start_short(timeout_seconds=600)
        long_tx = tx.start_long()
        doomed = tx.start_long()
        tx.abort(doomed)
    deadline = time.monotonic() + 60
    while len(committed) <= 20 and time.monotonic() < deadline:  # under load, not mid-idle
        time.sleep(0.05)
    server.kill()
    acknowledged = list(committed)
    time.sleep(0.5)
    server = TxServer(tms_env, port).start()
    time.sleep(1)
    stop.set()
    worker.join(timeout=30)
    try:
        with TransactionClient(server.address) as tx, TransactionClient(server.address) as other:
            after = tx.start_short()
            seen_by_other = other.start_short()
            assert len(acknowledged) > 20
            assert all(after.is_visible(p) for p in acknowledged), "a committed transaction was lost"
            assert open_tx.tx_id in after.in_progress and long_tx.tx_id in after.in_progress
            assert doomed.tx_id in after.invalids
            assert after.write_pointer > max(committed)
            assert seen_by_other.write_pointer > after.write_pointer  # one pointer sequence for every client
            tx.commit(open_tx)  # still committable after the crash
            assert tx.start_short().is_visible(open_tx.write_pointer)
    finally:
        server.stop()


def test_state_is_readable_from_hbase_without_the_server(tms_env: dict[str, str]) -> None:
    server = TxServer(tms_env, free_port()).start()
    with TransactionClient(server.address) as tx:
        gone = tx.start_long()
        tx.abort(gone)
        live = tx.start_short(timeout_seconds=600)
    server.kill()
    out = subprocess.run(
        [TMS_ADMIN, "tx", "snapshot", "--from-hbase", "--json"], env=tms_env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    state = json.loads(out.stdout)
    assert gone.tx_id in state["invalid"] and str(live.tx_id) in state["in_progress"]
    ids = subprocess.run([TMS_ADMIN, "tx", "invalid", "--from-hbase"], env=tms_env, capture_output=True, text=True)
    assert str(gone.tx_id) in ids.stdout.split()


def test_a_second_server_fences_the_first(tms_env: dict[str, str]) -> None:
    first = TxServer(tms_env, free_port()).start()
    with TransactionClient(first.address) as old:
        before = old.start_short()
    second = TxServer(tms_env, free_port()).start()
    try:
        with TransactionClient(second.address) as tx:
            assert before.tx_id in tx.start_short().in_progress  # took over the state...
        with TransactionClient(first.address, timeout_seconds=2) as old, pytest.raises(TmsError):
            old.start_short()  # ...and the first can no longer acknowledge anything
        assert first.proc is not None and first.proc.wait(timeout=30) == 0
        assert "another transaction server took over" in first.stop()
    finally:
        second.stop()


def serve_and_wait(env: dict[str, str], port: int) -> subprocess.CompletedProcess:
    """Start ``tms-admin tx serve`` on ``port``; it must exit by itself (a server that stays up fails the test)."""
    cmd = [TMS_ADMIN, "tx", "serve", "--port", str(port), "--cleanup-interval", "0.2"]
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired as exc:
        output = (exc.stderr or b"").decode(errors="replace")
        raise AssertionError(f"the server on a port it cannot have stayed up:\n{output}") from None


def assert_still_serves(server: TxServer, tx: TransactionClient, open_tx: Transaction) -> None:
    """The first server answers, and the transaction it had open commits."""
    tx.can_commit(open_tx, [b"k"])
    tx.commit(open_tx)
    assert tx.start_short().is_visible(open_tx.write_pointer)
    assert server.proc is not None and server.proc.poll() is None


def test_a_server_that_cannot_bind_exits_and_the_running_one_keeps_serving(
    server: TxServer, tms_env: dict[str, str]
) -> None:
    with TransactionClient(server.address) as tx, socket.socket() as holder:
        open_tx = tx.start_short(timeout_seconds=300)
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        second = serve_and_wait(tms_env, port)
        assert second.returncode == 1
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"error: cannot listen on 127.0.0.1:{port}: "), lines
        assert "in use" in lines[0] and "nothing was claimed in HBase" in lines[0]
        assert_still_serves(server, tx, open_tx)


def test_a_second_server_on_the_same_port_is_refused(server: TxServer, tms_env: dict[str, str]) -> None:
    with TransactionClient(server.address) as tx:
        open_tx = tx.start_short(timeout_seconds=300)
        second = serve_and_wait(tms_env, server.port)
        assert second.returncode == 1 and f"cannot listen on 127.0.0.1:{server.port}" in second.stderr
        for _ in range(20):  # new connections all reach the first server (none to a second listener)
            with TransactionClient(server.address, timeout_seconds=5) as other:
                assert other.status() == "OK"
        assert_still_serves(server, tx, open_tx)


def test_unreachable_server_is_a_clear_error() -> None:
    deadline = time.monotonic() + 60  # not retried on and on: an error, however busy the machine
    with (
        TransactionClient(f"127.0.0.1:{free_port()}", timeout_seconds=1) as tx,
        pytest.raises(TransactionServiceUnavailable),
    ):
        tx.start_short()
    assert time.monotonic() < deadline


def test_tx_cli_status_and_truncate(server: TxServer, tms_env: dict[str, str]) -> None:
    env = {**tms_env, "TMS_TX_SERVER": server.address}
    with TransactionClient(server.address) as tx:
        gone = tx.start_long()
        tx.abort(gone)
    status = subprocess.run([TMS_ADMIN, "tx", "status", "--json"], env=env, capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["invalid"] == [gone.tx_id]
    human = subprocess.run([TMS_ADMIN, "tx", "status"], env=env, capture_output=True, text=True)
    assert human.stdout.startswith("OK at ") and "1 invalid" in human.stdout
    bad = subprocess.run([TMS_ADMIN, "tx", "truncate"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "exactly one of --ids or --before" in bad.stderr
    done = subprocess.run(
        [TMS_ADMIN, "tx", "truncate", "--ids", str(gone.tx_id), "--json"], env=env, capture_output=True, text=True
    )
    assert json.loads(done.stdout) == {"truncated": True, "invalid_size": 0}
    down = subprocess.run(
        [TMS_ADMIN, "--timeout", "1", "tx", "status", "--tx-server", f"127.0.0.1:{free_port()}"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert down.returncode == 5 and down.stderr.startswith("error: transaction server at")


def test_reads_are_retried_after_a_broken_link_and_transaction_calls_are_not(server: TxServer) -> None:
    proxy = TcpProxy(("127.0.0.1", server.port))
    try:
        with TransactionClient(proxy.address, timeout_seconds=10) as tx:
            assert tx.status() == "OK"
            proxy.cut()  # the client's connection breaks under it
            assert tx.status() == "OK"  # a read: tried again on a new connection
            proxy.cut()
            with pytest.raises(TransactionServiceUnavailable):
                tx.start_short()  # may have started one before the link broke: not repeated blindly
            assert tx.start_short().write_pointer > 0  # the next call reconnects
    finally:
        proxy.close()
