"""The REST API's request bodies as values: CDAP's PublishRequest (``store``, ``publish``) and ConsumeRequest
(``poll``); :mod:`tms_hbase.rest.codec` encodes and decodes them in each media type. No I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tms_hbase.model.record import Record


@dataclass(frozen=True)
class PublishRequest:
    """CDAP's PublishRequest: the body of ``store`` and ``publish`` (messages with a key or headers are Records)."""

    transaction_write_pointer: int | None
    messages: Sequence[bytes | Record]


@dataclass(frozen=True)
class ConsumeRequest:
    """CDAP's ConsumeRequest, the body of ``poll``: ``start_from`` is a message id (bytes), a publish
    time (ms, int) or None; ``transaction`` is TransactionCodec bytes."""

    start_from: bytes | int | None = None
    inclusive: bool = True
    limit: int | None = None
    transaction: bytes | None = None
