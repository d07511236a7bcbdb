"""Messages as consumers get them: a consumed message, and one delivery of a message from a shared
subscription. Values only: :mod:`tms_hbase.fetch.reader` and :mod:`tms_hbase.shared.consumer` make them."""

from __future__ import annotations

from dataclasses import dataclass

from tms_hbase.model.schedule import due_ms


@dataclass(frozen=True)
class Message:
    """One consumed message: ``id`` (opaque bytes, sorts in consumption order), payload, publish time (ms),
    and the ``key`` (None if it has none) and ``headers`` ((name, value) pairs in order) it was published with."""

    id: bytes
    payload: bytes
    publish_time: int
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()

    @property
    def publish_time_ms(self) -> int:
        """``publish_time``, named with its unit: milliseconds since the epoch."""
        return self.publish_time

    @property
    def deliver_at_ms(self) -> int | None:
        """When it is scheduled for (HBase ms, :mod:`~tms_hbase.model.schedule`); None if it is not."""
        return due_ms(self.publish_time, self.headers)


@dataclass(frozen=True)
class Delivery:
    """One delivery of a message: its ``id``, payload and publish time, which delivery of it this is
    (``deliveries``, from 1) and until when (``deadline``, HBase's clock in ms) this consumer holds it, its
    ``key`` and ``headers`` as on :class:`Message`, and its ``incarnation``: a number naming this delivery
    and no other (not the message's earlier or later deliveries), so that settling it once another
    delivery of the message holds it is refused (0: not known)."""

    id: bytes
    payload: bytes
    publish_time: int
    deliveries: int
    deadline: int
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()
    incarnation: int = 0

    @property
    def deliver_at_ms(self) -> int | None:
        """When it is scheduled for (HBase ms, :mod:`~tms_hbase.model.schedule`); None if it is not."""
        return due_ms(self.publish_time, self.headers)


@dataclass(frozen=True)
class DeliveryRef:
    """One delivery named without its message: the message ``id`` and the delivery's ``incarnation``
    (what a settle call over HTTP carries; settle with a :class:`Delivery` where it is at hand)."""

    id: bytes
    incarnation: int
