"""The Python examples of README.md and docs/*.md marked ``<!-- tested: python -->`` run as they are against the
real HBase: each page's examples in order, each a program of its own (a Spark page's in one program, as pasted
into one pyspark shell: one Spark JVM), on an installation of the test's own, with a transaction server at
``$TMS_TX_SERVER`` for the pages whose examples use one, a real gateway at ``$TMS_GATEWAY_URL`` for those that
use a gateway client, and local-mode Spark (in the slow group) for those that use PySpark."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tms_hbase import MessagingClient
from tms_hbase.errors import TableNotFound
from tms_hbase.txaware.table import TransactionalTable

from ..gateway_server import GatewayProcess
from ..tx_server import TxServer, free_port

ROOT = Path(__file__).resolve().parents[2]
# A marked block may be indented (in a list item): it runs dedented, as a reader pastes it.
MARKED = re.compile(r"<!-- tested: python -->\s*```python\n(.*?)```", re.S)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# What a page's examples print, in part: an example that runs but does something else fails too.
PRINTS = {
    "README.md": ["[b'created', b'paid']", "billing got b'created'", "billing got b'paid'", "packing b'paid'"],
    "architecture.md": ["billing\n", "[b'paid'] [b'paid']\n"],  # the same through both clients
    "asyncio.md": ["64\n", "b'order 0'\n", "b'order 63'\n"],
    "concepts.md": ["[b'c']"],
    "consumers.md": ["invoicing b'invoice 1'", "Lag(messages=0,", "[b'one', b'two']", "[b'INVOICE 1']"],
    "design.md": [],
    "gateway.md": ["b'created'", "billing got b'created'", "billing b'shipped'"],
    "ordering.md": ["chain\n"],
    "shared.md": ["done b'job 3'", "SharedStats(", "b'job 4'"],
    "spark.md": ['{"ID":"O-1","TOTAL":12.5}'],
    "transactions.md": ["[b'order-1 paid']", "[b'order-1 paid', b'order-2 paid']"],
}


def examples(page: Path) -> list[str]:
    return [textwrap.dedent(block) for block in MARKED.findall(page.read_text())]


def uses(blocks: list[str], name: str) -> bool:
    return any(name in block for block in blocks)


def pages() -> list[object]:
    """The pages with examples; those with Spark examples in the slow group (a Spark JVM takes minutes)."""
    return [
        pytest.param(page, marks=[pytest.mark.slow] if uses(examples(page), "pyspark") else [], id=page.name)
        for page in PAGES
        if examples(page)
    ]


@contextlib.contextmanager
def services(blocks: list[str], env: dict[str, str], folder: Path) -> Iterator[dict[str, str]]:
    """``env`` with what the blocks use: a transaction server, a gateway (with it), Spark's local address."""
    with contextlib.ExitStack() as stack:
        if uses(blocks, "TransactionClient") or uses(blocks, "pyspark"):
            server = TxServer(env, free_port()).start()
            stack.callback(server.stop)
            env = {**env, "TMS_TX_SERVER": server.address}
        if uses(blocks, "GatewayClient"):
            gateway = GatewayProcess(env, folder / "gateway.log").start()
            stack.callback(gateway.stop)
            env = {**env, "TMS_GATEWAY_URL": gateway.url}
        if uses(blocks, "pyspark"):
            env = {**env, "SPARK_LOCAL_IP": "127.0.0.1"}
        yield env


@pytest.mark.parametrize("page", pages())
def test_the_pages_examples_run(page: Path, installed_env: dict[str, str], tmp_path: Path) -> None:
    blocks = examples(page)  # they run on an installation, as after `tms-admin init`
    if uses(blocks, "pyspark"):  # one program, as pasted into one pyspark shell: one Spark JVM, not one a block
        blocks = ["\n".join(blocks)]
    out = ""
    with services(blocks, installed_env, tmp_path) as env:
        for number, block in enumerate(blocks, 1):
            done = subprocess.run(
                [sys.executable, "-c", block],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert done.returncode == 0, f"{page.name}, example {number}:\n{block}\n{done.stderr}"
            out += done.stdout
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
