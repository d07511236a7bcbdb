"""Dead letters: what a shared subscription publishes to its dead-letter topic for a message it gave
up on, how to read it back, and what a listing or replay of them found.

A dead letter is the original message (payload, key and headers as they were) with its origin in headers
appended after the original's, as Kafka Connect's dead-letter queues carry theirs::

    tms-dead-letter-topic, -subscription, -id (hex), -deliveries, -publish-time (ms), -reason   (UTF-8 text)

Dead letters written before messages had headers carry their origin inside the payload, and still read::

    b"TMSDL1\\n" | one line of JSON (topic, subscription, id hex, deliveries, publish_time) | b"\\n" | payload
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.message import Message
from tms_hbase.model.record import Headers, Record
from tms_hbase.model.topic import TopicId, as_topic

MAGIC = b"TMSDL1\n"
PREFIX = "tms-dead-letter-"
FIELDS = ("topic", "subscription", "id", "deliveries", "publish-time", "reason")
MAX_DELIVERIES = "max deliveries"


@dataclass(frozen=True)
class DeadLetter:
    """A message dead-lettered by subscription ``subscription`` of ``topic`` after ``deliveries``
    deliveries; ``message_id`` is its id in ``topic``; ``payload``, ``key`` and ``headers`` are the original's."""

    topic: TopicId
    subscription: str
    message_id: bytes
    deliveries: int
    publish_time: int
    payload: bytes
    key: bytes | None = None
    headers: Headers = ()
    reason: str = MAX_DELIVERIES

    def head(self) -> dict:
        """Where it comes from, as JSON-ready data (topic, subscription, id hex, deliveries, publish_time,
        reason): what the CLI and the console show besides its payload."""
        return {
            "topic": str(self.topic),
            "subscription": self.subscription,
            "id": self.message_id.hex(),
            "deliveries": self.deliveries,
            "publish_time": self.publish_time,
            "reason": self.reason,
        }

    def record(self) -> Record:
        """The message published to the dead-letter topic: the original with the origin headers appended."""
        values = (str(self.topic), self.subscription, self.message_id.hex(), self.deliveries, self.publish_time)
        origin = tuple(
            (PREFIX + name, str(value).encode()) for name, value in zip(FIELDS, (*values, self.reason), strict=True)
        )
        return Record(self.payload, self.key, (*self.headers, *origin))

    def original(self) -> Record:
        """The message as it was first published (what a replay publishes again)."""
        return Record(self.payload, self.key, self.headers)

    @classmethod
    def of(cls, message: Message) -> DeadLetter:
        """The dead letter a dead-letter topic's message holds; InvalidArgument if it is not one."""
        names = tuple(name for name, _ in message.headers[-len(FIELDS) :])
        if names == tuple(PREFIX + name for name in FIELDS):
            values = [value.decode(errors="replace") for _, value in message.headers[-len(FIELDS) :]]
            try:
                return cls(
                    as_topic(values[0]),
                    values[1],
                    bytes.fromhex(values[2]),
                    int(values[3]),
                    int(values[4]),
                    message.payload,
                    message.key,
                    message.headers[: -len(FIELDS)],
                    values[5],
                )
            except ValueError as exc:
                raise InvalidArgument(f"not a dead letter: {exc}") from None
        return cls._inside(message.payload)

    @classmethod
    def _inside(cls, data: bytes) -> DeadLetter:
        """A dead letter written before headers existed: its origin in a header inside the payload."""
        if not data.startswith(MAGIC) or b"\n" not in data[len(MAGIC) :]:
            raise InvalidArgument("not a dead letter (no tms-dead-letter headers, no TMSDL1 header)")
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


@dataclass(frozen=True)
class RefusedLetter:
    """A dead letter a replay does not publish, and why."""

    letter: DeadLetter
    reason: str


@dataclass(frozen=True)
class DeadLetters:
    """What :meth:`tms_hbase.client_admin.ClientAdmin.dead_letters` listed or replayed from
    ``dead_letter_topic``: ``letters`` go back to the subscription's topic, ``refused`` name another topic and
    are never published."""

    dead_letter_topic: TopicId
    letters: list[DeadLetter]
    refused: list[RefusedLetter]

    def sort(self, letter: DeadLetter, topic: TopicId) -> bool:
        """Add ``letter`` to ``letters`` if it names ``topic`` (True), else to ``refused``."""
        if letter.topic == topic:
            self.letters.append(letter)
            return True
        reason = f"it names topic {letter.topic}, not {topic}: a replay publishes only to the subscription's own topic"
        self.refused.append(RefusedLetter(letter, reason))
        return False
