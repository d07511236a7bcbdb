"""The Python examples of README.md and docs/*.md marked ``<!-- tested: python -->`` run as they are against the
real HBase: each page's examples in order, each a program of its own, on an installation of the test's own,
with a transaction server at ``$TMS_TX_SERVER`` for the pages whose examples use one."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tms_hbase import MessagingClient
from tms_hbase.errors import TableNotFound
from tms_hbase.tx.table import TransactionalTable

from ..tx_server import TxServer, free_port

ROOT = Path(__file__).resolve().parents[2]
MARKED = re.compile(r"<!-- tested: python -->\s*```python\n(.*?)```", re.S)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# What a page's examples print, in part: an example that runs but does something else fails too.
PRINTS = {
    "README.md": ["[b'created', b'paid']", "billing got b'created'", "billing got b'paid'", "packing b'paid'"],
    "concepts.md": ["[b'c']"],
    "transactions.md": ["[b'order-1 paid']"],
}


def examples(page: Path) -> list[str]:
    return MARKED.findall(page.read_text())


@pytest.mark.parametrize("page", [p for p in PAGES if examples(p)], ids=lambda p: p.name)
def test_the_pages_examples_run(page: Path, installed_env: dict[str, str]) -> None:
    blocks = examples(page)  # they run on an installation, as after `tms-admin init`
    server = TxServer(installed_env, free_port()).start() if any("TransactionClient" in b for b in blocks) else None
    env = {**installed_env, "TMS_TX_SERVER": server.address} if server else installed_env
    out = ""
    try:
        for number, block in enumerate(blocks, 1):
            done = subprocess.run(
                [sys.executable, "-c", block], env=env, capture_output=True, text=True, timeout=300, check=False
            )
            assert done.returncode == 0, f"{page.name}, example {number}:\n{block}\n{done.stderr}"
            out += done.stdout
    finally:
        if server:
            server.stop()
    for text in PRINTS.get(page.name, []):
        assert text in out, f"{page.name}'s examples did not print {text!r}:\n{out}"


def test_an_application_table_is_made_once_and_a_missing_one_is_named(client: MessagingClient, prefix: str) -> None:
    """The transactions page's table: create_table makes <prefix>_<name> (again: the same table, nothing
    changed), and a TransactionalTable on a table nobody made fails at once, naming it in one line."""
    with pytest.raises(TableNotFound, match=rf"^table {prefix}_orders does not exist; create it with") as missing:
        TransactionalTable(client.installation.table("orders"))
    assert "\n" not in str(missing.value)
    table = client.admin.create_table("orders")
    assert table.name == f"{prefix}_orders" and table.exists()
    table.put(b"row", {b"d:c": b"v"})
    assert client.admin.create_table("orders").get_cell(b"row", b"d:c") == b"v"
    TransactionalTable(table)  # exists now
