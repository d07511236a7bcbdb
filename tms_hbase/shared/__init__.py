"""Shared subscriptions: many consumers on one subscription, each message delivered to one of them at a
time, with per-message acknowledgement, redelivery after a deadline and dead letters (docs/shared.md).

``state`` (cells and keys, no I/O), ``store`` (their reads and compare-and-sets), ``consumer`` (receiving
and settling, the reaper), ``admin`` (create, numbers, in-flight listing, reset, delete),
``dead_letter`` (the dead-letter envelope).
"""

from tms_hbase.shared.consumer import SharedConsumer
from tms_hbase.shared.dead_letter import DeadLetter

__all__ = ["DeadLetter", "SharedConsumer"]
