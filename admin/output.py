"""How tms-admin prints: human-readable text by default, one JSON document with --json."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document for scripts.")


def emit(as_json: bool, data: Any, human: Callable[[Any], str]) -> None:
    """Print ``data`` as JSON, or as the text ``human(data)`` returns."""
    if as_json:
        click.echo(json.dumps(data, indent=2, sort_keys=True))
    else:
        text = human(data)
        if text:
            click.echo(text)
