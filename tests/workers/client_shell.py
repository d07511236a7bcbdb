"""A long-lived client process driven line by line, so a test can interleave several real clients.

Usage: python -m tests.workers.client_shell TOPIC
Reads one command per line on stdin and answers one JSON line on stdout:

* ``publish P1 P2 ...``: publish one batch of these payloads; answers ``{"ok": true}``;
* ``fetch``: poll the topic after the last message this process has read (a tailing reader); answers
  ``{"ok": true, "messages": [[id_hex, payload], ...]}``;
* ``quit``: exit 0.

A failure answers ``{"ok": false, "error": "..."}`` and the process goes on, as a real client would.
The client (and so its remembered tails) lives as long as the process.
"""

from __future__ import annotations

import json
import sys

from tms_hbase import MessagingClient, TmsError, TopicId


def main() -> None:
    topic = TopicId.parse(sys.argv[1])
    last: bytes | None = None
    with MessagingClient(create_tables=False) as client:
        for line in sys.stdin:
            command, *args = line.split()
            try:
                if command == "quit":
                    return
                if command == "publish":
                    client.publish(topic, [a.encode() for a in args])
                    answer: dict = {"ok": True}
                elif command == "fetch":
                    polled = client.fetch(topic, start_message=last, inclusive=False) if last else client.fetch(topic)
                    batch = list(polled)
                    last = batch[-1].id if batch else last
                    answer = {"ok": True, "messages": [[m.id.hex(), m.payload.decode()] for m in batch]}
                else:
                    answer = {"ok": False, "error": f"unknown command {command!r}"}
            except TmsError as error:
                answer = {"ok": False, "error": str(error)}
            print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
