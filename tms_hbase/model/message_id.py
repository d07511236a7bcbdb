"""Message ids: 20 opaque bytes that sort in consumption order.

    generation u32 | position u64 | index u64        (big-endian)

``position`` is the batch row; ``index`` is the message's place in it (inline payloads from 0, payload
table rows by their store sequence). The generation lets a reader notice an id from before the topic
was deleted and re-created, and start at the new generation's beginning instead of skipping.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tms_hbase.errors import InvalidArgument

_ID = struct.Struct(">IQQ")
ID_LENGTH = _ID.size


def encode(generation: int, position: int, index: int) -> bytes:
    """The id bytes of (generation, position, index): ``bytes(MessageId(...))`` without the object
    (readers make one per message)."""
    return _ID.pack(generation, position, index)


@dataclass(frozen=True, order=True)
class MessageId:
    """A decoded message id."""

    generation: int
    position: int
    index: int

    def __bytes__(self) -> bytes:
        return _ID.pack(self.generation, self.position, self.index)

    @classmethod
    def decode(cls, data: object) -> MessageId:
        """Parse id bytes; anything that is not a tms-hbase message id is InvalidArgument."""
        if not isinstance(data, (bytes, bytearray, memoryview)) or len(data) != ID_LENGTH:
            raise InvalidArgument(f"corrupt message id {data!r}: expected {ID_LENGTH} bytes from Message.id")
        generation, position, index = _ID.unpack(bytes(data))
        if generation == 0 or position == 0:
            raise InvalidArgument(f"corrupt message id {bytes(data).hex()}: generation and position start at 1")
        return cls(generation, position, index)
