"""What inspecting a topic shows (``tms-admin topic tail``, the console): one message or corrupt row as an
:class:`Entry`, and the :class:`Cursor` an inspection goes on from (:mod:`tms_hbase.fetch.inspect` reads them).
No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from tms_hbase.model.record import Headers


@dataclass(frozen=True)
class Entry:
    """One message as inspection shows it, or a corrupt row (``error`` set, no message)."""

    position: int
    index: int
    id: bytes = b""  # empty for a corrupt row
    publish_time: int | None = None
    tx_pointer: int | None = None
    state: str | None = None  # committed | in progress | invalid | rolled back; None: not transactional
    payload: bytes | None = None
    error: str | None = None
    key: bytes | None = None
    headers: Headers = ()


@dataclass(frozen=True)
class Cursor:
    """Where an inspection goes on: the first message of row ``position`` with index >= ``index``."""

    position: int
    index: int = 0
