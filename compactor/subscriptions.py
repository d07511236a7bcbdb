"""Sweeping the subscriptions table: a deleted (or re-created) topic's subscriptions belong to its old
generation, so the old-generation rule removes them, as it removes that generation's messages. That
covers every row under the generation's key prefix: subscription rows (``d:s``) and a shared
subscription's state rows (counters, floor, ranges and claims, keyed by the subscription's row key and a
0x00; ``tms_hbase/shared/state.py``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tms_hbase.errors import HBaseError
from tms_hbase.model.rows import generation_prefix
from tms_hbase.model.topic import TopicId, TopicMetadata
from tms_hbase.storage.hbase import KEYS_ONLY, Table

from .rules import is_older_generation

log = logging.getLogger(__name__)


def sweep_subscriptions(
    table: Table,
    topics: Mapping[TopicId, TopicMetadata],
    split_key: Callable[[bytes], tuple[TopicId, int] | None],
    dry_run: bool = False,
) -> int:
    """Delete every row of dead generations (one scan of row keys: the table holds subscriptions and the
    claims in flight); returns how many subscriptions there were (their state rows go with them,
    counted in the log). A missing table (subscriptions never used) is nothing to do."""
    try:
        rows = table.scan(filter=KEYS_ONLY)
    except HBaseError as exc:
        log.debug("subscriptions not swept: %s", exc)
        return 0
    dead, subscriptions = [], 0
    for key, _ in rows:
        where = split_key(key)
        if where is None:
            continue
        meta = topics.get(where[0])
        if meta is not None and is_older_generation(where[1], meta.generation):
            dead.append(key)
            subscriptions += b"\x00" not in key[len(generation_prefix(*where)) :]  # else a shared state row
    if dead and not dry_run:
        table.delete_many(dead)
    if len(dead) > subscriptions:
        log.info("%d state rows of shared subscriptions of dead generations", len(dead) - subscriptions)
    return subscriptions
