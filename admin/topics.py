"""tms-admin topic …: create, update, get, list and delete topics."""

from __future__ import annotations

import click

from tms_hbase import TopicId, TopicMetadata
from tms_hbase.errors import ConcurrentModification, InvalidArgument, TopicAlreadyExists
from tms_hbase.model.topic import GENERATION_KEY, ORDERING_KEY, ORDERINGS, TX_MODE_KEY, TX_MODES
from tms_hbase.ops.cli_options import LazyGroup

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option
from .times import DURATION_HELP, parse_duration


def _topic_id(_ctx: click.Context, _param: click.Parameter, value: str) -> TopicId:
    try:
        return TopicId.parse(value)
    except InvalidArgument as exc:
        raise click.BadParameter(str(exc)) from None


def _properties(
    ttl: str | None, tx_mode: str | None, pairs: tuple[str, ...], ordering: str | None = None
) -> dict[str, str]:
    props = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgument(f"bad --property {pair!r}: expected KEY=VALUE")
        props[key] = value
    if ttl is not None:
        props["ttl"] = str(parse_duration(ttl, "ttl"))
    if tx_mode is not None:
        props[TX_MODE_KEY] = tx_mode
    if ordering is not None:
        props[ORDERING_KEY] = ordering
    return props


def _as_dict(meta: TopicMetadata) -> dict:
    return {
        "topic": str(meta.topic),
        "namespace": meta.topic.namespace,
        "name": meta.topic.topic,
        "ttl": meta.ttl,
        "generation": meta.generation,
        "tx_mode": meta.tx_mode,
        "ordering": meta.ordering,
        "properties": dict(meta.properties),
    }


def _describe(data: dict) -> str:
    shown = ("ttl", "generation", TX_MODE_KEY, ORDERING_KEY)
    extra = {k: v for k, v in data["properties"].items() if k not in shown}
    lines = [
        f"topic       {data['topic']}",
        f"generation  {data['generation']}",
        f"ttl         {data['ttl']} s",
        f"tx.mode     {data['tx_mode']}",
        f"ordering    {data['ordering']}",
    ]
    lines += [f"{k:<11} {v}" for k, v in sorted(extra.items())]
    return "\n".join(lines)


topic_arg = click.argument("topic", metavar="NAMESPACE:TOPIC", callback=_topic_id)
ttl_option = click.option(
    "--ttl", metavar="DURATION", help=f"Message time-to-live (> 0): {DURATION_HELP} [default: 604800, 7d]."
)
tx_mode_option = click.option(
    "--tx-mode",
    type=click.Choice(TX_MODES),
    help="Which publishes and stores the topic takes (the tx.mode property): any (default), only "
    "transactional ones (with a write pointer), or only non-transactional ones.",
)
ordering_option = click.option(
    "--ordering",
    type=click.Choice(ORDERINGS),
    help="How the topic orders concurrent publishes (the ordering property, fixed for the generation): "
    "sequencer (default: scales with writers) or chain (dense positions 1, 2, 3, publish time "
    "non-decreasing; one writer's rate at most). See docs/ordering.md.",
)
if_not_exists_option = click.option(
    "--if-not-exists", is_flag=True, help="Succeed (exit code 0) if it exists already, changing nothing."
)
property_option = click.option(
    "--property", "-p", "pairs", multiple=True, metavar="KEY=VALUE", help="A topic property; repeat for several."
)


@click.group(
    cls=LazyGroup,
    lazy={  # (their module loads what they need: a read or a publish, not a topic's metadata)
        "tail": ("tms_hbase_admin.inspect:tail", "Show a topic's messages without consuming them."),
        "publish": ("tms_hbase_admin.inspect:publish", "Publish one message per line of stdin (or --file)."),
        "stats": ("tms_hbase_admin.inspect:stats", "A topic's size, first and last message, rates and lags."),
    },
)
def topic() -> None:
    """Create, inspect and delete topics."""


@topic.command()
@topic_arg
@ttl_option
@tx_mode_option
@ordering_option
@property_option
@if_not_exists_option
@json_option
@pass_settings
@handle_errors
def create(
    settings: Settings,
    topic: TopicId,
    ttl: str | None,
    tx_mode: str | None,
    ordering: str | None,
    pairs: tuple[str, ...],
    if_not_exists: bool,
    as_json: bool,
) -> None:
    """Create a topic (generation 1, or one more than before if it was deleted).

    Fails with exit code 4 if the topic exists (exit code 0 with --if-not-exists); its properties are
    then left unchanged, whatever this command gave.
    """
    properties = _properties(ttl, tx_mode, pairs, ordering)
    with settings.client() as client:
        try:
            meta, created = client.create_topic(topic, properties), True
        except TopicAlreadyExists:
            if not if_not_exists:
                raise
            meta, created = client.get_topic(topic), False
    data = {**_as_dict(meta), "created": created}
    emit(
        as_json,
        data,
        lambda d: (
            f"{'created' if d['created'] else 'exists already:'} {d['topic']} "
            f"(generation {d['generation']}, ttl {d['ttl']} s)"
        ),
    )


@topic.command()
@topic_arg
@ttl_option
@tx_mode_option
@property_option
@click.option(
    "--delete-property",
    "-d",
    "removed",
    multiple=True,
    metavar="KEY",
    help="Remove a property (ttl and tx.mode go back to their defaults); repeat for several.",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Replace all properties with the ones given (what is not given goes, or back to its default), "
    "as the REST API's PUT .../properties does.",
)
@json_option
@pass_settings
@handle_errors
def update(
    settings: Settings,
    topic: TopicId,
    ttl: str | None,
    tx_mode: str | None,
    pairs: tuple[str, ...],
    removed: tuple[str, ...],
    replace: bool,
    as_json: bool,
) -> None:
    """Change some of a topic's properties and keep the others, then print what changed.

    Sets what --ttl, --tx-mode and --property give and removes what --delete-property names; with
    --replace, the properties given become all of them. The generation and the ordering are kept.
    Applied only if nobody changed the topic meanwhile (read again and retried if someone did).
    Writers see a changed tx.mode within their topic-metadata cache age (1 s by default).
    """
    given = _properties(ttl, tx_mode, pairs)
    if replace and removed:
        raise InvalidArgument("give --replace or --delete-property, not both")
    if set(given) & set(removed):
        raise InvalidArgument(f"a property both set and deleted: {', '.join(sorted(set(given) & set(removed)))}")
    if not replace and not given and not removed:
        raise InvalidArgument("nothing to change: give --ttl, --tx-mode, --property or --delete-property")
    with settings.client() as client:
        for attempt in range(_UPDATE_ROUNDS):
            old = client.get_topic(topic)
            if replace:
                wanted = given
            else:
                wanted = {k: v for k, v in _settable(old).items() if k not in removed}
                wanted.update(given)
            try:
                meta = client.update_topic(topic, wanted, expected=old)
                break
            except ConcurrentModification:
                if attempt == _UPDATE_ROUNDS - 1:
                    raise
    data = _as_dict(meta)
    data["changes"] = _changes(old, meta)
    emit(as_json, data, _describe_changes)


_UPDATE_ROUNDS = 5


def _settable(meta: TopicMetadata) -> dict[str, str]:
    """The properties a user may give back in an update (not the generation or the ordering)."""
    return {k: v for k, v in meta.properties.items() if k not in (GENERATION_KEY, ORDERING_KEY)}


def _changes(old: TopicMetadata, new: TopicMetadata) -> dict[str, dict[str, str | None]]:
    """Every property whose value differs, as {"old": ..., "new": ...} (None: not set)."""
    before, after = _settable(old), _settable(new)
    return {
        key: {"old": before.get(key), "new": after.get(key)}
        for key in sorted(before.keys() | after.keys())
        if before.get(key) != after.get(key)
    }


def _describe_changes(data: dict) -> str:
    changes = data["changes"]
    if not changes:
        return f"{data['topic']} unchanged"
    lines = [f"updated {data['topic']}:"]
    for key, change in changes.items():
        old = "(not set)" if change["old"] is None else change["old"]
        new = "(not set)" if change["new"] is None else change["new"]
        lines.append(f"  {key}: {old} -> {new}")
    return "\n".join(lines)


@topic.command()
@topic_arg
@json_option
@pass_settings
@handle_errors
def get(settings: Settings, topic: TopicId, as_json: bool) -> None:
    """Show a topic's generation, TTL, tx.mode and properties."""
    with settings.client() as client:
        meta = client.get_topic(topic)
    emit(as_json, _as_dict(meta), _describe)


@topic.command(name="list")
@click.argument("namespace", required=False)
@json_option
@pass_settings
@handle_errors
def list_(settings: Settings, namespace: str | None, as_json: bool) -> None:
    """List the existing topics of NAMESPACE (of every namespace if left out).

    A topic whose metadata row does not decode is left out with a warning on stderr naming it
    (`topic get` of it says what is wrong).
    """
    with settings.client() as client:
        found = client.admin.scan_topics(namespace)
    for check in found.corrupt:
        click.echo(f"warning: skipped the corrupt metadata row of {check.where()}: {check.reason}", err=True)
    topics = [_as_dict(m) for m in found.topics]

    def table(rows: list[dict]) -> str:
        if not rows:
            return "no topics"
        width = max(len(r["topic"]) for r in rows)
        head = f"{'TOPIC':<{width}}  GENERATION  TTL(s)"
        return "\n".join([head] + [f"{r['topic']:<{width}}  {r['generation']:>10}  {r['ttl']}" for r in rows])

    emit(as_json, topics, table)


@topic.command()
@topic_arg
@json_option
@pass_settings
@handle_errors
def delete(settings: Settings, topic: TopicId, as_json: bool) -> None:
    """Delete a topic: its messages become unreadable at once and are swept later."""
    with settings.client() as client:
        client.delete_topic(topic)
    emit(as_json, {"deleted": str(topic)}, lambda d: f"deleted {d['deleted']}")
