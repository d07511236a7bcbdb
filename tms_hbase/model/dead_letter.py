"""Dead letters: what a shared subscription publishes to its dead-letter topic for a message it gave
up on, and how to read it back (a topic holds payloads only, so the origin travels in the payload).

    b"TMSDL1\\n" | one line of JSON (topic, subscription, id hex, deliveries, publish_time) | b"\\n" | payload
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.topic import TopicId, as_topic

MAGIC = b"TMSDL1\n"


@dataclass(frozen=True)
class DeadLetter:
    """A message dead-lettered by subscription ``subscription`` of ``topic`` after ``deliveries``
    deliveries; ``message_id`` is its id in ``topic``."""

    topic: TopicId
    subscription: str
    message_id: bytes
    deliveries: int
    publish_time: int
    payload: bytes

    def head(self) -> dict:
        """Where it comes from, as JSON-ready data (topic, subscription, id hex, deliveries, publish_time):
        the header it travels with, and what the CLI and the console show besides its payload."""
        return {
            "topic": str(self.topic),
            "subscription": self.subscription,
            "id": self.message_id.hex(),
            "deliveries": self.deliveries,
            "publish_time": self.publish_time,
        }

    def encode(self) -> bytes:
        return MAGIC + json.dumps(self.head(), sort_keys=True, separators=(",", ":")).encode() + b"\n" + self.payload

    @classmethod
    def decode(cls, data: bytes) -> DeadLetter:
        """The dead letter in a dead-letter topic's message; InvalidArgument if it is not one."""
        if not data.startswith(MAGIC) or b"\n" not in data[len(MAGIC) :]:
            raise InvalidArgument("not a dead letter (no TMSDL1 header)")
        head, payload = data[len(MAGIC) :].split(b"\n", 1)
        try:
            d = json.loads(head)
            return cls(
                as_topic(d["topic"]),
                str(d["subscription"]),
                bytes.fromhex(d["id"]),
                int(d["deliveries"]),
                int(d["publish_time"]),
                payload,
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"not a dead letter: {exc}") from None
