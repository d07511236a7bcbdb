"""Sweeping the subscriptions table: a deleted (or re-created) topic's subscriptions belong to its old
generation, so the old-generation rule removes them, as it removes that generation's messages."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from tms_hbase.consume.subscriptions import COLUMN
from tms_hbase.errors import HBaseError
from tms_hbase.model.topic import TopicId, TopicMetadata
from tms_hbase.storage.hbase import Table

from .rules import is_older_generation

log = logging.getLogger(__name__)


def sweep_subscriptions(
    table: Table,
    topics: Mapping[TopicId, TopicMetadata],
    split_key: Callable[[bytes], tuple[TopicId, int] | None],
    dry_run: bool = False,
) -> int:
    """Delete the subscription rows of dead generations (the table is small: one scan of row keys);
    returns how many there were. A missing table (subscriptions never used) is nothing to do."""
    try:
        rows = table.scan(columns=[COLUMN])
    except HBaseError as exc:
        log.debug("subscriptions not swept: %s", exc)
        return 0
    dead = []
    for key, _ in rows:
        where = split_key(key)
        if where is None:
            continue
        meta = topics.get(where[0])
        if meta is not None and is_older_generation(where[1], meta.generation):
            dead.append(key)
    if dead and not dry_run:
        table.delete_many(dead)
    return len(dead)
