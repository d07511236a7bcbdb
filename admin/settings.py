"""tms-admin settings, and the tail-cache part of tms-admin init: the installation's tail-cache setting."""

from __future__ import annotations

import time

import click

from tms_hbase.errors import InvalidArgument
from tms_hbase.model.tail_cache import (
    DEFAULT_TAIL_CACHE_SECONDS,
    TailCacheSetting,
    minimum_grace,
    sweeper_tail_cache,
    writer_tail_cache,
)

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option

tail_cache_option = click.option(
    "--tail-cache-seconds",
    metavar="N",
    help="How long every writer may trust a remembered tail, in whole seconds (1-86400); it is also the "
    "budget for writer pauses and clock skew, and the sweeper's grace must be at least 4 x N. "
    f"Kept if already set; {DEFAULT_TAIL_CACHE_SECONDS} for a new installation. A change on a live "
    "installation takes 4 x the larger value to settle (docs/guarantees.md).",
)


def parse_seconds(text: str) -> int:
    """The option's text as whole seconds (range checked when stored)."""
    if not text.isdigit():
        raise InvalidArgument(f"bad tail-cache seconds {text!r}: expected a whole number of seconds")
    return int(text)


def describe(setting: TailCacheSetting | None) -> dict:
    """The setting as the operator needs it: the value, any transition, and the sweeper's minimum grace."""
    from tms_hbase.model.clock import now_ms

    now = now_ms()
    return {
        "tail_cache_seconds": None if setting is None else setting.tail_cache_seconds,
        "previous_tail_cache_seconds": None if setting is None else setting.previous,
        "changed_at_ms": None if setting is None else setting.changed_at,
        "transition_ends_ms": None if setting is None else setting.transition_ends(),
        "in_transition": setting is not None and setting.in_transition(now),
        "writers_trust_seconds": writer_tail_cache(setting, now),
        "sweeper_assumes_seconds": sweeper_tail_cache(setting, now),
        "minimum_grace_seconds": minimum_grace(setting, now),
    }


def describe_text(d: dict) -> str:
    if d["tail_cache_seconds"] is None:
        value = "not set (writers trust a tail for 1 s, sweepers assume 30 s; set it with tms-admin init)"
    else:
        value = f"{d['tail_cache_seconds']} s"
    lines = [f"tail-cache-seconds  {value}"]
    if d["in_transition"]:
        ends = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(d["transition_ends_ms"] / 1000))
        lines.append(
            f"transition          from {d['previous_tail_cache_seconds']} s until {ends}: writers trust "
            f"{d['writers_trust_seconds']} s, sweepers assume {d['sweeper_assumes_seconds']} s"
        )
    lines.append(f"minimum grace       {d['minimum_grace_seconds']} s (tms-sweeper --grace)")
    return "\n".join(lines)


@click.command()
@json_option
@pass_settings
@handle_errors
def settings(settings: Settings, as_json: bool) -> None:
    """Show the installation's tail-cache setting and the smallest grace the sweeper accepts now."""
    with settings.client() as client:
        emit(as_json, describe(client.admin.tail_cache_setting()), describe_text)
