"""What each console screen shows, read through the library: plain JSON-ready data.

These functions are synchronous library code (run as the gateway's library calls, on its event loop).
They take the worker's ``MessagingClient`` and the :class:`~.session.Viewer` and show only the topics the viewer
may see. Times are ms since the epoch, ids are hex.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from itertools import islice

from tms_hbase import MessagingClient, TopicId, TopicMetadata
from tms_hbase.errors import InvalidArgument, TmsError
from tms_hbase.model.dead_letter import DeadLetter
from tms_hbase.model.inspection import Entry
from tms_hbase.model.message import Message
from tms_hbase.model.message_id import MessageId
from tms_hbase.model.retry import Retry
from tms_hbase.model.stats import Lag, SharedStats
from tms_hbase.model.subscription import Subscription
from tms_hbase.model.transaction import Transaction
from tms_hbase.sweep.status import sweeper_state
from tms_hbase.tx.client import TransactionClient

from .history import History
from .session import Viewer

MAX_ROWS = 500  # messages one browser page shows at most
PREVIEW_COUNT_CAP = 10_000  # messages counted for a reset preview before it says "at least"
RATE_WINDOWS = (60, 300, 900)
TX_PROBE_SECONDS = 1.0
CHARTED_LAGS = 4  # the topic's chart shows the lag of the subscriptions furthest behind
RECENT_SWEEPS = 5  # the overview's most recent complete region sweeps
OPEN_SHOWN = 5  # the overview's oldest open transactions


def overview(client: MessagingClient) -> dict:
    """The installation, HBase's reachability and round trip, the tail-cache setting, the sweeper's
    last complete sweep and blocking regions, and the transaction server's status."""
    started = time.perf_counter()
    hbase: dict = {"address": client.installation.address}
    try:
        client.ping()
        hbase.update(reachable=True, latency_ms=round((time.perf_counter() - started) * 1000, 2))
    except TmsError as exc:
        hbase.update(reachable=False, error=str(exc))
        return {"prefix": client.installation.prefix, "hbase": hbase}
    setting = client.admin.tail_cache_setting()
    sweeper = sweeper_summary(client)
    state: Transaction = client.admin.tx_state()
    return {
        "prefix": client.installation.prefix,
        "hbase": hbase,
        "tail_cache": None
        if setting is None
        else {
            "seconds": setting.tail_cache_seconds,
            "previous": setting.previous,
            "changed_at": setting.changed_at,
            "transition_ends": setting.transition_ends(),
        },
        "sweeper": sweeper,
        "tx_server": tx_server_status(),
        "open_transactions": open_transactions(state),
    }


def sweeper_summary(client: MessagingClient) -> dict:
    """The sweeper's health in a few numbers: the oldest last complete sweep of any region (every region
    must be swept for the invalid list to be pruned), the regions never swept, the prune bound, and the
    most recent complete region sweeps with their rows (one record per region: the cost grows with the
    regions, never with the topics)."""
    state = sweeper_state(client.installation)
    completed = [r["completed"] for r in state["regions"] if r["completed"] is not None]
    never = [r["region"] for r in state["regions"] if r["completed"] is None]
    recent = sorted((r for r in state["regions"] if r["completed"] is not None), key=lambda r: -r["completed"])
    return {
        "regions": len(state["regions"]),
        "recent": [
            {"region": r["region"], "completed": r["completed"], "rows": r["rows"]} for r in recent[:RECENT_SWEEPS]
        ],
        "never_swept": never,
        "oldest_sweep": min(completed) if completed else None,
        "newest_sweep": max(completed) if completed else None,
        "global_bound": pointer_text(state["pruning"]["global_bound"]),
        "blocking": state["pruning"]["blocking"],
        "invalid": len(state["pruning"]["invalid"]),
        "prunable": len(state["pruning"]["prunable"]),
    }


def open_transactions(state: Transaction) -> dict:
    """The transactions in progress as committed-only readers see them (the state stored in HBase, one
    read): how many, and the oldest :data:`OPEN_SHOWN` with when each started. Each one holds back the
    exclusive subscriptions whose mark is before its first message (``Lag.held``)."""
    pointers = sorted(state.in_progress)
    return {
        "count": len(pointers),
        "oldest": [{"write_pointer": str(p), "started": p // 1_000_000} for p in pointers[:OPEN_SHOWN]],
    }


def tx_server_status() -> dict:
    """The answer of the transaction server (``$TMS_TX_SERVER``, else Tephra's port on this host) to a
    status call within :data:`TX_PROBE_SECONDS`, tried once: a refused connection is the answer (retried, it
    held every overview for a few hundred milliseconds while no server runs)."""
    tx = TransactionClient(timeout_seconds=TX_PROBE_SECONDS, retry=Retry.never())
    try:
        with tx:
            status = tx.status()
            snapshot = tx.snapshot()
        return {
            "address": tx.address,
            "reachable": True,
            "status": status,
            "read_pointer": pointer_text(snapshot.read_pointer),
            "write_pointer": pointer_text(snapshot.write_pointer),
            "in_progress": len(snapshot.in_progress),
            "invalid": len(snapshot.invalid),
        }
    except (TmsError, OSError) as exc:
        return {"address": tx.address, "reachable": False, "error": str(exc)}


def topic_list(metadata: list[TopicMetadata], viewer: Viewer) -> list[dict]:
    """Every topic of ``metadata`` (``client.list_topic_metadata``: one scan) the viewer may see, from the
    metadata alone: sizes and rates come with :func:`topic_detail`."""
    return [
        {
            **_meta(meta),
            "name": str(meta.topic),
            "may_change": viewer.may_change(meta.topic.namespace, meta.topic.topic),
        }
        for meta in metadata
        if viewer.may_see(meta.topic.namespace, meta.topic.topic)
    ]


def subscription_names(client: MessagingClient, viewer: Viewer, wanted: Callable[[str], bool]) -> list[dict]:
    """The subscriptions of the topics the viewer may see whose names are ``wanted`` (the list's filter), in their
    current generation, each as ``topic``, ``name`` and the topic's ``row`` of :func:`topic_list`: one scan of
    the subscriptions table and one read of the metadata of the topics named (not of every topic), no numbers
    read."""
    found = client.admin.subscription_names()
    topics = sorted({t for t, _, _ in found if wanted(str(t)) and viewer.may_see(t.namespace, t.topic)})
    rows = {row["name"]: row for row in topic_list(client.admin.topics_metadata(topics), viewer)}
    return [
        {"topic": str(topic), "name": name, "row": rows[str(topic)]}
        for topic, generation, name in found
        if str(topic) in rows and rows[str(topic)]["generation"] == generation
    ]


def _meta(meta: TopicMetadata) -> dict:
    return {
        "namespace": meta.topic.namespace,
        "topic": meta.topic.topic,
        "generation": meta.generation,
        "ttl": meta.ttl,
        "ordering": meta.ordering,
        "tx_mode": meta.tx_mode,
        "properties": {k: v for k, v in meta.properties.items() if k not in ("generation", "ordering")},
    }


def topic_detail(client: MessagingClient, topic: TopicId, history: History) -> dict:
    """The topic's metadata, size, publish rates, last publish and its subscriptions with their lag,
    and the samples of the published count and lags this worker has taken (the charts); ``read_at``:
    when (HBase's clock, ms)."""
    read_at = client.hbase_clock.now_ms()
    meta = client.get_topic(topic)
    stats, subscriptions = client.admin.topic_report(topic, windows=RATE_WINDOWS)
    lags = {name: lag for name, _mark, lag in stats.subscriptions}
    history.record(str(topic), stats.published, {name: (lag.messages, lag.seconds) for name, lag in lags.items()})
    return {
        **_meta(meta),
        "read_at": read_at,
        "messages": stats.messages,
        "uncommitted": stats.uncommitted,
        "bytes": stats.bytes,
        "exact": stats.exact,
        "bytes_exact": stats.bytes_exact,
        "published": stats.published,
        "first_publish": stats.first_publish_time,
        "last_publish": stats.last_publish_time,
        "rates": {str(window): rate for window, rate in stats.rates.items()},
        "subscriptions": [_subscription(s, lags.get(s.name)) for s in subscriptions],
        "history": history.samples(str(topic)),
        "lag_history": {
            name: history.lag_samples(str(topic), name)
            for name in sorted(lags, key=lambda n: lags[n].messages, reverse=True)[:CHARTED_LAGS]
        },
    }


def topic_summary(detail: dict) -> dict:
    """A topic's numbers for a row of the topic list, from its :func:`topic_detail`: size, last publish, the
    publish rate over the last minute and the worst lag of its subscriptions."""
    lags = [s["lag"] for s in detail["subscriptions"] if s["lag"] is not None]
    return _summary(
        detail["messages"],
        detail["bytes"],
        detail["last_publish"],
        detail["rates"].get(str(RATE_WINDOWS[0])),
        len(detail["subscriptions"]),
        [(lag["messages"], lag["seconds"]) for lag in lags],
        detail["read_at"],
    )


def topics_numbers(client: MessagingClient, topics: list[TopicId], history: History | None = None) -> dict[str, dict]:
    """What :func:`topic_summary` shows of each of ``topics`` that exists, by name, from their statistics alone (one
    rate window): the reads behind rows of the topic list, half those of :func:`topic_detail`, the topics' metadata
    and subscriptions read for all of them at once (``client.admin.topic_reports``). With ``history``, the samples
    for the charts are taken too (not when sorting a long list reads every topic's numbers: :mod:`.catalog`)."""
    read_at = client.hbase_clock.now_ms()
    numbers = {}
    for stats, _ in client.admin.topic_reports(topics, windows=RATE_WINDOWS[:1]):
        lags = {name: (lag.messages, lag.seconds) for name, _mark, lag in stats.subscriptions}
        if history is not None:
            history.record(str(stats.topic), stats.published, lags)
        rate = stats.rates[RATE_WINDOWS[0]]
        numbers[str(stats.topic)] = _summary(
            stats.messages, stats.bytes, stats.last_publish_time, rate, len(lags), [*lags.values()], read_at
        )
    return numbers


def _summary(
    messages: int,
    size: int,
    last_publish: int | None,
    rate: float | None,
    subscriptions: int,
    lags: list[tuple[int, float]],
    read_at: int,
) -> dict:
    return {
        "messages": messages,
        "bytes": size,
        "last_publish": last_publish,
        "rate": rate,
        "subscription_count": subscriptions,
        "lag_messages": max((messages for messages, _ in lags), default=None),
        "lag_seconds": max((seconds for _, seconds in lags), default=None),
        "read_at": read_at,
    }


def subscription_rows(detail: dict) -> list[dict]:
    """A topic's subscriptions as rows of the list of every subscription, from its :func:`topic_detail`."""
    topic = f"{detail['namespace']}:{detail['topic']}"
    return [
        {
            "topic": topic,
            "name": s["name"],
            "kind": "exclusive" if s["shared"] is None else "shared",
            "lag_messages": None if s["lag"] is None else s["lag"]["messages"],
            "lag_seconds": None if s["lag"] is None else s["lag"]["seconds"],
            "held": None if s["lag"] is None else s["lag"]["held"],
            "consumers": (1 if s["owner"] else 0) if s["shared"] is None else s["shared"]["consumers"],
            "in_flight": None if s["shared"] is None else s["shared"]["in_flight"],
            "dead_letters": None if s["shared"] is None else s["shared"]["dead_lettered"],
            "scheduled": None if s["shared"] is None else s["shared"]["scheduled"],
            "late_acks": None if s["shared"] is None else s["shared"]["late_acks"],
            "ordering": None if s["shared"] is None else s["shared"]["ordering"],
            "read_at": detail["read_at"],
        }
        for s in detail["subscriptions"]
    ]


def _subscription(s: Subscription, lag: Lag | None) -> dict:
    shared = s.shared
    return {
        "name": s.name,
        "position": None if s.position is None else s.position.hex(),
        "created_at": s.created_at,
        "updated_at": s.updated_at,
        "owner": s.owner,
        "lease_expires": s.lease_expires,
        "pending_tx": None if s.pending is None else str(s.pending),
        "lag": None
        if lag is None
        else {"messages": lag.messages, "held": lag.held, "seconds": lag.seconds, "exact": lag.exact},
        "shared": None if shared is None else _shared_numbers(shared),
    }


def _shared_numbers(shared: SharedStats) -> dict:
    """A shared subscription's numbers and settings by the names ``tms-admin sub get --json`` gives them (all
    of :class:`SharedStats`: scheduled messages, late settlements refused, key order included)."""
    return {**asdict(shared), "dead_letter": None if shared.dead_letter is None else str(shared.dead_letter)}


def subscription_detail(client: MessagingClient, viewer: Viewer, topic: TopicId, name: str, history: History) -> dict:
    """One subscription: its mark, consumer and lease, lag, the lag samples, and for a shared one the
    messages in flight and its dead letters not replayed yet (when the viewer may read the dead-letter topic;
    ``dead_letters_error`` instead when it holds a message that is no dead letter)."""
    subscription = client.get_subscription(topic, name)
    lag = client.lag(topic, name)
    history.record_lag(str(topic), name, lag.messages, lag.seconds)
    detail = _subscription(subscription, lag)
    detail["history"] = history.lag_samples(str(topic), name)
    detail["now"] = client.hbase_clock.now_ms()
    if subscription.shared is not None:
        detail["in_flight"] = [
            {
                "id": p.id.hex(),
                "owner": p.owner,
                "deadline": p.deadline,
                "deliveries": p.deliveries,
                "publish_time": p.publish_time,
                "state": p.state,
            }
            for p in client.pending(topic, name, limit=100)
        ]
        target = subscription.shared.dead_letter
        if target is not None and viewer.may_read(target.namespace, target.topic):
            try:
                detail["dead_letters"] = dead_letters(client, topic, name)
            except InvalidArgument as exc:  # a message there is no dead letter: say so, show the rest
                detail["dead_letters_error"] = f"{target}: {exc}"
    return detail


def dead_letters(client: MessagingClient, topic: TopicId, name: str) -> list[dict]:
    """The dead letters (at most :data:`MAX_ROWS`, oldest first) that subscription ``name`` of ``topic``
    sent to its dead-letter topic and that are not replayed yet (what ``client.admin.dead_letters`` lists)."""
    found = client.admin.dead_letters(topic, name, limit=MAX_ROWS)
    return [_letter(letter) for letter in found.letters if letter.subscription == name]


def replay_dead_letters(client: MessagingClient, topic: TopicId, name: str, *, dry_run: bool) -> dict:
    """The dead letters of the dead-letter topic of subscription ``name`` not replayed yet, published back to
    ``topic`` (``dry_run``: only listed), and those refused for naming another topic; see
    ``client.admin.dead_letters`` for what a replay guarantees."""
    found = client.admin.dead_letters(topic, name, replay=True, dry_run=dry_run)
    return {
        "dead_letter_topic": str(found.dead_letter_topic),
        "letters": [_letter(letter) for letter in found.letters],
        "refused": [{**_letter(r.letter), "reason": r.reason} for r in found.refused],
    }


def _letter(letter: DeadLetter) -> dict:
    return {**letter.head(), "payload": letter.payload[:256].hex()}


def messages(
    client: MessagingClient,
    topic: TopicId,
    *,
    from_id: bytes | None,
    from_time: int | None,
    last: int | None,
    limit: int,
) -> dict:
    """Up to ``limit`` messages (at most :data:`MAX_ROWS`) from an id, a time, or the last N, each with
    its transaction's state as the library's inspection reads it (rows it cannot decode are listed as
    corrupt, not skipped)."""
    generation, entries = inspect(client, topic, from_id=from_id, from_time=from_time, last=last)
    rows = [entry_row(e) for e in islice(entries, max(1, min(limit, MAX_ROWS)))]
    return {"topic": str(topic), "generation": generation, "messages": rows}


def inspect(
    client: MessagingClient, topic: TopicId, *, from_id: bytes | None, from_time: int | None, last: int | None
) -> tuple[int, Iterator[Entry]]:
    """The topic's generation, and its messages as the library's inspection reads them from an id, a time,
    the last N, or the beginning, to the tail."""
    meta = client.get_topic(topic)
    inspector = client.admin.inspector()
    cursor = inspector.start(topic, meta.generation, from_id=from_id, from_time=from_time, last=last)
    return meta.generation, inspector.entries(topic, meta.generation, cursor, ttl=meta.ttl, view=client.admin.tx_state)


def entry_row(e: Entry) -> dict:
    """A message as the console's screens show it: ids, payload, key and header values in hex."""
    return {
        "id": e.id.hex(),
        "position": e.position,
        "index": e.index,
        "publish_time": e.publish_time,
        "tx_pointer": pointer_text(e.tx_pointer),
        "state": "corrupt" if e.error is not None else e.state,  # None: not transactional
        "payload": None if e.payload is None else e.payload.hex(),
        "key": None if e.key is None else e.key.hex(),
        "headers": [[name, value.hex()] for name, value in e.headers],
        "error": e.error,
    }


def reset_preview(client: MessagingClient, topic: TopicId, name: str, start: str | int | bytes) -> dict:
    """What a reset to ``start`` ("earliest", "latest", a time in ms, or a message id) would do: how many
    messages consumed already it would deliver again, or how many not consumed yet it would skip, and
    the first few of them. The messages from the new start are counted up to :data:`PREVIEW_COUNT_CAP`."""
    mark = client.get_subscription(topic, name).position
    lag = client.lag(topic, name)

    def from_start(limit: int | None = None) -> Iterator[Message]:
        if isinstance(start, bytes):
            return client.fetch(topic, start_message=start, limit=limit)
        if isinstance(start, int):
            return client.fetch(topic, start_time_ms=start, limit=limit)
        return client.fetch(topic, limit=limit)  # earliest

    new, exact = (0, True) if start == "latest" else _count(from_start())
    if new >= lag.messages:
        sample = [] if new == lag.messages else [_row(m) for m in from_start(5)]
        return {"redeliver": new - lag.messages, "skip": 0, "exact": exact and lag.exact, "sample": sample}
    after_mark = (
        client.fetch(topic, start_message=mark, inclusive=False, limit=5) if mark else client.fetch(topic, limit=5)
    )
    sample = [_row(m) for m in after_mark]
    return {"redeliver": 0, "skip": lag.messages - new, "exact": exact and lag.exact, "sample": sample}


def _count(found: Iterator[Message]) -> tuple[int, bool]:
    """How many messages an iterator yields, up to :data:`PREVIEW_COUNT_CAP` (then not exact)."""
    count = sum(1 for _ in islice(found, PREVIEW_COUNT_CAP + 1))
    return min(count, PREVIEW_COUNT_CAP), count <= PREVIEW_COUNT_CAP


def _row(message: Message) -> dict:
    return {"id": message.id.hex(), "publish_time": message.publish_time, "payload": message.payload[:256].hex()}


def transactions(client: MessagingClient, viewer: Viewer) -> dict:
    """The transactions in progress and invalid (as the state in HBase has them), and for each one in
    progress the topics it wrote to and the subscriptions it holds back: a transactional reader stops
    at its first message, so every subscription whose mark is before it waits, since that message's
    publish time."""
    state: Transaction = client.admin.tx_state()
    open_pointers = set(state.in_progress)
    held: dict[int, list[dict]] = {p: [] for p in open_pointers}
    if open_pointers:
        for meta in client.list_topic_metadata(None):
            if meta.tx_mode == "non-transactional" or not viewer.may_see(meta.topic.namespace, meta.topic.topic):
                continue
            for pointer, row in _first_rows(client, meta, open_pointers).items():
                held[pointer].append(_held_back(client, meta.topic, meta.generation, row))
    return {
        "read_pointer": pointer_text(state.read_pointer),
        "in_progress": [
            {"write_pointer": str(p), "started": p // 1_000_000, "holds_back": held[p]} for p in sorted(open_pointers)
        ],
        "invalid": [{"write_pointer": str(p), "started": p // 1_000_000} for p in sorted(state.invalids)],
    }


def _first_rows(client: MessagingClient, meta: TopicMetadata, pointers: set[int]) -> dict[int, tuple[int, int]]:
    """The first batch row (position, publish time) each open transaction wrote to the topic."""
    span = client.slices.positions(meta.topic)
    found: dict[int, tuple[int, int]] = {}
    if not len(span):
        return found
    for batch in client.slices.batches(meta.topic, span.generation, span.first, span.last, transactional_only=True):
        pointer = batch.tx_write_pointer
        if pointer in pointers and pointer not in found:
            found[pointer] = (batch.position, batch.publish_time)
    return found


def _held_back(client: MessagingClient, topic: TopicId, generation: int, row: tuple[int, int]) -> dict:
    position, publish_time = row
    waiting = [
        s.name
        for s in client.list_subscriptions(topic)
        if s.shared is None and (s.position is None or MessageId.decode(s.position).position < position)
    ]
    return {
        "topic": str(topic),
        "position": position,
        "since": publish_time,
        "subscriptions": waiting,
        "generation": generation,
    }


def sweeper(client: MessagingClient) -> dict:
    """Per-region progress and the invalid-list prune bound (what ``tms-admin sweeper state`` shows),
    with each transaction pointer as text."""
    state = sweeper_state(client.installation)
    pruning = state["pruning"]
    return {
        "regions": [{**r, "prune_bound": pointer_text(r["prune_bound"])} for r in state["regions"]],
        "pruning": {
            **pruning,
            "global_bound": pointer_text(pruning["global_bound"]),
            "inactive_bound": pointer_text(pruning["inactive_bound"]),
            "regions": {name: pointer_text(bound) for name, bound in pruning["regions"].items()},
            "invalid": [str(p) for p in pruning["invalid"]],
            "prunable": [str(p) for p in pruning["prunable"]],
        },
    }


def pointer_text(pointer: int | None) -> str | None:
    """A transaction pointer as text: it is past the integers a browser's JSON keeps exact (2^53)."""
    return None if pointer is None else str(pointer)
