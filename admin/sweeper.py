"""tms-admin sweeper …: the sweeper's recorded state."""

from __future__ import annotations

import click

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option


@click.group()
def sweeper() -> None:
    """What the sweeper has done, region by region."""


@sweeper.command()
@json_option
@pass_settings
@handle_errors
def state(settings: Settings, as_json: bool) -> None:
    """Per-region records (last complete sweep, checkpoint, prune bound), the regions blocking
    invalid-list pruning, and the global prune bound."""
    from tms_hbase.sweep.status import describe, sweeper_state

    with settings.client() as client:
        client.admin.require_installation()
        data = sweeper_state(client.installation)
    emit(as_json, data, describe)
