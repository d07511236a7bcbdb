"""A consumer process of a shared subscription whose handler writes a table row and publishes one message
per delivery, and acknowledges it, all in one Tephra transaction: the exactly-once crash tests.

Usage: python -m tests.workers.shared_tx_consumer TOPIC SUBSCRIPTION SINK TABLE [--crash STEP --after N]

Each transaction handles one delivery: ``TABLE`` row = payload gets ``d:v`` = the owner, ``SINK`` gets
the payload, the delivery is acknowledged. ``--crash STEP`` ends the process with ``os._exit`` (as a
SIGKILL would, nothing cleaned up) in the transaction of the ``N``-th delivery (from 1), at STEP:

    handled      the handler wrote and published (buffered), the ack was made; nothing persisted
    acked        the acknowledgement is persisted as pending; the table and the publish not yet
    persisted    every participant persisted; the transaction not committed
    committed    the transaction committed; the acknowledgement not folded yet

Transactions time out after 3 s, so a crashed one becomes invalid soon. Ends with exit 0 once a receive
finds nothing for ``--idle`` seconds.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Collection

from tms_hbase import MessagingClient, TopicId
from tms_hbase.client_tx import TransactionalPublisher
from tms_hbase.model.transaction import Transaction
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext
from tms_hbase.txaware.table import TransactionalTable


class Crash:
    """A participant that ends the process at one step of the commit."""

    def __init__(self, step: str, persist_last: bool) -> None:
        self.step, self.persist_last, self.armed = step, persist_last, False
        self.transaction_aware_name = f"crash at {step}"

    def start_tx(self, tx: Transaction) -> None: ...

    def update_tx(self, tx: Transaction) -> None: ...

    def get_tx_changes(self) -> Collection[bytes]:
        return []

    def commit_tx(self) -> bool:
        if self.armed and self.step in ("acked", "persisted"):
            os._exit(9)
        return True

    def post_tx_commit(self) -> None:
        if self.armed and self.step == "committed":
            os._exit(9)

    def rollback_tx(self) -> bool:
        return True


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("topic")
    parser.add_argument("subscription")
    parser.add_argument("sink")
    parser.add_argument("table")
    parser.add_argument("--crash", choices=["handled", "acked", "persisted", "committed"])
    parser.add_argument("--after", type=int, default=1)
    parser.add_argument("--idle", type=float, default=3.0)
    args = parser.parse_args()
    sink = TopicId.parse(args.sink)
    with (
        MessagingClient(create_tables=False) as client,
        TransactionClient() as tx_client,
        client.shared_consumer(TopicId.parse(args.topic), args.subscription, poll_interval_seconds=0.1) as consumer,
    ):
        table = TransactionalTable(client.installation.table(args.table))
        publisher = TransactionalPublisher(client)
        crash = Crash(args.crash or "", persist_last=args.crash == "persisted")
        # persist order: the consumer's acks, then (for "acked") the crash, then the table, the publisher
        # last (and for "persisted" the crash after it); post-commit: the crash first for "committed"
        if args.crash == "committed":
            participants = [crash, consumer, table, publisher]
        elif args.crash == "acked":
            participants = [consumer, crash, table, publisher]
        else:
            participants = [consumer, table, publisher, crash]
        context = TransactionContext(tx_client, *participants)
        handled = 0
        while True:
            got = consumer.receive(1, args.idle)
            if not got:
                return
            (delivery,) = got
            handled += 1
            crash.armed = handled == args.after
            with context.transaction(timeout_seconds=3):
                table.put(delivery.payload, b"d:v", consumer.owner.encode())
                publisher.publish(sink, [delivery.payload])
                consumer.ack(delivery)
                if crash.armed and args.crash == "handled":
                    os._exit(9)


if __name__ == "__main__":
    main()
