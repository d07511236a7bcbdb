"""An immutable transaction snapshot with Apache Tephra's visibility rules (org.apache.tephra.Transaction)."""

from __future__ import annotations

import enum
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, replace

from tms_hbase.errors import InvalidArgument

LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

NO_TX_IN_PROGRESS = LONG_MAX
"""Value of ``first_short_in_progress`` (and of ``first_in_progress``) when no transaction is in progress."""


class TransactionType(enum.Enum):
    """Kind of transaction; values are Tephra's Thrift ``TTransactionType`` (not the snapshot's ordinals)."""

    SHORT = 1  # conflicts detected at commit, times out quickly
    LONG = 2  # no conflict detection, long timeout, invalidated on abort


class VisibilityLevel(enum.Enum):
    """How a transaction sees its own writes; values are Tephra's Thrift ``TVisibilityLevel``."""

    SNAPSHOT = 1  # read snapshot plus every write pointer of this transaction
    SNAPSHOT_EXCLUDE_CURRENT = 2  # same, but hides the current write pointer (reads "before" the latest checkpoint)
    SNAPSHOT_ALL = 3  # same visibility as SNAPSHOT; tells readers to do raw scans (deletes included)


def check_long(field: str, value: object) -> int:
    """Return ``value`` if it is a Java ``long`` (an int, not a bool, in signed 64-bit range), else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgument(f"{field} must be an int, got {type(value).__name__} {value!r}")
    if not LONG_MIN <= value <= LONG_MAX:
        raise InvalidArgument(f"{field} must fit in a signed 64-bit long, got {value}")
    return int(value)


def check_longs(field: str, values: object) -> tuple[int, ...]:
    """Validate a collection of pointers and return it as a sorted tuple (Tephra binary-searches these arrays)."""
    if isinstance(values, str | bytes | bytearray) or not isinstance(values, Iterable):
        raise InvalidArgument(f"{field} must be a sequence of ints, got {type(values).__name__}")
    return tuple(sorted(check_long(f"{field}[{i}]", v) for i, v in enumerate(values)))


def _contains(items: tuple[int, ...], value: int) -> bool:
    """Binary search in a sorted tuple, as Tephra's ``Arrays.binarySearch(...) >= 0``."""
    i = bisect_left(items, value)
    return i < len(items) and items[i] == value


def _short(items: tuple[int, ...], limit: int = 4) -> str:
    """Render a pointer list for ``repr`` without flooding the screen with a long invalid list."""
    if len(items) <= limit:
        return "[" + ", ".join(map(str, items)) + "]"
    return "[" + ", ".join(map(str, items[:limit])) + f", …+{len(items) - limit}]"


@dataclass(frozen=True, slots=True, init=False, repr=False)
class Transaction:
    """A transaction's read snapshot and write pointers; decides which data versions it may see."""

    read_pointer: int
    tx_id: int
    invalids: tuple[int, ...]
    in_progress: tuple[int, ...]
    first_short_in_progress: int
    type: TransactionType
    checkpoint_write_pointers: tuple[int, ...]
    visibility_level: VisibilityLevel
    write_pointer: int

    def __init__(
        self,
        read_pointer: int,
        tx_id: int,
        invalids: Iterable[int],
        in_progress: Iterable[int],
        first_short_in_progress: int,
        *,
        type: TransactionType = TransactionType.SHORT,
        checkpoint_write_pointers: Iterable[int] = (),
        visibility_level: VisibilityLevel = VisibilityLevel.SNAPSHOT,
        write_pointer: int | None = None,
    ) -> None:
        """Validate and normalise; ``write_pointer`` defaults to the latest checkpoint pointer, else ``tx_id``."""
        if not isinstance(type, TransactionType):
            raise InvalidArgument(f"type must be a TransactionType, got {type!r}")
        if not isinstance(visibility_level, VisibilityLevel):
            raise InvalidArgument(f"visibility_level must be a VisibilityLevel, got {visibility_level!r}")
        tx_id = check_long("tx_id", tx_id)
        checkpoints = check_longs("checkpoint_write_pointers", checkpoint_write_pointers)
        if write_pointer is None:
            write_pointer = checkpoints[-1] if checkpoints else tx_id
        values = {
            "read_pointer": check_long("read_pointer", read_pointer),
            "tx_id": tx_id,
            "invalids": check_longs("invalids", invalids),
            "in_progress": check_longs("in_progress", in_progress),
            "first_short_in_progress": check_long("first_short_in_progress", first_short_in_progress),
            "type": type,
            "checkpoint_write_pointers": checkpoints,
            "visibility_level": visibility_level,
            "write_pointer": check_long("write_pointer", write_pointer),
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def first_in_progress(self) -> int:
        """Oldest in-progress pointer of any type, or ``NO_TX_IN_PROGRESS`` when there is none."""
        return self.in_progress[0] if self.in_progress else NO_TX_IN_PROGRESS

    @property
    def visibility_upper_bound(self) -> int:
        """Largest pointer X such that nothing at or below X can be invisible to this transaction (may be invalid)."""
        if not self.in_progress:
            # min() keeps a read pointer of Long.MAX_VALUE (the "see everything" transaction) from meaning "all".
            return min(self.tx_id - 1, self.read_pointer)
        return self.in_progress[0] - 1

    @property
    def has_excludes(self) -> bool:
        """True when some version below the read pointer may be hidden (invalid or in-progress lists not empty)."""
        return bool(self.invalids or self.in_progress)

    @property
    def excludes_size(self) -> int:
        """Number of excluded pointers (invalid plus in-progress)."""
        return len(self.invalids) + len(self.in_progress)

    def is_in_progress(self, version: int) -> bool:
        """True if ``version`` belongs to a transaction that was in progress when this one started."""
        return _contains(self.in_progress, version)

    def is_invalid(self, version: int) -> bool:
        """True if ``version`` belongs to a transaction on the invalid list (aborted long, timed out, invalidated)."""
        return _contains(self.invalids, version)

    def is_excluded(self, version: int) -> bool:
        """True if ``version`` must be hidden even below the read pointer: it is in progress or invalid."""
        return _contains(self.in_progress, version) or _contains(self.invalids, version)

    def is_checkpoint(self, version: int) -> bool:
        """True if ``version`` is one of this transaction's checkpoint write pointers."""
        return _contains(self.checkpoint_write_pointers, version)

    def is_current_write(self, version: int) -> bool:
        """True if ``version`` was written by this transaction (its id, current pointer or any checkpoint)."""
        return version in (self.write_pointer, self.tx_id) or self.is_checkpoint(version)

    def is_visible(self, version: int) -> bool:
        """True if data written at ``version`` is visible: committed before this snapshot, or our own write."""
        if version <= self.read_pointer and not self.is_excluded(version):
            return True
        if not self.is_current_write(version):
            return False
        return self.visibility_level is not VisibilityLevel.SNAPSHOT_EXCLUDE_CURRENT or version != self.write_pointer

    def with_visibility(self, level: VisibilityLevel) -> Transaction:
        """Copy with another visibility level (Tephra mutates in place with ``setVisibility``; we stay immutable)."""
        return replace(self, visibility_level=level)

    def checkpoint(self, new_write_pointer: int) -> Transaction:
        """Copy after a checkpoint: ``new_write_pointer`` becomes the write pointer and joins the checkpoint list."""
        new_write_pointer = check_long("new_write_pointer", new_write_pointer)
        return replace(
            self,
            write_pointer=new_write_pointer,
            checkpoint_write_pointers=(*self.checkpoint_write_pointers, new_write_pointer),
        )

    def __repr__(self) -> str:
        """Short one-line form: ids first, long pointer lists abbreviated, defaults left out."""
        parts = [f"tx_id={self.tx_id}", f"read_pointer={self.read_pointer}"]
        if self.write_pointer != self.tx_id:
            parts.append(f"write_pointer={self.write_pointer}")
        parts += [f"invalids={_short(self.invalids)}", f"in_progress={_short(self.in_progress)}"]
        first_short = "none" if self.first_short_in_progress == NO_TX_IN_PROGRESS else self.first_short_in_progress
        parts += [f"first_short={first_short}", self.type.name]
        if self.checkpoint_write_pointers:
            parts.append(f"checkpoints={_short(self.checkpoint_write_pointers)}")
        if self.visibility_level is not VisibilityLevel.SNAPSHOT:
            parts.append(self.visibility_level.name)
        return f"Transaction({', '.join(parts)})"


ALL_VISIBLE_LATEST = Transaction(LONG_MAX, LONG_MAX, (), (), NO_TX_IN_PROGRESS)
"""Tephra's "see every committed version" transaction (read pointer and id are Long.MAX_VALUE)."""
