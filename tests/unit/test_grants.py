"""The HBase grants of each role (tms_hbase.installation.grants, ``tms-admin grants``) and HBase's refusals read as
AccessDenied: what the grants say follows from the table list and the columns the roles write; the secured
integration group (test_authorization.py) shows them enough and needed on a real HBase."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tms_hbase.errors import AccessDenied, InvalidArgument
from tms_hbase.installation.grants import ROLES, grants
from tms_hbase.installation.metadata import CLOCK_COLUMN
from tms_hbase.model.exit_codes import exit_code
from tms_hbase.model.grants import PERMISSIONS, Grant
from tms_hbase.model.rows import SEQUENCE_COLUMN
from tms_hbase.model.tables import CORE, FAMILIES, TableNames
from tms_hbase.storage.connection import access_denied
from tms_hbase_admin.cli import main


def _on(found: list[Grant], table: str) -> list[Grant]:
    return [g for g in found if g.table == table]


@pytest.mark.parametrize("role", list(ROLES))
def test_each_role_has_a_grant_on_every_core_table_and_only_on_tables_of_its_prefix(role: str) -> None:
    """HBase lists a user only the tables it has some permission on: one without makes the installation missing."""
    found = grants(role, "orders", "alice")
    tables = {g.table for g in found if g.table is not None}
    assert set(TableNames("orders").core()) <= tables <= set(TableNames("orders").all())
    assert all(g.user == "alice" and g.permissions and set(g.permissions) <= set(PERMISSIONS) for g in found)
    assert all(g.why for g in found)


def test_every_table_kind_is_one_of_the_installation_s_and_the_admin_has_them_all() -> None:
    kinds = {access.kind for accesses in ROLES.values() for access in accesses} - {None}
    assert kinds == set(FAMILIES) and set(CORE) <= kinds
    admin = grants("admin", "orders", "root")
    assert {g.table for g in admin if g.table} == set(TableNames("orders").all())
    assert [g.shell() for g in admin if g.namespace] == ["grant 'root', 'C', '@default'"]


def test_a_consumer_cannot_reserve_offsets_change_topics_or_drop_tables() -> None:
    found = grants("consumer", "orders", "alice")
    names = TableNames("orders")
    whole = {g.table: g.permissions for g in found if g.family is None}
    assert whole[names.messages] == "R" and whole[names.metadata] == "R" and whole[names.payloads] == "R"
    assert not any(set("CA") & set(g.permissions) for g in found)
    columns = {(g.table, f"{g.family}:{g.qualifier}".encode()): g.permissions for g in found if g.family}
    assert (names.messages, SEQUENCE_COLUMN) not in columns
    assert columns[(names.metadata, CLOCK_COLUMN)] == "RW"  # HBase's clock probe
    assert all("W" in permissions for permissions in columns.values())


def test_only_the_admin_may_create_or_drop_and_only_the_sweeper_compacts() -> None:
    for role in ROLES:
        letters = "".join(g.permissions for g in grants(role, "p", "u"))
        assert ("C" in letters) == (role == "admin"), role
        assert ("A" in letters) == (role in ("admin", "sweeper")), role


def test_shell_commands_quote_what_they_are_given() -> None:
    column = Grant("o'brien", "RW", "why", table="p_messages", family="d", qualifier="m")
    assert column.shell() == "grant 'o\\'brien', 'RW', 'p_messages', 'd', 'm'"
    assert Grant("@ops", "R", "why", table="p_txstate").shell() == "grant '@ops', 'R', 'p_txstate'"
    assert column.as_dict() == {
        "user": "o'brien",
        "permissions": "RW",
        "why": "why",
        "table": "p_messages",
        "family": "d",
        "qualifier": "m",
    }


def test_an_unknown_role_is_invalid() -> None:
    with pytest.raises(InvalidArgument, match="unknown role 'reader': one of publisher, consumer"):
        grants("reader", "p", "u")


def test_the_command_prints_shell_commands_and_json() -> None:
    runner = CliRunner()
    text = runner.invoke(main, ["grants", "consumer", "--user", "alice", "--prefix", "orders"])
    assert text.exit_code == 0, text.output
    lines = text.output.splitlines()
    assert lines[0].startswith("# HBase grants for alice as consumer of the installation 'orders'")
    assert [line.split("  #")[0].rstrip() for line in lines[1:]] == [
        g.shell() for g in grants("consumer", "orders", "alice")
    ]
    as_json = runner.invoke(main, ["grants", "publisher", "--user", "bob", "--prefix", "orders", "--json"])
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.output)
    assert data["role"] == "publisher" and data["prefix"] == "orders" and data["user"] == "bob"
    assert data["grants"] == [g.as_dict() for g in grants("publisher", "orders", "bob")]
    assert {"table": "orders_messages", "permissions": "RW"}.items() <= data["grants"][2].items()


@pytest.mark.parametrize("args", [["grants", "reader", "--user", "u"], ["grants", "consumer"]])
def test_the_command_refuses_an_unknown_role_or_no_user(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output


REGION_DENIAL = (
    "org.apache.hadoop.hbase.security.AccessDeniedException: org.apache.hadoop.hbase.security.AccessDeniedException: "
    "Insufficient permissions (user=tmsconsumer@TMS.TEST, scope=default:k1_messages, family=d:s, "
    "params=[table=default:k1_messages,family=d:s],action=WRITE)\n\tat org.apache.hadoop.hbase.security.access"
)
MASTER_DENIAL = (
    "org.apache.hadoop.hbase.security.AccessDeniedException: Insufficient permissions for user 'tmsconsumer' "
    "(table=k1_metadata, action=ADMIN)\n\tat org.apache.hadoop"
)


def test_hbase_s_access_denied_exceptions_become_access_denied_naming_table_and_permission() -> None:
    region = access_denied("increment counter in k1_messages", REGION_DENIAL)
    assert region is not None
    assert (region.user, region.table, region.family, region.permission) == (
        "tmsconsumer@TMS.TEST",
        "k1_messages",
        "d:s",
        "W",
    )
    assert str(region) == (
        "increment counter in k1_messages: HBase denied user tmsconsumer@TMS.TEST the W permission on k1_messages "
        "(column d:s); grant its role (tms-admin grants ROLE)"
    )
    master = access_denied("drop table k1_metadata", MASTER_DENIAL)
    assert master is not None and (master.user, master.table, master.permission) == ("tmsconsumer", "k1_metadata", "A")
    assert exit_code(master) == 8 and not master.retriable
    assert access_denied("put", "org.apache.hadoop.hbase.TableNotFoundException: k1_messages") is None


def test_an_access_denied_that_names_nothing_still_reads() -> None:
    bare = access_denied("scan", "org.apache.hadoop.hbase.security.AccessDeniedException: denied")
    assert isinstance(bare, AccessDenied)
    assert str(bare).startswith("scan: HBase denied this identity a permission on the table; grant its role")
