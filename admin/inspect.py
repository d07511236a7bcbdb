"""tms-admin topic tail | publish | stats: look into a topic without consuming it, feed it from a
script, and see its size, rates and the lag of its subscriptions."""

from __future__ import annotations

import json
import queue
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, BinaryIO

import click

from tms_hbase import Record, TopicId
from tms_hbase.errors import InvalidArgument, TopicNotFound
from tms_hbase.model.inspection import Cursor, Entry
from tms_hbase.ops.signals import stop_event

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option
from .shown import key_and_headers, key_and_headers_text, shown, text
from .times import TIME_HELP, iso, parse_time
from .topics import topic_arg
from .tx import server_option

if TYPE_CHECKING:  # the client and the Thrift clients are imported by the commands, when they run
    from tms_hbase import MessagingClient
    from tms_hbase.model.stats import TopicStats

DEFAULT_LAST = 10
LINGER_SECONDS = 0.05  # a publish waits this long for more lines (kcat's linger is 5 ms, nats pub sends each)
FOLLOW_SECONDS = 0.5


@click.command()
@topic_arg
@click.option(
    "--from-time",
    "from_time",
    metavar="TIME",
    help=f"Start at the first message published at TIME or later ({TIME_HELP}).",
)
@click.option("--from-id", "from_id", metavar="HEX", help="Start at this message id (as tail shows it).")
@click.option("--last", type=click.IntRange(min=1), metavar="N", help=f"The last N messages [default: {DEFAULT_LAST}].")
@click.option("--follow", "-f", is_flag=True, help="Keep showing new messages until interrupted (Ctrl-C).")
@click.option(
    "--transactional",
    is_flag=True,
    help="Show what a transactional reader sees: no rolled-back or invalid messages; stop at the first "
    "message of a transaction still in progress (with --follow, wait there).",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "raw"]),
    default="text",
    show_default=True,
    help="text: one line per message; json: one JSON object per line; raw: the payloads only.",
)
@server_option
@json_option
@pass_settings
@handle_errors
def tail(
    settings: Settings,
    topic: TopicId,
    from_time: str | None,
    from_id: str | None,
    last: int | None,
    follow: bool,
    transactional: bool,
    fmt: str,
    tx_server: str | None,
    as_json: bool,
) -> None:
    """Show a topic's messages without consuming them: id, publish time, transaction write pointer and
    state (committed, in progress, invalid, rolled back), size, key (key=...) and headers (name=value),
    and payload (text, or hex if binary).

    Transaction states come from the transaction server with --tx-server (or TMS_TX_SERVER), else
    from the transaction state stored in HBase. Corrupt rows are shown as such. Expired messages are
    not shown. --json is --format json.
    """
    from tms_hbase.isolation.fate import snapshot_from_server
    from tms_hbase.tx.client import TransactionClient

    fmt = "json" if as_json else fmt
    try:
        start_id = None if from_id is None else bytes.fromhex(from_id)
    except ValueError:
        raise InvalidArgument(f"bad --from-id {from_id!r}: expected the hex id tail shows") from None
    start_time = None if from_time is None else parse_time(from_time)
    if start_id is None and start_time is None and last is None:
        last = DEFAULT_LAST
    stop = stop_event() if follow else threading.Event()
    with settings.client() as client:
        meta = client.get_topic(topic)
        inspector = client.admin.inspector()
        cursor = inspector.start(topic, meta.generation, from_id=start_id, from_time=start_time, last=last)
        out = _printer(fmt)
        with TransactionClient(tx_server or None, timeout_seconds=settings.timeout) as tx_client:
            view = client.admin.tx_state if tx_server is None else lambda: snapshot_from_server(tx_client)
            while True:
                for entry in inspector.entries(
                    topic, meta.generation, cursor, ttl=meta.ttl, view=view, transactional=transactional
                ):
                    out(entry)
                    cursor = Cursor(entry.position + 1) if entry.error else Cursor(entry.position, entry.index + 1)
                if not follow or stop.wait(FOLLOW_SECONDS):
                    return
                if client.get_topic(topic).generation != meta.generation:  # TopicNotFound once deleted
                    raise TopicNotFound(f"{topic} (generation {meta.generation})")


def _printer(fmt: str) -> Callable[[Entry], None]:
    if fmt == "raw":
        return _raw
    if fmt == "json":
        return lambda entry: click.echo(json.dumps(_as_json(entry), sort_keys=True))
    return lambda entry: click.echo(_as_text(entry))


def _raw(entry: Entry) -> None:
    if entry.error:
        click.echo(f"warning: {entry.error}", err=True)
        return
    sys.stdout.buffer.write((entry.payload or b"") + b"\n")
    sys.stdout.buffer.flush()


def _as_json(entry: Entry) -> dict:
    if entry.error:
        return {"position": entry.position, "corrupt": entry.error}
    payload = entry.payload or b""
    return {
        "id": entry.id.hex(),
        "position": entry.position,
        "index": entry.index,
        "publish_time": entry.publish_time,
        "publish_time_iso": iso(entry.publish_time),
        "tx_write_pointer": entry.tx_pointer,
        "tx_state": entry.state,
        "size": len(payload),
        "payload": text(payload),
        "payload_hex": payload.hex(),
        **key_and_headers(entry.key, entry.headers),
    }


def _as_text(entry: Entry) -> str:
    if entry.error:
        return f"!! {entry.error}"
    payload = entry.payload or b""
    tx = "-" if entry.tx_pointer is None else f"tx {abs(entry.tx_pointer)} {entry.state}"
    extra = key_and_headers_text(entry.key, entry.headers)
    return f"{entry.id.hex()}  {iso(entry.publish_time)}  {tx}  {len(payload)} B  {extra}{shown(payload)}"


@click.command()
@topic_arg
@click.option(
    "--file",
    "path",
    type=click.File("rb"),
    default="-",
    show_default=True,
    help="Read messages from this file instead of stdin (- is stdin).",
)
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=100,
    show_default=True,
    help="Messages per publish at most (one batch is stored whole or not at all). Lines are sent as they come: "
    f"a batch goes once the input pauses for {LINGER_SECONDS * 1000:.0f} ms.",
)
@click.option(
    "--key-delimiter",
    "-K",
    "key_delimiter",
    metavar="DELIM",
    help="Each line is KEY DELIM PAYLOAD (split at the first DELIM, as kcat's -K); a line without DELIM has no key.",
)
@click.option(
    "--header",
    "-H",
    "headers",
    multiple=True,
    metavar="NAME=VALUE",
    help="A header of every message (repeat for more; a name may repeat).",
)
@click.option(
    "--transactional",
    is_flag=True,
    help="Publish everything in one transaction of the transaction server (--tx-server or TMS_TX_SERVER): "
    "transactional readers see all of it at once, or none of it if the command fails. Needed on a topic "
    "with tx.mode transactional; refused on one with tx.mode non-transactional.",
)
@server_option
@json_option
@pass_settings
@handle_errors
def publish(
    settings: Settings,
    topic: TopicId,
    path: BinaryIO,
    batch: int,
    key_delimiter: str | None,
    headers: tuple[str, ...],
    transactional: bool,
    tx_server: str | None,
    as_json: bool,
) -> None:
    """Publish one message per line of stdin (or --file), e.g. `seq 10 | tms-admin topic publish ns:t`,
    or with keys and headers: `echo 'order-7:paid' | tms-admin topic publish ns:t -K: -H source=shop`.

    The newline ending each line is not part of the message; empty lines are skipped. With
    --transactional, the lines are stored as they come under one long transaction, and made visible
    when the input ends (the transaction is committed); if anything fails it is rolled back.
    """
    published = batches = 0
    message = _message_of(key_delimiter, _headers(headers))
    with settings.client() as client:
        mode = client.get_topic(topic).tx_mode
        if mode == "transactional" and not transactional:  # before reading any input
            raise InvalidArgument(f"topic {topic} is transactional-only (tx.mode=transactional): add --transactional")
        if mode == "non-transactional" and transactional:
            raise InvalidArgument(
                f"topic {topic} is non-transactional-only (tx.mode=non-transactional): leave out --transactional"
            )
        if transactional:
            published, batches = _publish_in_a_transaction(
                client, topic, _batches(path, batch, client.max_batch_bytes, message), tx_server, settings.timeout
            )
        else:
            for messages in _batches(path, batch, client.max_batch_bytes, message):
                client.publish(topic, messages)
                published += len(messages)
                batches += 1
    emit(
        as_json,
        {"topic": str(topic), "published": published, "batches": batches, "transactional": transactional},
        lambda d: (
            f"published {d['published']} messages to {d['topic']} in {d['batches']} batches"
            + (" in one transaction" if d["transactional"] else "")
        ),
    )


def _publish_in_a_transaction(
    client: MessagingClient,
    topic: TopicId,
    lines: Iterator[list[bytes | Record]],
    tx_server: str | None,
    timeout: float,
) -> tuple[int, int]:
    """Publish the lines under one long transaction (its messages go to the payload table as they come,
    so the input may be long) and commit it at the end; abort it, rolling back, on any failure."""
    from tms_hbase.client_tx import TransactionalPublisher
    from tms_hbase.tx.client import TransactionClient
    from tms_hbase.txaware.context import TransactionContext

    published = batches = 0
    with TransactionClient(tx_server or None, timeout_seconds=timeout) as tx_client:
        publisher = TransactionalPublisher(client)
        context = TransactionContext(tx_client, publisher)
        context.start_long()
        try:
            for messages in lines:
                publisher.publish(topic, messages)
                published += len(messages)
                batches += 1
        except BaseException:
            context.abort()
            raise
        context.finish()
    return published, batches


def _headers(given: tuple[str, ...]) -> tuple[tuple[str, bytes], ...]:
    """-H NAME=VALUE options as headers (the value UTF-8)."""
    headers = []
    for option in given:
        name, sep, value = option.partition("=")
        if not sep or not name:
            raise InvalidArgument(f"bad --header {option!r}: expected NAME=VALUE")
        headers.append((name, value.encode()))
    return tuple(headers)


def _message_of(delimiter: str | None, headers: tuple[tuple[str, bytes], ...]) -> Callable[[bytes], bytes | Record]:
    """How a line becomes a message: its bytes, or a Record with the key before ``delimiter`` and ``headers``."""
    if delimiter == "":
        raise InvalidArgument("bad --key-delimiter: it must not be empty")
    if delimiter is None and not headers:
        return lambda line: line
    split = None if delimiter is None else delimiter.encode()

    def message(line: bytes) -> bytes | Record:
        key, sep, payload = (None, b"", line) if split is None else line.partition(split)
        return Record(payload, key, headers) if sep else Record(line, None, headers)

    return message


def _batches(
    stream: BinaryIO, size: int, max_bytes: int, message_of: Callable[[bytes], bytes | Record]
) -> Iterator[list[bytes | Record]]:
    """Lines as batches of at most ``size`` messages and ``max_bytes`` bytes; a batch goes as soon as the input
    pauses for :data:`LINGER_SECONDS` (lines piped one at a time are sent one at a time, as kcat and nats pub do)."""
    from tms_hbase.model.rows import batch_size

    batch: list[bytes | Record] = []
    used = 0
    for number, line in _lines(stream):
        if line is None:  # the input paused
            if batch:
                yield batch
                batch, used = [], 0
            continue
        raw = line[:-1] if line.endswith(b"\n") else line
        if not raw:
            continue
        message = message_of(raw)
        cost = batch_size([message])
        if cost > max_bytes:
            raise InvalidArgument(f"line {number} is {len(raw)} bytes, over the batch limit of {max_bytes}")
        if batch and (len(batch) == size or used + cost > max_bytes):
            yield batch
            batch, used = [], 0
        batch.append(message)
        used += cost
        if size == 1:
            yield batch
            batch, used = [], 0
    if batch:
        yield batch


def _lines(stream: BinaryIO) -> Iterator[tuple[int, bytes | None]]:
    """(number, line) of each line as it comes, and (number, None) when no line came for LINGER_SECONDS; read
    by a thread, so a line that waits on a slow producer does not hold the ones before it."""
    lines: queue.Queue[bytes | BaseException | None] = queue.Queue(maxsize=10_000)

    def read() -> None:
        try:
            for line in stream:
                lines.put(line)
        except BaseException as exc:  # handed to the caller
            lines.put(exc)
        lines.put(None)

    threading.Thread(target=read, name="publish-input", daemon=True).start()
    number = 0
    while True:
        try:
            item = lines.get(timeout=LINGER_SECONDS)
        except queue.Empty:
            yield number, None
            item = lines.get()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        number += 1
        yield number, item


@click.command()
@topic_arg
@json_option
@pass_settings
@handle_errors
def stats(settings: Settings, topic: TopicId, as_json: bool) -> None:
    """A topic's size, first and last message, publish rates (1, 5, 15 minutes) and the lag of each
    subscription, from a few reads (never a scan of the topic)."""
    with settings.client() as client:
        data = stats_dict(client.topic_stats(topic))
    emit(as_json, data, _describe)


def stats_dict(s: TopicStats) -> dict:
    return {
        "topic": str(s.topic),
        "generation": s.generation,
        "ttl": s.ttl,
        "messages": s.messages,
        "uncommitted": s.uncommitted,
        "bytes": s.bytes,
        "exact": s.exact,
        "bytes_exact": s.bytes_exact,
        "published": s.published,
        "first": {
            "position": s.first_position,
            "publish_time": s.first_publish_time,
            "publish_time_iso": iso(s.first_publish_time),
        },
        "last": {
            "position": s.last_position,
            "publish_time": s.last_publish_time,
            "publish_time_iso": iso(s.last_publish_time),
        },
        "rates": {str(w): rate for w, rate in s.rates.items()},
        "subscriptions": [
            {
                "name": name,
                "position": None if mark is None else mark.hex(),
                "lag_messages": lag.messages,
                "lag_seconds": lag.seconds,
                "lag_held": lag.held,
                "exact": lag.exact,
            }
            for name, mark, lag in s.subscriptions
        ],
    }


def _describe(d: dict) -> str:
    approx = "" if d["exact"] else " (approximate: rows without totals, or the transaction state not read)"
    uncommitted = f" (and {d['uncommitted']:,} of transactions in progress)" if d["uncommitted"] else ""
    lines = [
        f"topic          {d['topic']} (generation {d['generation']}, ttl {d['ttl']} s)",
        f"messages       {d['messages']:,}{uncommitted}{approx}",
        f"bytes          {d['bytes']:,}{'' if d['bytes_exact'] else ' (estimated from the last row)'}",
        f"first          {_end(d['first'])}",
        f"last           {_end(d['last'])}",
        "publish rate   " + ", ".join(f"{int(w) // 60} min {r:,.1f}/s" for w, r in d["rates"].items()),
    ]
    if d["subscriptions"]:
        lines.append("subscriptions")
        lines += [
            f"  {s['name']:<24} lag {s['lag_messages']:>12,} messages  {s['lag_seconds']:>10,.1f} s"
            + (f"  ({s['lag_held']:,} more held by a transaction in progress)" if s["lag_held"] else "")
            for s in d["subscriptions"]
        ]
    return "\n".join(lines)


def _end(end: dict) -> str:
    if end["position"] is None:
        return "-"
    return f"position {end['position']}, published {end['publish_time_iso']}"
