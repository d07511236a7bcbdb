"""tms-admin sub …: create, list, get, reset and delete subscriptions (durable consume marks); for shared
ones also pending, consume (with acks) and dead-letters (with replay)."""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import TYPE_CHECKING

import click

from tms_hbase import TopicId
from tms_hbase.errors import InvalidArgument, NotHeld, SubscriptionAlreadyExists
from tms_hbase.model import checks

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option
from .shown import key_and_headers, key_and_headers_text
from .times import TIME_HELP, iso, parse_time
from .topics import if_not_exists_option, topic_arg

if TYPE_CHECKING:
    from tms_hbase.model.dead_letter import DeadLetter
    from tms_hbase.model.message import Delivery
    from tms_hbase.model.stats import Lag
    from tms_hbase.model.subscription import Subscription
    from tms_hbase.shared.consumer import SharedConsumer

name_arg = click.argument("name")
force_option = click.option(
    "--force", is_flag=True, help="Go ahead even if a consumer is active (it stops with a lease-lost error)."
)


def _start(text: str) -> str | int:
    return text if text in ("earliest", "latest") else parse_time(text)


def as_dict(s: Subscription, lag: Lag | None = None) -> dict:
    data = {
        "topic": str(s.topic),
        "name": s.name,
        "generation": s.generation,
        "position": None if s.position is None else s.position.hex(),
        "updated_at": s.updated_at,
        "updated_at_iso": iso(s.updated_at),
        "created_at": s.created_at,
        "consumer": s.owner,
        "lease_expires": s.lease_expires,
        "pending": None if s.pending is None else s.pending.as_json(),
    }
    if lag is not None:
        data.update(lag_messages=lag.messages, lag_held=lag.held, lag_seconds=lag.seconds, lag_exact=lag.exact)
    if s.shared is not None:
        numbers = asdict(s.shared)
        numbers["dead_letter"] = None if s.shared.dead_letter is None else str(s.shared.dead_letter)
        data["shared"] = numbers
    return data


def _describe(d: dict) -> str:
    lines = [
        f"subscription  {d['name']} of {d['topic']} (generation {d['generation']})",
        f"position      {d['position'] or 'none (nothing consumed yet)'}",
        f"updated       {d['updated_at_iso']}",
        f"consumer      {d['consumer'] or 'none active'}",
    ]
    if d["pending"]:
        lines.append(f"pending       {d['pending']['position']} (transaction {d['pending']['tx']} not finished)")
    if "lag_messages" in d:
        held = f" ({d['lag_held']:,} more held by a transaction in progress)" if d["lag_held"] else ""
        lines.append(f"lag           {d['lag_messages']:,} messages{held}, {d['lag_seconds']:,.1f} s")
    if d.get("shared"):
        n = d["shared"]
        lines += [
            f"shared        ack timeout {n['ack_timeout_seconds']} s, max deliveries {n['max_deliveries']}, "
            f"dead letters to {n['dead_letter'] or 'nowhere (counted only)'}"
            + (f", ordered by {n['ordering']}" if n.get("ordering") else ""),
            f"messages      {n['waiting']:,} waiting, {n['in_flight']:,} in flight ({n['consumers']} consumers), "
            f"{n['due']:,} due again, {n['scheduled']:,} scheduled"
            + (f" (the next at {n['next_scheduled_ms']} ms)" if n["next_scheduled_ms"] else ""),
            f"settled       {n['acknowledged']:,} acknowledged, {n['dead_lettered']:,} dead-lettered, "
            f"{n['redelivered']:,} redeliveries, {n['late_acks']:,} late settlements refused",
            f"oldest        {n['oldest_unacked_seconds']:,.1f} s unacknowledged",
        ]
    return "\n".join(lines)


@click.group(name="sub")
def sub() -> None:
    """Subscriptions: durable consume marks of a topic, each with at most one active consumer."""


@sub.command()
@topic_arg
@name_arg
@click.option(
    "--start",
    default="earliest",
    show_default=True,
    metavar="earliest|latest|TIME",
    help=f"Consume every readable message, only new ones, or those published at TIME or later ({TIME_HELP}).",
)
@click.option("--shared", is_flag=True, help="A work queue: any number of consumers, per-message acks.")
@click.option(
    "--ack-timeout", "ack_timeout_seconds", type=float, help="Shared: seconds a delivery is held (default 30)."
)
@click.option("--max-deliveries", type=int, help="Shared: deliveries before a message is dead-lettered (default 5).")
@click.option("--dead-letter", metavar="NS:TOPIC", help="Shared: the topic dead letters go to (default: none).")
@click.option("--claim-size", type=int, help="Shared: positions a consumer reads at a time (default 16).")
@click.option(
    "--ordering",
    type=click.Choice(["key"]),
    help="Shared: 'key' delivers the messages of one key one at a time, in topic order (default: no order).",
)
@if_not_exists_option
@json_option
@pass_settings
@handle_errors
def create(
    settings: Settings,
    topic: TopicId,
    name: str,
    start: str,
    shared: bool,
    ack_timeout_seconds: float | None,
    max_deliveries: int | None,
    dead_letter: str | None,
    claim_size: int | None,
    ordering: str | None,
    if_not_exists: bool,
    as_json: bool,
) -> None:
    """Create subscription NAME of a topic (exit code 4 if it exists, 0 with --if-not-exists; then it is
    left as it is, whatever this command gave)."""
    where = _start(start)
    with settings.client() as client:
        try:
            subscription, created = (
                client.create_subscription(
                    topic,
                    name,
                    where,
                    shared=shared,
                    ack_timeout_seconds=ack_timeout_seconds,
                    max_deliveries=max_deliveries,
                    dead_letter=dead_letter,
                    claim_size=claim_size,
                    ordering=ordering,
                ),
                True,
            )
        except SubscriptionAlreadyExists:
            if not if_not_exists:
                raise
            subscription, created = client.get_subscription(topic, name), False
    data = {**as_dict(subscription), "created": created}
    emit(
        as_json,
        data,
        lambda d: f"{'created' if d['created'] else 'exists already:'} subscription {d['name']} of {d['topic']}",
    )


@sub.command(name="list")
@topic_arg
@json_option
@pass_settings
@handle_errors
def list_(settings: Settings, topic: TopicId, as_json: bool) -> None:
    """List a topic's subscriptions with their lag and active consumer."""
    with settings.client() as client:
        stats = client.topic_stats(topic, windows=())
        lags = {name: lag for name, _, lag in stats.subscriptions}
        rows = [as_dict(s, lags.get(s.name)) for s in client.list_subscriptions(topic)]

    def table(rows: list[dict]) -> str:
        if not rows:
            return "no subscriptions"
        width = max(4, *(len(r["name"]) for r in rows))
        head = f"{'NAME':<{width}}  {'LAG(MSGS)':>12}  {'HELD':>8}  {'LAG(S)':>10}  CONSUMER"
        return "\n".join(
            [head]
            + [
                f"{r['name']:<{width}}  {r.get('lag_messages', 0):>12,}  {r.get('lag_held', 0):>8,}  "
                f"{r.get('lag_seconds', 0.0):>10,.1f}  "
                f"{r['consumer'] or '-'}"
                for r in rows
            ]
        )

    emit(as_json, rows, table)


@sub.command()
@topic_arg
@name_arg
@json_option
@pass_settings
@handle_errors
def get(settings: Settings, topic: TopicId, name: str, as_json: bool) -> None:
    """Show a subscription: its mark, active consumer and lag (exit code 3 if it does not exist)."""
    with settings.client() as client:
        data = as_dict(client.get_subscription(topic, name), client.lag(topic, name))
    emit(as_json, data, _describe)


@sub.command()
@topic_arg
@name_arg
@click.option("--earliest", is_flag=True, help="Consume again from the first readable message.")
@click.option("--latest", is_flag=True, help="Skip everything published so far.")
@click.option(
    "--time", "at_time", metavar="TIME", help=f"From the first message published at TIME or later ({TIME_HELP})."
)
@click.option("--id", "message_id", metavar="HEX", help="From this message id (inclusive), as tail shows it.")
@force_option
@json_option
@pass_settings
@handle_errors
def reset(
    settings: Settings,
    topic: TopicId,
    name: str,
    earliest: bool,
    latest: bool,
    at_time: str | None,
    message_id: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """Move a subscription's mark backwards (consume again) or forwards (skip).

    Refused with exit code 4 while a consumer is active, unless --force.
    """
    if earliest + latest + (at_time is not None) + (message_id is not None) != 1:
        raise InvalidArgument("give exactly one of --earliest, --latest, --time or --id")
    where = "earliest" if earliest else "latest"
    with settings.client() as client:
        if at_time is not None:
            subscription = client.reset_subscription(topic, name, start_time_ms=parse_time(at_time), force=force)
        else:
            start = where if message_id is None else _hex(message_id)
            subscription = client.reset_subscription(topic, name, start, force=force)
    emit(as_json, as_dict(subscription), lambda d: f"reset subscription {d['name']} of {d['topic']}\n" + _describe(d))


@sub.command()
@topic_arg
@name_arg
@force_option
@json_option
@pass_settings
@handle_errors
def delete(settings: Settings, topic: TopicId, name: str, force: bool, as_json: bool) -> None:
    """Delete a subscription (refused with exit code 4 while a consumer is active, unless --force)."""
    with settings.client() as client:
        client.delete_subscription(topic, name, force=force)
    emit(as_json, {"deleted": name, "topic": str(topic)}, lambda d: f"deleted subscription {d['deleted']}")


def _hex(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except ValueError:
        raise InvalidArgument(f"bad message id {text!r}: expected the hex id tail shows") from None


@sub.command()
@topic_arg
@name_arg
@click.option("--limit", type=int, help="At most this many.")
@json_option
@pass_settings
@handle_errors
def pending(settings: Settings, topic: TopicId, name: str, limit: int | None, as_json: bool) -> None:
    """The messages of a shared subscription delivered and not settled: holder, deadline, deliveries."""
    with settings.client() as client:
        rows = [
            {
                "id": p.id.hex(),
                "consumer": p.owner,
                "state": p.state,
                "deadline": p.deadline,
                "deadline_iso": iso(p.deadline),
                "deliveries": p.deliveries,
                "publish_time": p.publish_time,
            }
            for p in client.pending(topic, name, limit=limit)
        ]

    def table(rows: list[dict]) -> str:
        if not rows:
            return "nothing in flight"
        head = f"{'ID':<40}  {'STATE':<8}  {'DELIVERIES':>10}  {'DEADLINE':<24}  CONSUMER"
        return "\n".join(
            [head]
            + [
                f"{r['id']:<40}  {r['state']:<8}  {r['deliveries']:>10}  {r['deadline_iso']:<24}  "
                f"{r['consumer'] or '-'}"
                for r in rows
            ]
        )

    emit(as_json, rows, table)


@sub.command()
@topic_arg
@name_arg
@click.option("--count", type=int, default=1, show_default=True, help="Messages to take (1 or more).")
@click.option("--wait", type=float, default=5.0, show_default=True, help="Seconds to wait for them (0 or more).")
@click.option("--ack/--no-ack", default=False, help="Acknowledge what is shown (else it is given back).")
@click.option(
    "--isolation",
    type=click.Choice(["committed", "uncommitted"]),
    default="committed",
    show_default=True,
    help="committed: committed messages only (rolled-back and invalid ones skipped, one in progress waits); "
    "uncommitted: every message as stored. Transaction states come from $TMS_TX_SERVER if set, else from HBase.",
)
@json_option
@pass_settings
@handle_errors
def consume(
    settings: Settings, topic: TopicId, name: str, count: int, wait: float, ack: bool, isolation: str, as_json: bool
) -> None:
    """Take messages from a shared subscription, show them (id, deliveries, key and headers, payload; --json
    has the key's and header values' exact bytes in hex) and acknowledge them (--ack) or give them back.

    What it took is held while it waits for more (its deadline extended past the wait), so a --wait
    longer than the ack timeout neither delivers a message twice nor counts a failed delivery; without
    --ack they are given back uncounted."""
    checks.positive_int("--count", count)
    if not math.isfinite(wait):
        raise InvalidArgument(f"bad --wait {wait!r}: expected a number of seconds >= 0")
    checks.seconds("--wait", wait)
    from tms_hbase.shared.state import MAX_HOLD_SECONDS

    with settings.client() as client, client.shared_consumer(topic, name, isolation=isolation) as consumer:
        got: list[Delivery] = []
        until = time.monotonic() + wait
        while len(got) < count and time.monotonic() < until:
            new = consumer.receive(count - len(got), max(0.0, until - time.monotonic()))
            if new and len(got) + len(new) < count:  # more to wait for: hold these past the wait
                hold = until - time.monotonic() + consumer.settings.ack_timeout_ms / 1000
                new = [d for d in new if _hold(consumer, d, min(hold, MAX_HOLD_SECONDS))]
            got += new
        rows = [
            {
                "id": d.id.hex(),
                "deliveries": d.deliveries,
                "publish_time": d.publish_time,
                "payload": _text(d.payload),
                **key_and_headers(d.key, d.headers),
            }
            for d in got
        ]
        lines = [
            f"{d.id.hex()}  #{d.deliveries}  {key_and_headers_text(d.key, d.headers)}{_text(d.payload)}" for d in got
        ]
        emit(as_json, rows, lambda _: "\n".join(lines))
        if ack and got:
            consumer.ack(*got)


def _hold(consumer: SharedConsumer, delivery: Delivery, seconds: float) -> bool:
    """Extend ``delivery``'s hold; False if it went to another consumer meanwhile (it is not shown then)."""
    try:
        consumer.extend(delivery, seconds)
    except NotHeld:
        return False
    return True


@sub.command(name="dead-letters")
@topic_arg
@name_arg
@click.option("--replay", is_flag=True, help="Publish each dead letter back to the subscription's topic.")
@click.option("--dry-run", is_flag=True, help="With --replay: show what would be replayed, change nothing.")
@click.option("--via", default="replay", show_default=True, help="The subscription of the dead-letter topic used.")
@click.option("--limit", type=int, default=1000, show_default=True, help="At most this many.")
@json_option
@pass_settings
@handle_errors
def dead_letters(
    settings: Settings, topic: TopicId, name: str, replay: bool, dry_run: bool, via: str, limit: int, as_json: bool
) -> None:
    """Show the dead letters that shared subscription NAME of NS:TOPIC sent to its dead-letter topic and that
    are not replayed yet, or publish them back to NS:TOPIC (--replay).

    Replaying reads the dead-letter topic through subscription --via (created at the earliest message if
    missing) and commits it after each message is published again: a dead letter is replayed at least
    once, as a new message of NS:TOPIC. It publishes only to NS:TOPIC: a letter naming another topic is
    refused (shown with the reason) and passed over. The web console's Replay does the same.
    """
    with settings.client() as client:
        found = client.admin.dead_letters(topic, name, replay=replay, dry_run=dry_run, via=via, limit=limit)
    data = {
        "dead_letter_topic": str(found.dead_letter_topic),
        "letters": [_letter(letter) for letter in found.letters],
        "refused": [{**_letter(r.letter), "reason": r.reason} for r in found.refused],
    }
    verb = "replayed" if replay and not dry_run else ("would replay" if replay else "dead letter")

    def text(data: dict) -> str:
        lines = [
            f"{verb} {r['id']} of {r['topic']} ({r['deliveries']} deliveries): {r['payload']}" for r in data["letters"]
        ]
        lines += [f"refused {r['id']} in {data['dead_letter_topic']}: {r['reason']}" for r in data["refused"]]
        return "\n".join(lines) or "no dead letters"

    emit(as_json, data, text)


def _letter(letter: DeadLetter) -> dict:
    return {**letter.head(), "payload": _text(letter.payload)}


def _text(payload: bytes) -> str:
    try:
        return payload.decode()
    except UnicodeDecodeError:
        return payload.hex()
