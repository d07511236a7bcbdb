"""A consumer process of a shared subscription, for the work-queue crash tests.

Usage: python -m tests.workers.shared_consumer TOPIC SUBSCRIPTION OUT_FILE [options]

Appends one fsynced line per event to OUT_FILE, so the file tells exactly what this process saw; each
line ends with the host's monotonic clock in µs (one clock for every process of the host) when it was noted:

    ready OWNER
    got PAYLOAD DELIVERIES DEADLINE AT T   (AT: HBase's clock when receive returned, ms)
    acking PAYLOAD T                       (before the ack call)
    acked PAYLOAD T                        (the ack returned)
    late PAYLOAD T                         (the ack was refused: NotHeld)
    nacked PAYLOAD T                       (a poison message given back)

``--poison P`` nacks every delivery of payload P instead of acknowledging it; ``--delay`` is the work
per message in seconds. Ends with exit 0 once a receive finds nothing for ``--idle`` seconds. With
``--count`` it notes nothing per message and, at the end, writes ``done N`` (the messages it acknowledged).
``--die-at STEP`` SIGKILLs the process at a step of clearing the ranges its first raise of the floor
passed, after noting ``dying STEP``: ``raised`` just after the raise landed (nothing counted yet),
``counted`` just before it deletes their rows (their claims counted). Or at a step of counting a settled
scheduled message the floor passed: ``schedule-acked`` just after its ack landed (not counted yet: the
numbers count it from its claim), ``schedule-counted`` just after the clearing mark counted it (its rows
not deleted), ``schedule-deleted`` just after its rows were deleted (the mark still names them).
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from collections.abc import Callable, Iterable

from tms_hbase import MessagingClient, NotHeld, TopicId
from tms_hbase.shared.consumer import SharedConsumer
from tms_hbase.shared.state import CLEARED_COLUMN, FLOOR_COLUMN, Cleared


def die_at(step: str, consumer: SharedConsumer, note: Callable[[str], None]) -> None:
    """Make this process SIGKILL itself at ``step`` (see above), by wrapping the calls of its shared store's table."""
    table, keys = consumer._store.table, consumer._keys

    def die() -> None:
        note(f"dying {step}")
        os.kill(os.getpid(), signal.SIGKILL)

    swap, swap_many, delete = table.compare_and_set, table.compare_and_set_many, table.delete_many

    def compare_and_set(key: bytes, column: bytes, expected: bytes | None, value: bytes) -> bool:
        won = swap(key, column, expected, value)
        if step == "raised" and won and key == keys.floor and column == FLOOR_COLUMN:
            die()
        if step == "schedule-counted" and won and column == CLEARED_COLUMN and Cleared.decode(value).scheduled:
            die()
        return won

    def compare_and_set_many(swaps: list[tuple[bytes, bytes, bytes | None, bytes]], *, ways: int = 1) -> list[bool]:
        won = swap_many(swaps, ways=ways)
        acks = [key for (key, _, _, value), w in zip(swaps, won, strict=True) if w and b'"s":"a"' in value]
        if step == "schedule-acked" and any(key.startswith(keys.claims) for key in acks):
            die()
        return won

    def delete_many(rows: Iterable[bytes]) -> None:
        rows = list(rows)
        clearing = any(k.startswith(keys.ranges) for k in rows) and any(k.startswith(keys.claims) for k in rows)
        if step == "counted" and clearing:
            die()
        delete(rows)
        if step == "schedule-deleted" and any(k.startswith(keys.schedule) for k in rows):
            die()

    table.compare_and_set = compare_and_set  # type: ignore[method-assign]
    table.delete_many = delete_many  # type: ignore[method-assign]
    table.compare_and_set_many = compare_and_set_many  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("topic")
    parser.add_argument("subscription")
    parser.add_argument("out")
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--idle", type=float, default=3.0)
    parser.add_argument("--batch", type=int, default=3)
    parser.add_argument("--poison")
    parser.add_argument("--count", action="store_true")
    parser.add_argument(
        "--die-at", choices=["raised", "counted", "schedule-acked", "schedule-counted", "schedule-deleted"]
    )
    args = parser.parse_args()
    with (
        MessagingClient(create_tables=False) as client,
        open(args.out, "a") as out,
        client.shared_consumer(TopicId.parse(args.topic), args.subscription, poll_interval_seconds=0.1) as consumer,
    ):

        def note(line: str) -> None:
            out.write(f"{line} {time.monotonic_ns() // 1000}\n")
            out.flush()
            os.fsync(out.fileno())

        note(f"ready {consumer.owner}")
        if args.die_at:
            die_at(args.die_at, consumer, note)
        done = 0
        while True:
            got = consumer.receive(args.batch, args.idle)
            if not got:
                if args.count:
                    note(f"done {done}")
                return
            if args.count:
                for d in got:
                    try:
                        consumer.ack(d)
                    except NotHeld:
                        continue  # held past its deadline: another consumer acknowledges it
                    done += 1
                continue
            at = client.hbase_clock.now_ms()
            for d in got:
                note(f"got {d.payload.decode()} {d.deliveries} {d.deadline} {at}")
            for d in got:
                payload = d.payload.decode()
                if payload == args.poison:
                    consumer.nack(d)
                    note(f"nacked {payload}")
                    continue
                if args.delay:
                    time.sleep(args.delay)
                note(f"acking {payload}")
                try:
                    consumer.ack(d)
                except NotHeld:
                    note(f"late {payload}")
                else:
                    note(f"acked {payload}")


if __name__ == "__main__":
    main()
