"""A writer process for the cluster fault test: publishes numbered batches until told to stop, carrying on
through errors.

Usage: python -m tests.cluster.writer TOPIC NAME LOG_FILE STOP_FILE [PAUSE]
Each batch is 1-4 messages ``NAME:batch:index``. After a publish returns, ``ack NAME batch size time`` is
appended to LOG_FILE (fsynced); after a publish raised, ``fail NAME batch size time ErrorName``: its outcome
is unknown (stored whole or not at all), and the writer goes on with the next batch, never republishing one.
PAUSE (seconds, default 0) is slept between batches. The writer also stops when the test process that started
it is gone.
"""

from __future__ import annotations

import os
import random
import sys
import time

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import TmsError


def main() -> None:
    topic, name, log_path, stop_path = TopicId.parse(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    pause = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    parent = os.getppid()
    rng = random.Random(name)
    with MessagingClient(create_tables=False) as client, open(log_path, "a") as log:
        batch = 0
        while not os.path.exists(stop_path) and os.getppid() == parent:
            batch += 1
            size = rng.randint(1, 4)
            try:
                client.publish(topic, [f"{name}:{batch}:{i}".encode() for i in range(size)])
                line = f"ack {name} {batch} {size} {time.time():.3f}"
            except TmsError as exc:
                line = f"fail {name} {batch} {size} {time.time():.3f} {type(exc).__name__}"
                time.sleep(0.2)
            log.write(line + "\n")
            log.flush()
            os.fsync(log.fileno())
            time.sleep(pause)


if __name__ == "__main__":
    main()
