"""A reader process for the crash test: tails a topic and records every message it sees, in order.

Usage: python -m tests.workers.tailer TOPIC OUT_FILE STOP_FILE [START_TIME_MS [STEP_BACK_MS]]
Polls with the last id seen (exclusive). Once STOP_FILE exists it drains what is left (until its polls
have found nothing for QUIET_SECONDS: longer than a sequencer topic's hole wait) and exits.
Fails (exit 1) if it ever sees an id that does not increase or a publish time more than STEP_BACK_MS
(default 0; a sequencer topic's D) below the latest one seen. At exit it writes OUT_FILE.json: the
longest a hole held its fetches and its slowest poll, in seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time

from tms_hbase import MessagingClient, TopicId

QUIET_SECONDS = 2.5


def main() -> None:
    topic, out_path, stop_path = TopicId.parse(sys.argv[1]), sys.argv[2], sys.argv[3]
    start_time = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "-" else None
    step_back = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    slowest = 0.0
    quiet_since = None  # when polls began to find nothing, once stopping
    last_id: bytes | None = None
    last_time = 0
    with MessagingClient(create_tables=False) as client, open(out_path, "w") as out:
        while True:
            stopping = os.path.exists(stop_path)
            began = time.monotonic()
            if last_id is None:
                batch = list(client.fetch(topic, start_time_ms=start_time, limit=500))
            else:
                batch = list(client.fetch(topic, start_message=last_id, inclusive=False, limit=500))
            slowest = max(slowest, time.monotonic() - began)
            for message in batch:
                if last_id is not None and message.id <= last_id:
                    sys.exit(f"id went backwards: {message.id.hex()} after {last_id.hex()}")
                if message.publish_time < last_time - step_back:
                    sys.exit(f"publish time went backwards at {message.id.hex()}")
                last_id, last_time = message.id, max(last_time, message.publish_time)
                out.write(f"{message.id.hex()} {message.publish_time} {message.payload.decode()}\n")
            out.flush()
            quiet_since = None if batch or not stopping else (quiet_since or time.monotonic())
            if quiet_since is not None and time.monotonic() - quiet_since >= QUIET_SECONDS:
                stats = {"longest_hole_wait": client.admin.longest_hole_wait, "slowest_poll": slowest}
                with open(f"{out_path}.json", "w") as f:
                    json.dump(stats, f)
                return
            if not batch:
                time.sleep(0.01)


if __name__ == "__main__":
    main()
