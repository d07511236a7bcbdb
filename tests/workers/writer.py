"""A writer process for the crash test: publishes numbered batches until told to stop.

Usage: python -m tests.workers.writer TOPIC NAME ACK_FILE STOP_FILE
Each batch is 1-4 messages ``NAME:batch:index``; after a publish returns, ``NAME batch size`` is
appended to ACK_FILE and fsynced, so the file lists exactly the acknowledged batches.
"""

from __future__ import annotations

import os
import random
import sys

from tms_hbase import MessagingClient, TopicId


def main() -> None:
    topic, name, ack_path, stop_path = TopicId.parse(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    rng = random.Random(name)
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
