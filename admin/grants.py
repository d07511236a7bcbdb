"""tms-admin grants ROLE: the HBase grants a role needs on the installation's tables (HBase's AccessController)."""

from __future__ import annotations

import click

from tms_hbase.config import table_prefix
from tms_hbase.installation.grants import ROLES
from tms_hbase.installation.grants import grants as role_grants

from .context import Settings, pass_settings
from .errors import handle_errors
from .output import emit, json_option


@click.command()
@click.argument("role", type=click.Choice(list(ROLES)))
@click.option(
    "--user",
    required=True,
    metavar="NAME",
    help="Who gets them: the HBase user name of the role's identity (a Kerberos principal's short name, e.g. "
    "'orders' for orders@EXAMPLE.COM), or '@group' for an HBase group.",
)
@json_option
@pass_settings
@handle_errors
def grants(settings: Settings, role: str, user: str, as_json: bool) -> None:
    """Print the HBase shell `grant` commands that let USER act as ROLE on the installation (--prefix), when
    HBase's AccessController is on: one per table, and per column where a role writes only some. Run them in
    `hbase shell` as an HBase superuser after `tms-admin init` (the admin role's namespace grant lets its user
    run init itself). --json gives them as data: table (or namespace), family and qualifier where narrower,
    permission letters (R read, W write, X exec, C create, A admin) and why the role needs them. Needs no
    connection to HBase."""
    prefix = table_prefix(settings.prefix)
    found = role_grants(role, prefix, user)
    data = {"role": role, "prefix": prefix, "user": user, "grants": [g.as_dict() for g in found]}

    def human(_: dict) -> str:
        width = max(len(g.shell()) for g in found)
        lines = [f"# HBase grants for {user} as {role} of the installation {prefix!r} (run in hbase shell)"]
        return "\n".join(lines + [f"{g.shell():<{width}}  # {g.why}" for g in found])

    emit(as_json, data, human)
