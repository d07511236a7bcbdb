"""The options of the ``tms`` data source, parsed and checked once (bad input is an InvalidArgument that
names the option) into a picklable value that the driver and the executors share."""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from dataclasses import dataclass

from tms_hbase.client import MessagingClient
from tms_hbase.errors import InvalidArgument
from tms_hbase.model.isolation import COMMITTED, check_isolation
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.topic import TopicId
from tms_hbase.tx.client import TransactionClient

# Options Spark itself adds to those the user gives.
SPARK_OPTIONS = frozenset({"path", "checkpointlocation"})
KNOWN = frozenset(
    {
        "thrift",
        "prefix",
        "topic",
        "txserver",
        "transactional",
        "isolation",
        "startingtime",
        "endingtime",
        "startingid",
        "endingid",
        "startingoffsets",
        "maxmessagespertrigger",
        "partitions",
        "batchsize",
        "timeout",
    }
)
STARTS = ("earliest", "latest")
DEFAULT_BATCH_SIZE = 1000
DEFAULT_TIMEOUT = 30.0


@dataclass(frozen=True)
class Options:
    """Where the topic is and what to read or write (see the options table in docs/spark.md)."""

    topic: TopicId
    thrift: str | None = None
    prefix: str | None = None
    tx_server: str | None = None
    transactional: bool | None = None  # None: not given (reads are then not transactional)
    isolation: str = COMMITTED  # a stream's view when not transactional: committed messages only, or every row
    starting_time: int | None = None
    ending_time: int | None = None
    starting_id: MessageId | None = None
    ending_id: MessageId | None = None
    starting_offsets: str = "earliest"
    max_messages_per_trigger: int | None = None
    partitions: int | None = None
    batch_size: int = DEFAULT_BATCH_SIZE
    timeout: float = DEFAULT_TIMEOUT

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Options:
        """Options as Spark passes them (keys in any case, values strings)."""
        given = {str(k).lower(): v for k, v in options.items()}
        unknown = sorted(set(given) - KNOWN - SPARK_OPTIONS)
        if unknown:
            raise InvalidArgument(f"unknown option(s) {', '.join(unknown)} for format 'tms' (see docs/spark.md)")
        topic = given.get("topic") or given.get("path")  # load("ns:name") and save("ns:name") name it too
        if not topic:
            raise InvalidArgument("option 'topic' is required: namespace:name")
        parsed = cls(
            topic=TopicId.parse(topic),
            thrift=given.get("thrift") or None,
            prefix=given.get("prefix") or None,
            tx_server=given.get("txserver") or None,
            transactional=_flag(given, "transactional"),
            isolation=check_isolation(given.get("isolation", COMMITTED)),
            starting_time=_integer(given, "startingTime", 0),
            ending_time=_integer(given, "endingTime", 0),
            starting_id=_message_id(given, "startingId"),
            ending_id=_message_id(given, "endingId"),
            starting_offsets=given.get("startingoffsets", "earliest").lower(),
            max_messages_per_trigger=_integer(given, "maxMessagesPerTrigger", 1),
            partitions=_integer(given, "partitions", 1),
            batch_size=_integer(given, "batchSize", 1) or DEFAULT_BATCH_SIZE,
            timeout=_seconds(given, "timeout"),
        )
        if parsed.starting_offsets not in STARTS:
            raise InvalidArgument(f"bad startingOffsets {parsed.starting_offsets!r}: expected earliest or latest")
        if parsed.starting_time is not None and parsed.starting_id is not None:
            raise InvalidArgument("give startingTime or startingId, not both")
        if parsed.ending_time is not None and parsed.ending_id is not None:
            raise InvalidArgument("give endingTime or endingId, not both")
        if "startingoffsets" in given and (parsed.starting_time is not None or parsed.starting_id is not None):
            raise InvalidArgument("give startingOffsets, startingTime or startingId, not more than one")
        return parsed

    def client(self) -> MessagingClient:
        """A client of the topic's HBase (the tables must exist: nothing is created from Spark)."""
        return MessagingClient(
            self.thrift, self.prefix, create_tables=False, timeout_seconds=self.timeout, tx_server=self.tx_server
        )

    def tx_client(self) -> TransactionClient:
        return TransactionClient(self.tx_server, timeout_seconds=self.timeout)

    def for_stream(self) -> Options:
        """Check the options make sense for a stream (which has no end) and return them."""
        if self.ending_time is not None or self.ending_id is not None:
            raise InvalidArgument("endingTime and endingId are for batch reads: a stream has no end")
        return self

    def for_batch(self) -> Options:
        """Check the options make sense for a batch read and return them."""
        if self.max_messages_per_trigger is not None or self.starting_offsets != "earliest":
            raise InvalidArgument("maxMessagesPerTrigger and startingOffsets are for streams (readStream)")
        return self

    def for_write(self) -> Options:
        """Check the options make sense for a write and return them."""
        if self.transactional is False:
            raise InvalidArgument("writes are always transactional (one long transaction): drop transactional=false")
        read_only = {
            "startingTime": self.starting_time,
            "endingTime": self.ending_time,
            "startingId": self.starting_id,
            "endingId": self.ending_id,
            "maxMessagesPerTrigger": self.max_messages_per_trigger,
            "partitions": self.partitions,
            "isolation": None if self.isolation == COMMITTED else self.isolation,
        }
        given = [name for name, value in read_only.items() if value is not None]
        if given:
            raise InvalidArgument(
                f"option(s) {', '.join(given)} are for reads; writes are always one transaction (see docs/spark.md)"
            )
        return self


def _flag(given: Mapping[str, str], name: str) -> bool | None:
    value = given.get(name.lower())
    if value is None:
        return None
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise InvalidArgument(f"bad {name} {value!r}: expected true or false")
    return text == "true"


def _integer(given: Mapping[str, str], name: str, minimum: int) -> int | None:
    value = given.get(name.lower())
    if value is None:
        return None
    text = str(value).strip()
    if not text.isdigit() or int(text) < minimum:
        raise InvalidArgument(f"bad {name} {value!r}: expected a whole number >= {minimum}")
    return int(text)


def _seconds(given: Mapping[str, str], name: str) -> float:
    value = given.get(name.lower())
    if value is None:
        return DEFAULT_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise InvalidArgument(f"bad {name} {value!r}: expected seconds > 0")
    return seconds


def _message_id(given: Mapping[str, str], name: str) -> MessageId | None:
    """A message id given as 40 hex digits (what Spark's ``hex(id)`` shows, any case)."""
    value = given.get(name.lower())
    if value is None:
        return None
    try:
        data = binascii.unhexlify(str(value).strip())
    except (binascii.Error, ValueError):
        raise InvalidArgument(f"bad {name} {value!r}: expected a message id as 40 hex digits") from None
    return MessageId.decode(data)
