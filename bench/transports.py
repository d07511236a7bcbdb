"""Benchmark: publish and fetch over each Thrift transport, each on a stock HBase ThriftServer JVM of its own on
the local HBase (tms_hbase_launcher.gateway): framed, compact and framed+compact against the plain one (buffered
transport, binary protocol); HTTP; and HTTPS (the gateway's own TLS, ``hbase.thrift.ssl.enabled``, with a
certificate of a test CA) against HTTP. HBase's binary Thrift server has no TLS of its own, so TLS is measured
where HBase serves it.

Every gateway (with the full JIT, as in production; not in ``--quick``) first serves publishes and fetches
unmeasured (its code compiled before the clock starts). A round publishes N batches of 100 × 1 KiB per mode, the
modes taking turns of 25 batches, then fetches each mode's topic whole several times, the modes taking turns fetch
by fetch; who goes first rotates. So load that drifts during a round hits every mode alike, and each figure is the
median of many turns or fetches, not one.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import trustme

from tests.keystores import gateway_keystore
from tms_hbase import MessagingClient, TopicId
from tms_hbase.config import Config, ThriftTransport
from tms_hbase_launcher.gateway import FULL_JIT, Keystore, ThriftGateway, start_gateway

from .common import GoalFamily, Result, Settings, median, new_topic, payloads, progress, ratio, rotated

BATCH = 100
PAYLOAD_SIZE = 1024
GOAL = 0.8  # each transport at least 0.8× its baseline
GOAL_TEXT = {what: f"{what} over {{item}} ≥ {GOAL}× {{base}}" for what in ("publish", "fetch")}
GOAL_FAMILIES = tuple(  # one verdict per mode in the runs, one row each in docs/benchmarks.md
    GoalFamily(template, f"{what} over every transport ≥ {GOAL}× its baseline", highest_is_worst=False)
    for what, template in GOAL_TEXT.items()
)
TURN = 25  # batches a mode publishes in a row, its turn (a writer idle for a turn pays a little to resume)
MODES = ["plain", "framed", "compact", "framed+compact", "http", "https"]
BASELINE = {"framed": "plain", "compact": "plain", "framed+compact": "plain", "http": "plain", "https": "http"}
GOALS = ["framed", "compact", "framed+compact", "https"]  # HTTP against plain is stated, not a goal
STARTING = 3  # gateway JVMs started at once


@dataclass(frozen=True)
class Sizes:
    """How much :func:`measure` publishes and fetches: ``batches`` per mode and round, its topic fetched whole
    ``fetches`` times a round; before the clock starts, ``warm_batches`` fetched ``warm_fetches`` times."""

    batches: int
    fetches: int
    warm_batches: int
    warm_fetches: int

    @classmethod
    def of(cls, settings: Settings) -> Sizes:
        return settings.pick(cls(400, 3, 50, 3), cls(100, 3, 20, 1))


def gateway_jvm(settings: Settings) -> tuple[tuple[str, ...], str]:
    """The gateways' extra JVM flags, and what they are for the notes: the full JIT, as a production gateway runs;
    with ``--quick``, which checks that the benchmark runs, not figures, the launcher's quick-starting JVM (C1
    only: the JIT compiles of six JVMs at once would add a minute to CI), whose TLS and SASL run slower."""
    return settings.pick(
        (FULL_JIT, "the full JIT"), ((), "C1 only (--quick: TLS and SASL figures are not a production JVM's)")
    )


def run(settings: Settings) -> Result:
    sizes = Sizes.of(settings)
    flags, jit = gateway_jvm(settings)
    result = Result(
        "transports", f"Publish and fetch per Thrift transport ({sizes.batches} batches of {BATCH} × 1 KiB)"
    )
    prefix = settings.prefix("transports")
    with MessagingClient(settings.address, prefix) as admin, ExitStack() as stack:
        admin.admin.init_tables()
        stack.callback(admin.admin.drop_tables)
        folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-tls-")))
        clients = {
            mode: stack.enter_context(
                MessagingClient(config=Config((address,), prefix, timeout_seconds=60, transport=transport))
            )
            for mode, (address, transport) in _servers(stack, folder, flags).items()
        }
        publish, fetch = measure(clients, sizes, settings.rounds, "transports")
    rows = []
    for mode in MODES:
        base = BASELINE.get(mode)
        pub, got = median(publish[mode]), median(fetch[mode])
        pub_ratio = f"{ratio(pub, median(publish[base])):.2f}×" if base else ""
        fetch_ratio = f"{ratio(got, median(fetch[base])):.2f}×" if base else ""
        rows.append([mode, pub, pub_ratio, got, fetch_ratio, base or ""])
    result.table(["mode", "publish msg/s", "÷ baseline", "fetch msg/s", "÷ baseline", "baseline"], rows)
    for mode in GOALS:
        base = BASELINE[mode]
        for what, rates in (("publish", publish), ("fetch", fetch)):
            r = ratio(median(rates[mode]), median(rates[base]))
            result.goal(GOAL_TEXT[what].format(item=mode, base=base), f"{r:.2f}×", r >= GOAL)
    result.notes.append(
        f"Stock ThriftServer JVMs with -threadpool, {jit}; fetch: the median of {sizes.fetches} fetches "
        "of the whole topic per mode and round. HBase's binary Thrift server has no TLS of its own: HTTPS (its TLS) "
        "is measured against HTTP."
    )
    result.samples = {"publish_msgs_per_s": publish, "fetch_msgs_per_s": fetch, "batches": sizes.batches}
    return result


def _servers(stack: ExitStack, folder: Path, flags: tuple[str, ...]) -> dict[str, tuple[str, ThriftTransport]]:
    """Every mode's (address, transport), each a gateway JVM of its own with ``flags`` (started a few at once);
    ``stack`` stops them."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(folder / "ca.pem"))
    keystore = gateway_keystore(ca, folder)
    transports = {
        "plain": ThriftTransport(),
        "framed": ThriftTransport(framed=True),
        "compact": ThriftTransport(compact=True),
        "framed+compact": ThriftTransport(framed=True, compact=True),
        "http": ThriftTransport(http=True),
        "https": ThriftTransport(http=True, tls=True, ca_file=str(folder / "ca.pem")),
    }

    def start(mode: str) -> ThriftGateway:
        t = transports[mode]
        tls: Keystore | None = keystore if t.tls else None
        return start_gateway(t.framed, t.compact, http=t.http, keystore=tls, java_flags=flags)

    started = time.perf_counter()
    with ThreadPoolExecutor(STARTING) as pool:
        futures = {mode: pool.submit(start, mode) for mode in MODES}
        for future in futures.values():  # every one started is stopped, even if another failed
            if future.exception() is None:
                stack.callback(future.result().stop)
        served = {mode: (future.result().address, transports[mode]) for mode, future in futures.items()}
    progress(f"transports: {len(served)} gateways up in {time.perf_counter() - started:.0f} s")
    return served


def measure(
    clients: dict[str, MessagingClient], sizes: Sizes, rounds: int, label: str
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Publish and fetch rates (msg/s) of each client (mode -> client): first a warm-up each, unmeasured; then
    ``rounds`` rounds of ``sizes.batches`` published per mode, the modes taking turns of :data:`TURN` batches,
    and ``sizes.fetches`` fetches of each mode's topic, taking turns fetch by fetch; who goes first rotates. Each
    turn and each fetch is a sample (a stall of HBase's, a flush say, is one sample of one mode, not a round)."""
    modes = list(clients)
    batch = payloads(BATCH, PAYLOAD_SIZE)
    publish: dict[str, list[float]] = {mode: [] for mode in modes}
    fetch: dict[str, list[float]] = {mode: [] for mode in modes}
    warm = {}
    for mode, client in clients.items():  # warm-up: each gateway's code compiled before the clock starts
        started = time.perf_counter()
        topic = new_topic(client, f"warm_{_name(mode)}")
        _publish(client, topic, batch, sizes.warm_batches)
        for _ in range(sizes.warm_fetches):
            _fetch_all(client, topic, sizes.warm_batches * BATCH)
        warm[mode] = time.perf_counter() - started
    progress(
        f"{label}: warmed up in {sum(warm.values()):.0f} s (" + ", ".join(f"{m} {s:.1f}" for m, s in warm.items()) + ")"
    )
    for r in range(rounds):
        topics = {mode: new_topic(client, f"t{r}_{_name(mode)}") for mode, client in clients.items()}
        for i in range(0, sizes.batches, TURN):
            for mode in rotated(modes, r + i // TURN):
                times = min(TURN, sizes.batches - i)
                publish[mode].append(times * BATCH / _seconds(_publish, clients[mode], topics[mode], batch, times))
        for i in range(sizes.fetches):
            for mode in rotated(modes, r + i):
                seconds = _seconds(_fetch_all, clients[mode], topics[mode], sizes.batches * BATCH)
                fetch[mode].append(sizes.batches * BATCH / seconds)
        progress(
            f"{label} round {r + 1}/{rounds} (publish/fetch msg/s): "
            + ", ".join(f"{m} {median(publish[m]):,.0f}/{median(fetch[m]):,.0f}" for m in modes)
        )
    return publish, fetch


def _name(mode: str) -> str:
    return mode.replace("+", "_").replace("-", "_")


def _seconds(call: Callable[..., object], *args: object) -> float:
    """How long ``call(*args)`` took."""
    start = time.perf_counter()
    call(*args)
    return time.perf_counter() - start


def _publish(client: MessagingClient, topic: TopicId, batch: list[bytes], times: int) -> None:
    for _ in range(times):
        client.publish(topic, batch)


def _fetch_all(client: MessagingClient, topic: TopicId, total: int) -> None:
    read = sum(1 for _ in client.fetch(topic))
    if read != total:
        raise AssertionError(f"fetch read {read} messages, expected {total}")
