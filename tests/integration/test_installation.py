"""A prefix names an installation: read-only calls on a prefix without tables say the installation does
not exist and create nothing, create_topic too (only init_tables, or a client made with create_tables=True,
creates it); every command but
`tms-admin init` exits 7 there and creates nothing, and `tms-admin drop` deletes an installation."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import happybase
import pytest

from tms_hbase import InstallationNotFound, MessagingClient, RollbackDetail, TopicId
from tms_hbase.config import PREFIX_ENV
from tms_hbase.model.tables import FAMILIES
from tms_hbase.tx import write_pointer_now

from ..tx_server import free_port

T = TopicId("ns", "t")
READ_ONLY = {
    "get_topic": lambda c: c.get_topic(T),
    "list_topics": lambda c: c.list_topics(),
    "list_topic_metadata": lambda c: c.list_topic_metadata("ns"),
    "fetch": lambda c: c.fetch(T),
    "update_topic": lambda c: c.update_topic(T, {"ttl": "5"}),
    "delete_topic": lambda c: c.delete_topic(T),
    "publish": lambda c: c.publish(T, [b"x"]),
    "store": lambda c: c.store(T, [b"x"], tx_write_pointer=write_pointer_now()),
    "rollback": lambda c: c.rollback(T, RollbackDetail(str(T), 5, 1, 1, 1)),
    "require_installation": lambda c: c.admin.require_installation(),
}


@pytest.mark.parametrize("call", READ_ONLY)
def test_calls_on_a_missing_installation_create_nothing(client: MessagingClient, call: str) -> None:
    with pytest.raises(InstallationNotFound, match=f"prefix '{client.installation.prefix}'") as info:
        READ_ONLY[call](client)
    assert info.value.missing == client.installation.names.core()
    assert client.installation.missing() == client.installation.names.core()


def test_create_topic_on_a_mistyped_prefix_raises_and_creates_nothing(hbase_address: str, prefix: str) -> None:
    with MessagingClient(hbase_address, prefix) as typo:
        with pytest.raises(InstallationNotFound, match="tms-admin init"):
            typo.create_topic(T)
        with pytest.raises(InstallationNotFound):
            typo.admin.set_tail_cache_seconds(5)
    with MessagingClient(hbase_address, prefix) as reader:  # a new client: nothing was made behind its back
        assert reader.installation.missing(FAMILIES) == reader.installation.names.all()


def test_only_init_tables_or_create_tables_true_creates_the_installation(hbase_address: str, prefix: str) -> None:
    with MessagingClient(hbase_address, prefix) as admin:
        assert sorted(admin.admin.init_tables()) == sorted(admin.installation.names.all())
        admin.create_topic(T)
    with MessagingClient(hbase_address, prefix + "x", create_tables=True) as writer:
        try:
            writer.create_topic(T)
            assert writer.installation.missing() == []
        finally:
            writer.admin.drop_tables()
    with MessagingClient(hbase_address, prefix) as reader:
        assert reader.list_topics() == [T]


def test_an_installation_gets_its_subscriptions_table_on_first_use(hbase_address: str, prefix: str) -> None:
    with MessagingClient(hbase_address, prefix) as typo, pytest.raises(InstallationNotFound):
        typo.create_subscription(T, "s")  # no installation: nothing is created, this table neither
    with MessagingClient(hbase_address, prefix, create_tables=True) as writer:
        writer.create_topic(T)  # the core tables only: subscriptions come on their first use
    with MessagingClient(hbase_address, prefix) as consumer:
        consumer.create_subscription(T, "s")
        assert consumer.installation.missing(FAMILIES) == []


def test_a_partial_installation_names_what_is_missing(client: MessagingClient) -> None:
    client.admin.init_tables()
    host, port = client.installation.address.rsplit(":", 1)
    raw = happybase.Connection(host, int(port))  # one table dropped behind the library's back
    try:
        raw.delete_table(client.installation.txstate.name, disable=True)
    finally:
        raw.close()
    with (
        MessagingClient(client.installation.address, client.installation.prefix) as other,
        pytest.raises(InstallationNotFound, match=f"missing tables: {client.installation.txstate.name}"),
    ):
        other.list_topics()


def run(program: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    script = str(Path(sys.executable).with_name(program))
    return subprocess.run([script, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "program, args",
    [
        ("tms-admin", ["topic", "list"]),
        ("tms-admin", ["topic", "get", "ns:t"]),
        ("tms-admin", ["topic", "update", "ns:t", "--ttl", "5"]),
        ("tms-admin", ["topic", "delete", "ns:t"]),
        ("tms-admin", ["sweeper", "state"]),
        ("tms-admin", ["tx", "snapshot", "--from-hbase"]),
        ("tms-admin", ["tx", "prune", "--dry-run"]),
        ("tms-admin", ["settings"]),
        ("tms-admin", ["topic", "create", "ns:t"]),
        ("tms-admin", ["sub", "create", "ns:t", "s"]),
        ("tms-admin", ["tx", "serve", "--port", "PORT"]),
        ("tms-admin", ["metrics", "serve", "--port", "PORT"]),
        ("tms-sweeper", ["once"]),
        ("tms-sweeper", ["run"]),
        ("tms-sweeper", ["status"]),
    ],
    ids=lambda a: " ".join(a) if isinstance(a, list) else a,
)
def test_commands_on_a_mistyped_prefix_exit_7_and_create_nothing(
    client: MessagingClient, tms_env: dict[str, str], program: str, args: list[str]
) -> None:
    result = run(
        program, tms_env, *(str(free_port()) if a == "PORT" else a for a in args)
    )  # a port now, not at collection
    assert result.returncode == 7, result.stderr
    assert "Traceback" not in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: no tms-hbase installation") and repr(client.installation.prefix) in last
    assert client.installation.missing() == client.installation.names.core()


def test_only_init_creates_and_drop_drops(client: MessagingClient, tms_env: dict[str, str]) -> None:
    assert run("tms-admin", tms_env, "init").returncode == 0
    assert client.installation.missing(FAMILIES) == []
    assert run("tms-admin", tms_env, "topic", "create", "ns:t").returncode == 0
    assert run("tms-admin", tms_env, "topic", "list").stdout.split()[-3:] == ["ns:t", "1", "604800"]
    refused = run("tms-admin", tms_env, "drop")  # stdin is no terminal here: --yes is needed
    assert refused.returncode == 2 and "without --yes" in refused.stderr and client.installation.missing() == []
    dropped = json.loads(run("tms-admin", tms_env, "drop", "--yes", "--json").stdout)
    assert dropped == {"prefix": client.installation.prefix, "dropped": client.installation.names.all()}
    assert client.installation.missing(FAMILIES) == client.installation.names.all()
    again = run("tms-admin", tms_env, "drop", "--yes")
    assert again.returncode == 7 and "no tms-hbase installation" in again.stderr


def test_drop_asks_on_a_terminal(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.admin.init_tables()
    for answer, code in ((b"n\n", 1), (b"y\n", 0)):
        controller, terminal = pty.openpty()
        try:
            proc = subprocess.Popen(
                [str(Path(sys.executable).with_name("tms-admin")), "drop"],
                env=tms_env,
                stdin=terminal,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            os.write(controller, answer)
            _, err = proc.communicate(timeout=120)
        finally:
            os.close(controller)
            os.close(terminal)
        assert proc.returncode == code, err
        assert b"with everything in them? [y/N]" in err
        assert client.installation.missing() == ([] if code else client.installation.names.core())


def test_an_empty_prefix_is_bad_input(tms_env: dict[str, str]) -> None:
    explicit = run("tms-admin", tms_env, "--prefix", "", "topic", "list")
    assert explicit.returncode == 2 and "bad table prefix ''" in explicit.stderr
    from_env = run("tms-admin", {**tms_env, PREFIX_ENV: ""}, "topic", "list")
    assert from_env.returncode == 2 and "bad table prefix ''" in from_env.stderr
    sweeper = run("tms-sweeper", {**os.environ, PREFIX_ENV: ""}, "once")
    assert sweeper.returncode == 2 and "bad table prefix ''" in sweeper.stderr
