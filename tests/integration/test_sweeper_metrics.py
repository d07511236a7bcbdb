"""The sweeper's metrics and health endpoint, scraped over HTTP from a real `tms-sweeper run` process on the
real HBase: the bind address, /health through an HBase outage, errors by kind, the sweep-duration
histogram, dry runs counted apart, and per-region series following a split."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tms_hbase import MessagingClient, TopicId
from tms_hbase.config import THRIFT_ENV
from tms_hbase.model.rows import message_key

from ..background import Background
from ..tcp_proxy import TcpProxy
from ..tx_server import free_port
from ..waiting import wait_for

SWEEPER = str(Path(sys.executable).with_name("tms-sweeper"))
OLD = TopicId("ns", "old")
CHAIN = {"ordering": "chain"}  # the counts are a chain's rows (a sequencer adds its counter row)


def samples(url: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of a scrape, by name and labels."""
    text = urllib.request.urlopen(f"{url}/metrics", timeout=5).read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def health(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@contextmanager
def sweeper(env: dict[str, str], *args: str) -> Iterator[Background]:
    """`tms-sweeper run ARGS`; stopped with SIGTERM at the end, which must end it with exit code 0."""
    proc = Background([SWEEPER, "run", "--interval", "0.2", "--json", *args], env=env)  # (a JSON line a pass)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_bind_address_health_errors_and_duration(
    client: MessagingClient, tms_env: dict[str, str], proxy: TcpProxy
) -> None:
    client.create_topic(OLD, CHAIN)
    port = free_port()
    url = f"http://127.0.0.2:{port}"  # another loopback address than the default
    env = {**tms_env, THRIFT_ENV: proxy.address}
    options = ["--metrics-host", "127.0.0.2", "--metrics-port", str(port), "--health-max-age", "4", "--timeout", "2"]
    with sweeper(env, *options):
        wait_for(
            lambda: health(url)[1]["seconds_since_last_sweep"] is not None,
            "a complete sweep",
            60,
            interval=0.2,
            ignore=(OSError,),
        )
        status, body = health(url)
        assert status == 200 and body["status"] == "ok" and body["loop_alive"], body
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
            raise AssertionError("the metrics server listens on 127.0.0.1 too")
        except urllib.error.URLError as error:
            assert isinstance(error.reason, ConnectionRefusedError)

        wait_for(
            lambda: samples(url).get(("tms_sweeper_sweep_duration_seconds_count", frozenset())),
            "sweeps",
            30,
            interval=0.2,
            ignore=(OSError,),
        )
        scrape = samples(url)
        assert scrape[("tms_sweeper_sweep_duration_seconds_sum", frozenset())] > 0
        assert scrape[("tms_sweeper_sweep_duration_seconds_bucket", frozenset({("le", "+Inf")}))] >= 1
        assert not [name for name, _ in scrape if name.endswith("_created")]  # counted, not since when
        assert scrape[("process_resident_memory_bytes", frozenset())] > 0  # the process collector

        proxy.fault = "reset"  # HBase unreachable: sweeps fail, the loop goes on
        wait_for(lambda: health(url)[0] == 503, "/health to turn 503", 60, interval=0.2, ignore=(OSError,))
        status, body = health(url)
        assert body["status"] == "stale" and body["loop_alive"] and body["seconds_since_last_sweep"] > 4, body
        errors = samples(url).get(("tms_sweeper_errors_total", frozenset({("kind", "HBaseUnavailable")})), 0)
        assert errors >= 1

        proxy.fault = None  # back: the next sweep completes
        wait_for(lambda: health(url)[0] == 200, "/health to recover", 60, interval=0.2, ignore=(OSError,))


def test_dry_run_is_counted_apart(client: MessagingClient, tms_env: dict[str, str]) -> None:
    client.create_topic(OLD, CHAIN)
    for i in range(5):
        client.publish(OLD, [b"m%d" % i])  # a row each
    client.delete_topic(OLD)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    would = ("tms_sweeper_dry_run_rows_dropped_total", frozenset({("table", "messages")}))
    with sweeper(tms_env, "--dry-run", "--metrics-port", str(port)):
        wait_for(lambda: samples(url).get(would, 0) >= 5, "the dry run's count", 60, interval=0.2, ignore=(OSError,))
        names = {name for name, _ in samples(url)}
    assert "tms_sweeper_rows_scanned_total" in names
    assert not {"tms_sweeper_rows_dropped_total", "tms_sweeper_rows_rewritten_total"} & names
    assert len(client.installation.messages.scan()) == 5  # a dry run: nothing deleted


def test_region_series_follow_a_split(
    client: MessagingClient, tms_env: dict[str, str], region_splitter: Callable
) -> None:
    client.create_topic(OLD, CHAIN)
    for i in range(10):
        client.publish(OLD, [b"m%d" % i])
    table = client.installation.messages.name
    port = free_port()
    url = f"http://127.0.0.1:{port}"

    def regions() -> set[str]:
        return {dict(labels)["region"] for name, labels in samples(url) if name == "tms_sweeper_region_lag_seconds"}

    with sweeper(tms_env, "--metrics-port", str(port)):
        wait_for(lambda: f"{table}[-..-)" in regions(), "the region's lag", 60, interval=0.2, ignore=(OSError,))
        key = message_key(OLD, 1, 5)
        region_splitter(table, key)
        halves = {f"{table}[-..{key.hex()})", f"{table}[{key.hex()}..-)"}
        wait_for(lambda: halves <= regions(), f"the lag of both halves, {halves}", 120, interval=0.2, ignore=(OSError,))
        mine = {r for r in regions() if r.startswith(f"{table}[")}
    assert mine == halves  # the split region's series is gone


def test_a_metrics_address_that_cannot_be_bound_is_bad_input(tms_env: dict[str, str]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = subprocess.run(
            [SWEEPER, "run", "--metrics-port", str(port)], env=tms_env, capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: cannot serve metrics on 127.0.0.1:{port}") and done.stderr.count("\n") == 1
