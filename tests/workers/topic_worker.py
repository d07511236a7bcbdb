"""A separate process that changes one topic, for the concurrency tests.

Usage: python -m tests.workers.topic_worker MODE TOPIC COUNT START_AT
  increment: COUNT read-modify-write increments of property "counter" (retrying lost races)
  create:    one create at START_AT; prints "created" or "exists"
  update:    unconditional updates until the topic is gone; prints how many succeeded
Address and prefix come from TMS_HBASE_THRIFT / TMS_TABLE_PREFIX.
"""

from __future__ import annotations

import sys
import time

from tms_hbase import ConcurrentModification, MessagingClient, TopicAlreadyExists, TopicId, TopicNotFound


def main() -> None:
    mode, topic_text, count, start_at = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    topic = TopicId.parse(topic_text)
    with MessagingClient(create_tables=False) as client:
        time.sleep(max(0.0, start_at - time.time()))
        if mode == "increment":
            conflicts = 0
            for _ in range(count):
                while True:
                    seen = client.get_topic(topic)
                    value = int(seen.properties.get("counter", "0")) + 1
                    try:
                        client.update_topic(topic, {**_user(seen.properties), "counter": str(value)}, expected=seen)
                        break
                    except ConcurrentModification:
                        conflicts += 1
            print(f"conflicts {conflicts}")
        elif mode == "create":
            try:
                client.create_topic(topic, {"ttl": str(count)})
                print("created")
            except TopicAlreadyExists:
                print("exists")
        elif mode == "update":
            done = 0
            try:
                while True:
                    client.update_topic(topic, {"ttl": "100", "n": str(done)})
                    done += 1
            except TopicNotFound:
                print(f"updates {done}")


def _user(properties: object) -> dict[str, str]:
    return {k: v for k, v in dict(properties).items() if k != "generation"}  # type: ignore[call-overload]


if __name__ == "__main__":
    main()
