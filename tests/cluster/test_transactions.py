"""Transactional publishing and the transaction server's state in HBase across a region-server crash: a
transaction server (``tms-admin tx serve``) keeps its edit log in ``<prefix>_txstate`` on the cluster while a
thread commits and aborts transactions that publish; the region server holding the edit log's region (the
server's every operation writes there) is SIGKILLed. Transactions commit again within RESUME_BOUND seconds;
afterwards a new server, recovering the state from HBase, shows every committed transaction visible, the one
left open still in progress and its message invisible, and no aborted transaction's message to any
transactional reader. (The faults and kill tests crash the topic's region server under plain publishing.)
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from bench.cluster import longest_pause
from tms_hbase import MessagingClient, TopicId
from tms_hbase.client_tx import TransactionalPublisher
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV
from tms_hbase.errors import TmsError
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext
from tms_hbase_launcher.cluster import ClusterHBase

from ..tx_server import TxServer, free_port
from .workload import RESUME_BOUND, STEADY

TOPIC = TopicId("cluster", "tx")
OPEN = TopicId("cluster", "tx-open")  # the message of the transaction left open: nothing else goes there


@dataclass
class Outcomes:
    """What the transactional writer was told, payload by payload."""

    committed: list[bytes] = field(default_factory=list)
    pointers: list[int] = field(default_factory=list)  # the committed transactions' write pointers
    aborted: list[bytes] = field(default_factory=list)
    unknown: list[bytes] = field(default_factory=list)  # a call failed: committed or not
    commit_times: list[float] = field(default_factory=list)  # time.time() when each commit returned


def _transact(env: dict[str, str], server: str, out: Outcomes, stop: threading.Event) -> None:
    """Two transactions in three commit, the third is persisted and then aborted (its message rolled back)."""
    with (
        MessagingClient(env[THRIFT_ENV], env[PREFIX_ENV], create_tables=False) as client,
        TransactionClient(server, timeout_seconds=30) as tx,
    ):
        n = 0
        while not stop.is_set():
            n += 1
            commit = n % 3 != 0
            payload = f"{'c' if commit else 'a'}{n}".encode()
            publisher = TransactionalPublisher(client)
            context = TransactionContext(tx, publisher)
            try:
                pointer = context.start().write_pointer
                publisher.publish(TOPIC, [payload])
                if commit:
                    context.finish()
                    out.committed.append(payload)
                    out.pointers.append(pointer)
                    out.commit_times.append(time.time())
                else:
                    assert publisher.commit_tx()  # stored, as if a later participant then failed
                    context.abort()
                    out.aborted.append(payload)
            except TmsError:
                out.unknown.append(payload)
                time.sleep(0.2)


def test_transactions_across_a_region_server_crash(
    cluster: ClusterHBase, client: MessagingClient, tms_env: dict[str, str], prefix: str
) -> None:
    client.create_topic(TOPIC)
    client.create_topic(OPEN)
    server = TxServer(tms_env, free_port()).start()
    out, stop = Outcomes(), threading.Event()
    writer = threading.Thread(target=_transact, args=(tms_env, server.address, out, stop))
    try:
        with TransactionClient(server.address) as tx:
            publisher = TransactionalPublisher(client)
            context = TransactionContext(tx, publisher)
            left_open = context.start(timeout_seconds=3600)
            publisher.publish(OPEN, [b"open"])
            assert publisher.commit_tx()  # stored under its write pointer, never committed
        writer.start()
        deadline = time.monotonic() + 60
        while not out.commit_times or out.commit_times[-1] < time.time() - 2:  # committing right now
            assert time.monotonic() < deadline, "no transaction commits"
            time.sleep(0.2)
        victim = cluster.server_of_last_region(f"{prefix}_txstate")
        began = time.time()
        cluster.kill(victim)
        ended = time.time()
        deadline = time.monotonic() + RESUME_BOUND + STEADY
        while out.commit_times[-1] <= ended + STEADY:  # committing again, for a while
            assert time.monotonic() < deadline, f"no commits within {RESUME_BOUND:.0f}s of killing {victim}"
            assert writer.is_alive()
            time.sleep(0.5)
        stalled = longest_pause(out.commit_times, began)
        print(f"killed {victim}: no commit for {stalled:.1f}s", flush=True)
        assert stalled < RESUME_BOUND
        cluster.start_process(victim, timeout=300)
        stop.set()
        writer.join(timeout=120)
        assert not writer.is_alive()
        server.kill()  # the next server knows only what the edit log in HBase says
        print(server.stop()[-4000:])  # the killed server's log
        server = TxServer(tms_env, server.port).start()
        with TransactionClient(server.address) as tx:
            # A transaction whose commit the writer never heard back from (out.unknown) stays in progress until
            # the server times it out, and a transactional reader stops at the first one in progress: wait for
            # that, as every transactional reader must, before asking for every committed message.
            deadline = time.monotonic() + 180
            while set((reader := tx.start_short()).in_progress) - {left_open.tx_id, reader.tx_id}:
                tx.abort(reader)
                assert time.monotonic() < deadline, f"still in progress: {reader.in_progress}"
                time.sleep(1)
            assert left_open.tx_id in reader.in_progress, "the open transaction was lost"
            assert list(client.fetch(OPEN, transaction=reader)) == []
            seen = [m.payload for m in client.fetch(TOPIC, transaction=reader)]
            assert len(seen) == len(set(seen)), "a message twice"
            assert set(out.committed) <= set(seen), "a committed transaction's message is missing"
            assert not set(out.aborted) & set(seen), "an aborted transaction's message is visible"
            assert set(seen) <= set(out.committed) | set(out.unknown)
            assert all(reader.is_visible(p) for p in out.pointers), "a committed transaction is not visible"
            tx.commit(left_open)  # still committable after the crash and the new server
            assert [m.payload for m in client.fetch(OPEN, transaction=tx.start_short())] == [b"open"]
        print(
            f"{len(out.committed)} committed, {len(out.aborted)} aborted, {len(out.unknown)} unknown, {len(seen)} seen"
        )
        assert len(out.committed) > 20 and out.aborted
    finally:
        stop.set()
        if writer.ident:
            writer.join(timeout=120)
        print(server.stop()[-4000:])  # its log, for a failure
