"""The library's surface stays light and its error model complete (docs/architecture.md has the layer rule;
`make lint` checks the import direction with import-linter)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import tms_hbase
from tms_hbase import errors

ROOT = Path(__file__).resolve().parents[2]

# What `import tms_hbase` must not load: the transaction server's machinery, the roles, any CLI.
HEAVY = (
    "tms_hbase.txserver.server",
    "tms_hbase.txserver.manager",
    "tms_hbase.txserver.edits",
    "tms_hbase.tx.snapshot",
    "tms_hbase.txserver.state_store",
    "tms_hbase.tx.client",
    "tms_hbase.client_tx",
    "tms_hbase.txaware",
    "tms_hbase.spark",
    "tms_hbase_launcher",
    "tms_hbase_sweeper",
    "tms_hbase_admin",
    "tms_hbase_gateway",
    "click",
    "pyspark",
)


def _loaded_by(statement: str) -> set[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(json.loads(out))


def test_import_tms_hbase_loads_no_server_sweeper_or_cli() -> None:
    loaded = _loaded_by("import tms_hbase")
    heavy = sorted(m for m in loaded if m.startswith(HEAVY))
    assert heavy == [], f"import tms_hbase loads {heavy}"
    assert "tms_hbase.client" not in loaded  # loaded on first use of tms_hbase.MessagingClient
    assert "happybase" not in loaded and "thriftpy2" not in loaded


# What the gateway's clients must not load: the storage port (and with it happybase's Thrift classes), the
# messaging core and the facade over them (the import-linter contract "gateway-client" checks the imports).
BELOW_THE_GATEWAY = (
    "tms_hbase.storage",
    "tms_hbase.installation",
    "tms_hbase.publish",
    "tms_hbase.fetch",
    "tms_hbase.consume",
    "tms_hbase.shared",
    "tms_hbase.sweep",
    "tms_hbase.client",
    "tms_hbase.aio.client",
    "tms_hbase.tx.client",
    "happybase",
)


@pytest.mark.parametrize(
    "statement",
    [
        "from tms_hbase.gateway_client.http import GatewayClient",
        "from tms_hbase.gateway_client.aio import AsyncGatewayClient",
    ],
)
def test_the_gateway_clients_load_no_storage_port(statement: str) -> None:
    loaded = _loaded_by(statement)
    below = sorted(m for m in loaded if m.startswith(BELOW_THE_GATEWAY))
    assert below == [], f"{statement} loads {below}"


def test_every_public_name_of_tms_hbase_imports() -> None:
    """The names ``import tms_hbase`` loads on first use (the client and its parts) all resolve."""
    loaded = _loaded_by("import tms_hbase\nfor name in tms_hbase.__all__: getattr(tms_hbase, name)")
    assert "tms_hbase.client" in loaded and "tms_hbase.model.transaction" in loaded
    assert _loaded_by("from tms_hbase import *") >= {"tms_hbase.client", "tms_hbase.publish.background"}


def test_tx_package_names_still_import() -> None:
    """The names tms_hbase.tx always exported load on first use (TransactionCodec too: docs/design.md)."""
    loaded = _loaded_by("from tms_hbase.tx import Transaction, TransactionCodec")
    assert "tms_hbase.tx.codec" in loaded and "tms_hbase.txserver.manager" not in loaded
    from tms_hbase import tx

    for name in tx.__all__:
        assert getattr(tx, name) is not None
    with pytest.raises(AttributeError):
        tx.NoSuchThing  # noqa: B018


def _error_classes() -> list[type[errors.TmsError]]:
    return [
        value
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, errors.TmsError) and value.__module__ == errors.__name__
    ]


def test_every_error_class_is_exported_and_says_whether_it_is_retriable() -> None:
    classes = _error_classes()
    assert len(classes) >= 20
    for cls in classes:
        assert getattr(tms_hbase, cls.__name__) is cls, f"{cls.__name__} is not exported by tms_hbase"
        assert isinstance(cls.retriable, bool)
    # no error class is defined anywhere else in the library
    for module in ("tms_hbase.tx.client", "tms_hbase.txaware.context", "tms_hbase.txserver.state_store"):
        __import__(module)
        defined = [
            v
            for v in vars(sys.modules[module]).values()
            if isinstance(v, type) and issubclass(v, errors.TmsError) and v.__module__ == module
        ]
        assert defined == [], f"{module} defines {defined}"


def test_retriable_flags() -> None:
    assert errors.HBaseUnavailable.retriable and errors.TransactionServiceUnavailable.retriable
    assert errors.PublishOutcomeUnknown.retriable and errors.ConcurrentModification.retriable
    for never in (
        errors.InvalidArgument,
        errors.TopicNotFound,
        errors.HBaseError,  # HBase refused: asking again gets the same answer
        errors.CorruptData,
        errors.TransactionConflict,
        errors.Fenced,
        errors.LeaseLost,
        errors.ClientClosed,
    ):
        assert not never.retriable, never


def test_a_dead_transaction_server_is_not_hbase_unreachable() -> None:
    assert not issubclass(errors.TransactionServiceUnavailable, errors.HBaseError)
    assert issubclass(errors.TransactionServiceUnavailable, errors.Unavailable)
    assert issubclass(errors.HBaseUnavailable, errors.Unavailable)


def test_the_synchronous_clients_and_their_protocol_code_run_without_greenlet() -> None:
    """greenlet is the ``asyncio`` extra's (the bridge's, tms_hbase/runtime/bridge.py): with it missing, the
    synchronous clients, the command-line tools and protocol code that waits (a publish, a fetch, the
    runtime's locks, events, sleeps and background threads) still import and run."""
    code = """
import os, sys
sys.modules["greenlet"] = None  # an import of greenlet now raises ImportError
os.environ["TMS_HBASE_CHECK_LOCKS"] = "1"
import tms_hbase
for name in tms_hbase.__all__:
    getattr(tms_hbase, name)
from tms_hbase.gateway_client.http import GatewayClient
import tms_hbase_admin.cli, tms_hbase_sweeper.cli
from tms_hbase.runtime import green
from tests.unit.test_protocol import World, T
world = World()
world.writer().publish(T, [b"one", b"two"])
assert world.fetch() == [b"one", b"two"]
event, guard, lock, done = green.event(), green.no_wait_lock(reentrant=True), green.lock(), []
with guard, green.condition(lock):
    pass
green.start_thread(lambda: (done.append(1), event.set()), "t").join(5)
assert event.wait(5) and done == [1] and green.semaphore(1).acquire()
green.sleep(0)
assert "greenlet" not in {m for m, module in sys.modules.items() if module is not None}
try:
    import tms_hbase.aio.client
except ModuleNotFoundError as missing:
    print(missing)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip() == "tms-hbase's asyncio client and gateway need greenlet: pip install 'tms-hbase[asyncio]'"
    )
