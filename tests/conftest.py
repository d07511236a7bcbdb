"""Test fixtures: one real HBase per session, and a table prefix of its own for every test."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import happybase
import pytest

from tms_hbase import MessagingClient
from tms_hbase.config import PREFIX_ENV, THRIFT_ENV, thrift_address

from .hbase_admin import external_hbase_reason, split_table
from .hbase_server import hbase_for_tests
from .tcp_proxy import TcpProxy

_HBASE_FOR_WORKERS = pytest.StashKey[contextlib.ExitStack]()
UNIT_TESTS = Path(__file__).resolve().parent / "unit"


def _only_unit_tests(config: pytest.Config) -> bool:
    paths = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    return bool(paths) and all(p == UNIT_TESTS or UNIT_TESTS in p.parents for p in paths)


def pytest_configure(config: pytest.Config) -> None:
    """Run in parallel (pytest-xdist's ``-n``), the controlling process gets the session's HBase before any
    worker starts and stops it at the end if it started it, so every worker finds it running (each worker
    starting the launcher's HBase itself would race, and the first to finish would stop it under the others).
    Only unit tests selected: nothing to start."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None) or _only_unit_tests(config):
        return
    stack = contextlib.ExitStack()
    address, how = stack.enter_context(hbase_for_tests())
    print(f"tests run against HBase Thrift at {address} ({how})")
    config.stash[_HBASE_FOR_WORKERS] = stack


def pytest_unconfigure(config: pytest.Config) -> None:
    stack = config.stash.get(_HBASE_FOR_WORKERS, None)
    if stack is not None:
        stack.close()


# Modules whose tests share a module-scoped server or installation: run in parallel, each stays in one process
# (spread over the workers, each would start its own: a Spark JVM, a Tephra JVM, a gateway...).
SHARED_PER_MODULE = {
    "test_spark.py",  # one Spark session (a JVM)
    "test_tephra_compat.py",  # one Tephra server (a JVM)
    "test_gateway.py",  # one gateway process
    "test_client_parity.py",
    "test_gateway_subscriptions.py",
    "test_gateway_security.py",
    "test_gateway_consumer_limits.py",
    "test_fault_injection.py",  # one installation
    "test_console_scale.py",  # one installation of 2,000 topics
    "test_transports.py",  # one ThriftServer JVM per transport
    "test_kerberos.py",  # one KDC, one secured HBase, one ThriftServer JVM per mode
    "test_authorization.py",  # one KDC, one secured HBase with AccessController, one ThriftServer JVM
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist's ``loadscope`` scheduling with a module as the unit for the modules above and a test for the
    rest (``--dist loadgroup`` with ``xdist_group`` marks would say the same, but pytest-xdist 3.8 cannot tag
    node ids under pytest 9.2). Units with more tests go first, then the single tests in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class SharedModulesTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return module if module.rsplit("/", 1)[-1] in SHARED_PER_MODULE else nodeid

    return SharedModulesTogether(config, log)  # type: ignore[arg-type]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow tests (extra processes and JVMs) first: run in parallel, a long test begun last is the run's tail."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def hbase_address() -> Iterator[str]:
    """The Thrift address of the session's real HBase; failing to get one fails the tests."""
    with hbase_for_tests() as (address, how):
        print(f"\ntests run against HBase Thrift at {address} ({how})")
        yield address


@pytest.fixture(scope="session")
def table_dropper(hbase_address: str) -> Iterator[ThreadPoolExecutor]:
    """Drops finished tests' tables in the background, so no test waits for HBase to do it."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop-tables") as pool:
        yield pool


def _drop(address: str, prefix: str) -> None:
    """The installation's tables, then the application tables a test made under its (unique) prefix."""
    with MessagingClient(address, prefix, timeout_seconds=60) as client:
        client.admin.drop_tables()
    host, port = thrift_address(address)
    conn = happybase.Connection(host, port)
    try:
        for name in conn.tables():
            if name.startswith(f"{prefix}_".encode()):
                conn.delete_table(name, disable=True)
    finally:
        conn.close()


@pytest.fixture
def prefix(hbase_address: str, table_dropper: ThreadPoolExecutor) -> Iterator[str]:
    """A table prefix no other test uses; its tables are dropped afterwards."""
    name = f"t{uuid.uuid4().hex[:12]}"
    yield name
    table_dropper.submit(_drop, hbase_address, name)


@pytest.fixture(scope="module")
def module_prefix(hbase_address: str, table_dropper: ThreadPoolExecutor) -> Iterator[str]:
    """A table prefix for one test module (e.g. one server process shared by its tests); dropped after."""
    name = f"m{uuid.uuid4().hex[:12]}"
    yield name
    table_dropper.submit(_drop, hbase_address, name)


@pytest.fixture
def client(hbase_address: str, prefix: str) -> Iterator[MessagingClient]:
    """A MessagingClient on this test's own tables; its first create_topic creates them (``create_tables``)."""
    with MessagingClient(hbase_address, prefix, create_tables=True) as c:
        yield c


@pytest.fixture
def tms_env(hbase_address: str, prefix: str) -> dict[str, str]:
    """Environment for subprocesses (CLI, workers) pointing at this test's HBase and tables."""
    env = dict(os.environ)
    env[THRIFT_ENV] = hbase_address
    env[PREFIX_ENV] = prefix
    return env


@pytest.fixture
def installed_env(tms_env: dict[str, str], client: MessagingClient) -> dict[str, str]:
    """:func:`tms_env` with its installation created (as `tms-admin init` would: no other command creates one)."""
    client.admin.init_tables()
    return tms_env


@pytest.fixture
def proxy(hbase_address: str) -> Iterator[TcpProxy]:
    """A TCP proxy in front of the session's HBase that a test can cut, stall or make lose replies."""
    p = TcpProxy(thrift_address(hbase_address))
    yield p
    p.close()


@pytest.fixture
def region_splitter(hbase_address: str) -> Callable[[str, bytes], None]:
    """``split_table(table, key)``, for tests that need regions split (the Thrift gateway cannot).

    Skips, with the reason, only on an external HBase without $TMS_TEST_HBASE_ZK_PORT; CI runs on the
    launcher's HBase, and a CI run (``$CI`` set) never skips: it fails instead.
    """
    reason = external_hbase_reason(hbase_address)
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run on the launcher's HBase: {reason}")
        pytest.skip(reason)
    return split_table
