"""A consumer process for the cluster fault test: consumes a subscription one message at a time, committing
each, and carries on through errors by opening a new consumer (which resumes after the last commit).

Usage: python -m tests.cluster.consumer TOPIC SUBSCRIPTION LOG_FILE STOP_FILE
Appends ``msg PAYLOAD time`` for each message handled, ``commit PAYLOAD`` once its commit returned and
``error ErrorName time`` when the consumer had to be reopened (all fsynced). Ends when STOP_FILE exists and a
poll found nothing for 5 s, or when the test process that started it is gone.
"""

from __future__ import annotations

import os
import sys
import time

from tms_hbase import MessagingClient, TopicId
from tms_hbase.errors import TmsError


def main() -> None:
    topic, name, log_path, stop_path = TopicId.parse(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
    parent = os.getppid()
    with MessagingClient(create_tables=False) as client, open(log_path, "a") as log:

        def note(line: str) -> None:
            log.write(line + "\n")
            log.flush()
            os.fsync(log.fileno())

        while True:
            drained = False
            try:
                with client.consumer(
                    topic, name, max_wait_seconds=5.0, lease_seconds=5.0, wait_for_lease=30.0
                ) as consumer:
                    drained = True
                    for message in consumer:
                        drained = False
                        payload = message.payload.decode()
                        note(f"msg {payload} {time.time():.3f}")
                        consumer.commit()
                        note(f"commit {payload}")
                        drained = True
            except TmsError as exc:
                note(f"error {type(exc).__name__} {time.time():.3f}")
                drained = False
                time.sleep(0.5)
            if (drained and os.path.exists(stop_path)) or os.getppid() != parent:
                return


if __name__ == "__main__":
    main()
