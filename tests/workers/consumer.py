"""A consumer process for the consumer crash tests.

Usage: python -m tests.workers.consumer TOPIC SUBSCRIPTION OUT_FILE [options]

Plain mode: consumes one message at a time; appends ``msg PAYLOAD`` to OUT_FILE for each message
handled and ``commit PAYLOAD`` after every ``--commit-every`` messages once the commit returned (both
fsynced, so the file tells exactly what was handled and what was acknowledged as committed).

Transactional mode (``--tx-server``): in each transaction polls up to 3 messages, publishes their
payloads to ``--sink`` with a TransactionalPublisher and commits the mark in the same transaction;
appends ``tx PAYLOAD...`` once the transaction committed. ``--kill-at STEP`` SIGKILLs the process at
that step of its second non-empty transaction: polled, published, mark-persisted,
messages-persisted, tx-committed, folded.

The first line written is ``ready OWNER`` once the lease is held (``--standby`` waits for it).
Ends with exit 0 when a poll finds nothing for ``--idle`` seconds; exit 3 on LeaseLost. ``--delay``
is the time one message takes to handle (plain mode).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from tms_hbase import MessagingClient, TopicId
from tms_hbase.client_tx import TransactionalPublisher
from tms_hbase.errors import LeaseLost
from tms_hbase.tx.client import TransactionClient
from tms_hbase.txaware.context import TransactionContext

STEPS = ("polled", "published", "mark-persisted", "messages-persisted", "tx-committed", "folded")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("topic")
    parser.add_argument("subscription")
    parser.add_argument("out")
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--commit-every", type=int, default=1)
    parser.add_argument("--standby", action="store_true", help="wait for the lease instead of failing")
    parser.add_argument("--idle", type=float, default=2.0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds of 'work' per message (plain mode)")
    parser.add_argument("--tx-server")
    parser.add_argument("--sink")
    parser.add_argument("--kill-at", choices=STEPS)
    args = parser.parse_args()
    topic = TopicId.parse(args.topic)
    with MessagingClient(create_tables=False) as client, open(args.out, "a") as out:

        def note(line: str) -> None:
            out.write(line + "\n")
            out.flush()
            os.fsync(out.fileno())

        tx_client = TransactionClient(args.tx_server) if args.tx_server else None
        try:
            with client.consumer(
                topic,
                args.subscription,
                max_wait_seconds=args.idle,
                lease_seconds=args.lease,
                wait_for_lease=None if args.standby else 0.0,
                transaction=tx_client,
            ) as consumer:
                note(f"ready {consumer.owner}")
                if tx_client is None:
                    consume(consumer, args.commit_every, args.delay, note)
                else:
                    pipeline(client, consumer, tx_client, TopicId.parse(args.sink), args.kill_at, args.idle, note)
        except LeaseLost as exc:
            note(f"leaselost {exc}")
            sys.exit(3)


def consume(consumer, commit_every: int, delay: float, note) -> None:
    last = None
    for handled, message in enumerate(consumer, 1):
        time.sleep(delay)
        last = message.payload.decode()
        note(f"msg {last}")
        if handled % commit_every == 0:
            consumer.commit()
            note(f"commit {last}")
    if last is not None:
        consumer.commit()
        note(f"commit {last}")


def pipeline(client, consumer, tx_client, sink: TopicId, kill_at: str | None, idle: float, note) -> None:
    publisher = TransactionalPublisher(client)
    context = TransactionContext(tx_client, consumer, publisher)
    transactions = 0

    def kill(step: str) -> None:
        if step == kill_at and transactions == 2:
            os.kill(os.getpid(), signal.SIGKILL)

    def after(obj, method: str, step: str) -> None:
        original = getattr(obj, method)

        def wrapped(*args):
            result = original(*args)
            kill(step)
            return result

        setattr(obj, method, wrapped)

    after(consumer, "commit_tx", "mark-persisted")
    after(publisher, "commit_tx", "messages-persisted")
    original_post = consumer.post_tx_commit

    def post_commit() -> None:
        kill("tx-committed")
        original_post()
        kill("folded")

    consumer.post_tx_commit = post_commit
    while True:
        context.start()
        messages = consumer.poll(max_messages=3, timeout_seconds=idle)
        if not messages:
            context.abort()
            return
        transactions += 1
        kill("polled")
        publisher.publish(sink, [m.payload for m in messages])
        kill("published")
        consumer.commit()
        context.finish()
        note("tx " + " ".join(m.payload.decode() for m in messages))


if __name__ == "__main__":
    main()
