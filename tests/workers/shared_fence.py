"""A consumer process of a shared subscription driven line by line, for the fenced-acknowledgement tests.

Usage: python -m tests.workers.shared_fence TOPIC SUBSCRIPTION [OWNER]

Reads one command a line from stdin and answers one JSON line on stdout:

    receive            {"got": [{"id": hex, "payload": str, "deliveries": n, "incarnation": n}, ...]}
    ack | nack | extend | release   settles every delivery the last receive returned (extend: by 120 s):
                       {"done": "ack"} or {"refused": "NotHeld", "why": message}
    note               acknowledges them with wait=False (noted, not written): {"done": "note"}
    flush              writes what was noted: {"done": "flush"} or {"refused": ...}

With OWNER the consumer uses that owner name (as two processes of one gateway session do).
"""

from __future__ import annotations

import json
import sys

from tms_hbase import MessagingClient, NotHeld, TopicId


def main() -> None:
    topic, name = TopicId.parse(sys.argv[1]), sys.argv[2]
    owner = sys.argv[3] if len(sys.argv) > 3 else None
    with (
        MessagingClient(create_tables=False) as client,
        client.shared_consumer(topic, name, owner=owner, poll_interval_seconds=0.1) as consumer,
    ):
        last: list = []

        def answer(data: dict) -> None:
            print(json.dumps(data), flush=True)

        answer({"ready": consumer.owner})
        for line in sys.stdin:
            command = line.strip()
            if command == "receive":
                last = consumer.receive(10, 30.0)
                answer(
                    {
                        "got": [
                            {
                                "id": d.id.hex(),
                                "payload": d.payload.decode(),
                                "deliveries": d.deliveries,
                                "incarnation": d.incarnation,
                            }
                            for d in last
                        ]
                    }
                )
                continue
            settle = {
                "ack": lambda d: consumer.ack(d),
                "nack": lambda d: consumer.nack(d),
                "extend": lambda d: consumer.extend(d, 120),
                "release": lambda d: consumer.release(d),
                "note": lambda d: consumer.ack(d, wait=False),
            }.get(command)
            try:
                if settle is None:
                    consumer.flush()
                else:
                    for d in last:
                        settle(d)
            except NotHeld as exc:
                answer({"refused": "NotHeld", "why": str(exc)})
            else:
                answer({"done": command})


if __name__ == "__main__":
    main()
