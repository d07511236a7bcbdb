"""Shared subscriptions: many consumers on one subscription, each message delivered to one of them at a
time, with per-message acknowledgement, redelivery after a deadline and dead letters (docs/shared.md).

``state`` (cells and keys, no I/O), ``store`` (their reads and compare-and-sets), ``consumer`` (receiving
and settling, the reaper), ``admin`` (create, numbers, in-flight listing, reset, delete).
The dead-letter envelope is :mod:`tms_hbase.model.dead_letter`.
"""

from tms_hbase.shared.consumer import SharedConsumer

__all__ = ["SharedConsumer"]
