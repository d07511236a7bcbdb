"""A writer process for the crash test: publishes numbered batches until told to stop.

Usage: python -m tests.workers.writer TOPIC NAME ACK_FILE STOP_FILE [BLOCK_AT BLOCKED_FILE]
Each batch is 1-4 messages ``NAME:batch:index``; after a publish returns, ``NAME batch size`` is
appended to ACK_FILE and fsynced, so the file lists exactly the acknowledged batches.

With BLOCK_AT (a sequencer topic), the writer's BLOCK_AT-th reservation of offsets goes through and then
the process stops there for good, after creating BLOCKED_FILE: a SIGKILL then lands between reserving
and writing, leaving a hole.
"""

from __future__ import annotations

import os
import random
import sys
import threading
from pathlib import Path

from tms_hbase import MessagingClient, TopicId
from tms_hbase.ordering import sequencer


def block_after_reserving(at: int, blocked: Path) -> None:
    """Make the ``at``-th reservation of this process its last step: reserve, say so, and wait forever."""
    reserve, calls = sequencer.reserve, iter(range(1, 2**62))

    def reserving(*args: object, **kwargs: object) -> int:
        first = reserve(*args, **kwargs)  # type: ignore[arg-type]
        if next(calls) == at:
            blocked.write_text(str(first))
            threading.Event().wait()
        return first

    sequencer.reserve = reserving  # type: ignore[assignment]


def main() -> None:
    topic, name, ack_path, stop_path = TopicId.parse(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    rng = random.Random(name)
    if len(sys.argv) > 6:
        block_after_reserving(int(sys.argv[5]), Path(sys.argv[6]))
    with MessagingClient(create_tables=False) as client, open(ack_path, "a") as acks:
        batch = 0
        while not os.path.exists(stop_path):
            batch += 1
            size = rng.randint(1, 4)
            client.publish(topic, [f"{name}:{batch}:{i}".encode() for i in range(size)])
            acks.write(f"{name} {batch} {size}\n")
            acks.flush()
            os.fsync(acks.fileno())


if __name__ == "__main__":
    main()
