"""What a publish stored: where its messages are, as Kafka's RecordMetadata, NATS's PubAck and Redis's XADD
tell a producer."""

from __future__ import annotations

from dataclasses import dataclass

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.message_id import encode
from tms_hbase.model.topic import TopicId
from tms_hbase.model.wire import RollbackDetail


@dataclass(frozen=True)
class PublishResult:
    """A stored batch: ``count`` messages in the batch row at ``position`` of the topic's ``generation``,
    from message index ``first_index`` (0 unless a background publisher put several publishes in one row).

    Their ids are :attr:`message_ids` (``first_id`` to ``last_id``, in order); a consumer sees them there.
    A transactional publish (``tx_write_pointer``) also returns ``rollback``, the handle
    ``rollback()`` takes (``bytes(result.rollback)`` is CDAP's opaque handle); its messages are stored
    but readers in a transaction see them only once it commits. Publishing the payloads stored before
    under a write pointer (an empty list) writes a pointer row: ``count`` is 0 and there are no ids here,
    because the stored payloads' ids come from their store sequences (a fetch returns them).
    """

    topic: TopicId
    generation: int
    position: int
    count: int
    first_index: int = 0
    rollback: RollbackDetail | None = None

    @property
    def message_ids(self) -> list[bytes]:
        """The ids of the messages published, in order."""
        return [encode(self.generation, self.position, self.first_index + i) for i in range(self.count)]

    @property
    def first_id(self) -> bytes | None:
        """The id of the first message published (None for a pointer row)."""
        return encode(self.generation, self.position, self.first_index) if self.count else None

    @property
    def last_id(self) -> bytes | None:
        """The id of the last message published (None for a pointer row)."""
        return encode(self.generation, self.position, self.first_index + self.count - 1) if self.count else None

    def part(self, first_index: int, count: int) -> PublishResult:
        """The part of this batch that one of several publishes put together in it contributed."""
        return PublishResult(self.topic, self.generation, self.position, count, self.first_index + first_index)


def rollback_detail(handle: object) -> RollbackDetail:
    """What ``rollback`` was given, as a RollbackDetail: a transactional publish's result, its detail, or the
    detail's bytes (CDAP's opaque handle); anything else is InvalidArgument before any call."""
    if isinstance(handle, PublishResult):
        if handle.rollback is None:
            raise InvalidArgument(
                "not a transactional publish: only a publish with tx_write_pointer can be rolled back"
            )
        return handle.rollback
    if isinstance(handle, RollbackDetail):
        return handle
    if isinstance(handle, (bytes, bytearray, memoryview)):
        return RollbackDetail.from_bytes(bytes(handle))
    raise InvalidArgument("corrupt rollback handle: not bytes returned by a transactional publish")
