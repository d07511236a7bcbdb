"""Messages as consumers get them: a consumed message, and one delivery of a message from a shared
subscription. Values only: :mod:`tms_hbase.fetch.reader` and :mod:`tms_hbase.shared.consumer` make them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Message:
    """One consumed message: ``id`` (opaque bytes, sorts in consumption order), payload, publish time (ms)."""

    id: bytes
    payload: bytes
    publish_time: int

    @property
    def publish_time_ms(self) -> int:
        """``publish_time``, named with its unit: milliseconds since the epoch."""
        return self.publish_time


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message: its ``id``, payload and publish time, which delivery of it this is
    (``deliveries``, from 1) and until when (``deadline``, HBase's clock in ms) this consumer holds it."""

    id: bytes
    payload: bytes
    publish_time: int
    deliveries: int
    deadline: int
