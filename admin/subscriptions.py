"""tms-admin sub …: create, list, get, reset and delete subscriptions (durable consume marks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from tms_hbase import TopicId
from tms_hbase.errors import InvalidArgument, SubscriptionAlreadyExists

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option
from .times import TIME_HELP, iso, parse_time
from .topics import if_not_exists_option, topic_arg

if TYPE_CHECKING:
    from tms_hbase.stats import Lag
    from tms_hbase.subscriptions import Subscription

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
        data.update(lag_messages=lag.messages, lag_seconds=lag.seconds, lag_exact=lag.exact)
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
        lines.append(f"lag           {d['lag_messages']:,} messages, {d['lag_seconds']:,.1f} s")
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
@if_not_exists_option
@json_option
@pass_settings
@handle_errors
def create(settings: Settings, topic: TopicId, name: str, start: str, if_not_exists: bool, as_json: bool) -> None:
    """Create subscription NAME of a topic (exit code 4 if it exists, 0 with --if-not-exists)."""
    where = _start(start)
    with settings.client() as client:
        try:
            subscription, created = client.create_subscription(topic, name, where), True
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
        head = f"{'NAME':<{width}}  {'LAG(MSGS)':>12}  {'LAG(S)':>10}  CONSUMER"
        return "\n".join(
            [head]
            + [
                f"{r['name']:<{width}}  {r.get('lag_messages', 0):>12,}  {r.get('lag_seconds', 0.0):>10,.1f}  "
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
            subscription = client.reset_subscription(topic, name, start_time=parse_time(at_time), force=force)
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
