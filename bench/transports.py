"""Benchmark: publish and fetch over each Thrift transport, against the plain one (buffered transport, binary
protocol), each on a stock HBase ThriftServer JVM of its own on the local HBase (tms_hbase_launcher.gateway):
framed, compact, framed+compact; and TLS, through a TLS terminator (tests/tls_proxy.py: HBase's binary Thrift
server has no TLS) against the same plain gateway through the same forwarder without TLS, so that the ratio is
what TLS adds, not the forwarder. A round publishes N batches of 100 × 1 KiB one after another on one client
and fetches the topic whole, per mode, in an order that rotates per round, after one such round unmeasured
(the gateway JVMs start cold).
"""

from __future__ import annotations

import ssl
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import trustme

from tests.tls_proxy import TlsTerminator
from tms_hbase import MessagingClient, TopicId
from tms_hbase.config import Config, ThriftTransport
from tms_hbase_launcher.gateway import start_gateway

from .common import GoalFamily, Result, Settings, median, new_topic, payloads, progress, ratio

BATCH = 100
PAYLOAD_SIZE = 1024
GOAL = 0.8  # each transport at least 0.8× the plain one
MODES = ["plain", "framed", "compact", "framed+compact", "forwarded", "TLS"]
BASELINE = {"framed": "plain", "compact": "plain", "framed+compact": "plain", "TLS": "forwarded"}
GOAL_TEXT = {what: f"{what} over {{item}} ≥ {GOAL}× {{base}}" for what in ("publish", "fetch")}
GOAL_FAMILIES = tuple(  # one verdict per mode in the runs, one row each in docs/benchmarks.md
    GoalFamily(template, f"{what} over every transport ≥ {GOAL}× its baseline", highest_is_worst=False)
    for what, template in GOAL_TEXT.items()
)


def _servers(stack: ExitStack) -> dict[str, tuple[str, ThriftTransport]]:
    """Every mode's (address, transport): four gateway JVMs, and a forwarder with and without TLS to the plain
    one; ``stack`` stops them."""
    served = {}
    for mode in MODES[:4]:
        framed, compact = "framed" in mode, "compact" in mode
        gateway = start_gateway(framed, compact)
        stack.callback(gateway.stop)
        served[mode] = (gateway.address, ThriftTransport(framed=framed, compact=compact))
    host, port = served["plain"][0].rsplit(":", 1)
    folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tls-")))
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server)
    for mode, context in (("forwarded", None), ("TLS", server)):
        terminator = TlsTerminator((host, int(port)), context)
        stack.callback(terminator.close)
        tls = ThriftTransport(tls=True, ca_file=str(folder / "ca.pem")) if context else ThriftTransport()
        served[mode] = (terminator.address, tls)
    return served


def run(settings: Settings) -> Result:
    count = settings.pick(400, 100)
    result = Result("transports", f"Publish and fetch per Thrift transport ({count} batches of {BATCH} × 1 KiB)")
    batch = payloads(BATCH, PAYLOAD_SIZE)
    prefix = settings.prefix("transports")
    publish: dict[str, list[float]] = {mode: [] for mode in MODES}
    fetch: dict[str, list[float]] = {mode: [] for mode in MODES}
    with MessagingClient(settings.address, prefix) as admin, ExitStack() as stack:
        admin.admin.init_tables()
        stack.callback(admin.admin.drop_tables)
        served = _servers(stack)
        clients = {
            mode: stack.enter_context(
                MessagingClient(config=Config((address,), prefix, timeout_seconds=60, transport=transport))
            )
            for mode, (address, transport) in served.items()
        }
        for mode, client in clients.items():  # warm-up: each gateway JVM's code compiled before the clock starts
            topic = new_topic(client, f"warm_{mode.replace('+', '_')}")
            _rate(lambda c=client, t=topic: c.publish(t, batch), count)
            _fetch_all(client, topic, count * BATCH)
        for r in range(settings.rounds):
            order = MODES[r % len(MODES) :] + MODES[: r % len(MODES)]
            for mode in order:
                client = clients[mode]
                topic = new_topic(client, f"t{r}_{mode.replace('+', '_')}")
                publish[mode].append(_rate(lambda c=client, t=topic: c.publish(t, batch), count) * BATCH)
                fetch[mode].append(_timed(lambda c=client, t=topic: _fetch_all(c, t, count * BATCH)))
            progress(
                f"transports round {r + 1}/{settings.rounds}: "
                + ", ".join(f"{m} {median(publish[m]):,.0f}/{median(fetch[m]):,.0f}" for m in MODES)
            )
    rows = []
    for mode in MODES:
        base = BASELINE.get(mode)
        pub, got = median(publish[mode]), median(fetch[mode])
        pub_ratio = f"{ratio(pub, median(publish[base])):.2f}×" if base else ""
        fetch_ratio = f"{ratio(got, median(fetch[base])):.2f}×" if base else ""
        rows.append([mode, pub, pub_ratio, got, fetch_ratio, base or ""])
    result.table(
        ["mode", "publish msg/s", "÷ baseline", "fetch msg/s", "÷ baseline", "baseline"],
        rows,
    )
    for mode, base in BASELINE.items():
        for what, rates in (("publish", publish), ("fetch", fetch)):
            r = ratio(median(rates[mode]), median(rates[base]))
            result.goal(GOAL_TEXT[what].format(item=mode, base=base), f"{r:.2f}×", r >= GOAL)
    result.notes.append(
        "TLS's baseline is the same gateway through the same Python forwarder without TLS (both on this machine's "
        "cores, with HBase); plain, framed and compact are stock ThriftServer JVMs with -threadpool."
    )
    result.samples = {"publish_msgs_per_s": publish, "fetch_msgs_per_s": fetch, "batches": count}
    return result


def _rate(call: Callable[[], object], times: int) -> float:
    """Calls per second of ``call`` made ``times`` times one after another."""
    start = time.perf_counter()
    for _ in range(times):
        call()
    return times / (time.perf_counter() - start)


def _timed(call: Callable[[], int]) -> float:
    """Messages per second of ``call``, which returns how many it read."""
    start = time.perf_counter()
    read = call()
    return read / (time.perf_counter() - start)


def _fetch_all(client: MessagingClient, topic: TopicId, total: int) -> int:
    read = sum(1 for _ in client.fetch(topic))
    if read != total:
        raise AssertionError(f"fetch read {read} messages, expected {total}")
    return read
